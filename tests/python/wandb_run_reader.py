"""Reads an offline W&B run with the wandb package's own reader and prints it as JSON.

    python wandb_run_reader.py <offline-run folder>

The records are read by wandb's DataStore (wandb.sdk.internal.datastore, the reader `wandb sync`
used before its Go rewrite) and decoded as wandb_internal_pb2.Record: nothing here parses the
file format itself, so what this prints is what W&B sees. Used by tests/integration/wandb_tests.cpp.
"""

import glob
import json
import os
import sys

from wandb.proto import wandb_internal_pb2
from wandb.sdk.internal import datastore


def item_key(item):
    return "/".join(item.nested_key) if item.nested_key else item.key


def main(folder):
    (path,) = glob.glob(os.path.join(folder, "run-*.wandb"))
    store = datastore.DataStore()
    store.open_for_scan(path)
    out = {"record_types": [], "runs": [], "history": [], "summary": {}, "files": [], "exits": [], "nums": []}
    while True:
        data = store.scan_data()
        if data is None:
            break
        record = wandb_internal_pb2.Record()
        record.ParseFromString(data)
        kind = record.WhichOneof("record_type")
        out["record_types"].append(kind)
        out["nums"].append(record.num)
        if kind == "run":
            run = record.run
            out["runs"].append(
                {
                    "run_id": run.run_id,
                    "project": run.project,
                    "entity": run.entity,
                    "display_name": run.display_name,
                    "notes": run.notes,
                    "group": run.run_group,
                    "job_type": run.job_type,
                    "tags": list(run.tags),
                    "resumed": run.resumed,
                    "starting_step": run.starting_step,
                    "stream_id": record._info.stream_id,
                    "config": {item_key(i): json.loads(i.value_json) for i in run.config.update},
                }
            )
        elif kind == "history":
            row = {item_key(i): json.loads(i.value_json) for i in record.history.item}
            out["history"].append({"step": record.history.step.num, "values": row})
        elif kind == "summary":
            for i in record.summary.update:
                out["summary"][item_key(i)] = json.loads(i.value_json)
        elif kind == "files":
            for f in record.files.files:
                out["files"].append({"path": f.path, "type": f.type, "policy": f.policy})
        elif kind == "exit":
            out["exits"].append(record.exit.exit_code)
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1])
