"""Sums a Chrome trace's CPU operators by name: where a training step's time goes, for a trace
oml-cpp wrote (`oml-train --profile`, `OML_BENCH_TRACE=FILE bench_precision ...`) or one
torch.profiler exported (`prof.export_chrome_trace`), so that the two are read the same way.

    python bench/trace_ops.py TRACE.json [TRACE2.json] [--top N] [--steps S]

Self time: an event's duration less that of the events nested directly inside it on the same
thread. With two traces the table puts them side by side (ms per step when --steps is given,
else ms in the whole trace), the operators ordered by the larger self time.
"""
import argparse
import collections
import json


def self_times(path):
    """{operator name: [self microseconds, calls]} over the trace's complete ("X") CPU events."""
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    per_thread = collections.defaultdict(list)
    for e in events:
        if e.get("ph") != "X" or e.get("cat") not in (None, "cpu_op", "user_annotation", "Operator"):
            continue
        per_thread[(e.get("pid"), e.get("tid"))].append((float(e["ts"]), float(e.get("dur", 0)), e["name"]))
    totals = collections.defaultdict(lambda: [0.0, 0])
    for spans in per_thread.values():
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack = []  # [end, name, duration, the direct children's time]
        for ts, dur, name in spans:
            while stack and ts >= stack[-1][0]:
                _, parent, parent_dur, children = stack.pop()
                totals[parent][0] += parent_dur - children
            if stack:
                stack[-1][3] += dur
            stack.append([ts + dur, name, dur, 0.0])
            totals[name][1] += 1
        for _, parent, parent_dur, children in stack:
            totals[parent][0] += parent_dur - children
    return totals


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("traces", nargs="+")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--steps", type=int, default=0)
    args = parser.parse_args()
    tables = [self_times(p) for p in args.traces]
    scale = 1e-3 / args.steps if args.steps else 1e-3
    names = sorted({n for t in tables for n in t}, key=lambda n: -max(t.get(n, [0, 0])[0] for t in tables))
    unit = "ms/step" if args.steps else "ms"
    print("| operator | " + " | ".join(f"{unit} (calls) {i + 1}" for i in range(len(tables))) + " |")
    print("|---|" + "---|" * len(tables))
    for n in names[: args.top]:
        cells = []
        for t in tables:
            self_us, calls = t.get(n, [0.0, 0])
            cells.append(f"{self_us * scale:.1f} ({calls})")
        print(f"| {n} | " + " | ".join(cells) + " |")
    print("| **all** | " + " | ".join(f"{sum(v[0] for v in t.values()) * scale:.1f}" for t in tables) + " |")


if __name__ == "__main__":
    main()
