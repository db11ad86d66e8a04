"""Runs OML's own training pipeline from PyPI (open-metric-learning 4.0.0,
`oml.lightning.pipelines.train.extractor_training_pipeline`) on an OML config, as a user of OML
runs it, and prints one JSON line with what bench/versus_oml.sh sets beside oml-train:

    /opt/oml-cpp/venv/bin/python bench/oml_pipeline.py --config CONFIG.yaml --workdir DIR \
        [--set key=value ...]

- the config is read with OmegaConf (as Hydra gives it to the pipeline), `--set` overrides
  applied (dotted keys, YAML values), then passed to the pipeline unchanged;
- the pipeline runs in --workdir (OML writes its TensorBoard logs and checkpoints/ into the
  working directory, as under Hydra's `chdir: True`);
- wall_s is the whole process, from this script's start (the Python, torch and Lightning imports
  included, as a user's `python train.py` pays them) to the pipeline's return;
- steps: Lightning's global_step at the end; cmc@1 is the last logged OVERALL/cmc/1 (read back
  from the TensorBoard event file OML's logger wrote).

Test-and-benchmark only: nothing in oml-cpp runs Python.
"""

import time

START = time.perf_counter()

import argparse  # noqa: E402
import glob  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--config", required=True)
    p.add_argument("--workdir", required=True)
    p.add_argument("--set", action="append", default=[], help="key=value (dotted key, YAML value)")
    return p.parse_args()


def last_scalar(workdir, tag):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    best = None
    for path in glob.glob(os.path.join(workdir, "**", "events.out.tfevents.*"), recursive=True):
        events = EventAccumulator(path, size_guidance={"scalars": 0})
        events.Reload()
        if tag in events.Tags()["scalars"]:
            last = events.Scalars(tag)[-1]
            if best is None or last.step >= best.step:
                best = last
    return None if best is None else best.value


def main():
    args = parse_args()
    from omegaconf import OmegaConf

    import yaml

    cfg = OmegaConf.load(args.config)
    for item in args.set:
        key, _, value = item.partition("=")
        OmegaConf.update(cfg, key, yaml.safe_load(value), merge=False)
    # Paths in the config are relative to where the benchmark was started, not to the workdir.
    cfg.dataset_root = os.path.abspath(cfg.dataset_root)
    os.makedirs(args.workdir, exist_ok=True)
    os.chdir(args.workdir)

    import pytorch_lightning as pl
    from oml.lightning.pipelines.train import extractor_training_pipeline

    steps = {}
    original_fit = pl.Trainer.fit

    def fit_and_count(trainer, *a, **kw):  # the pipeline's own fit; records the steps it took
        result = original_fit(trainer, *a, **kw)
        steps["global_step"] = trainer.global_step
        return result

    pl.Trainer.fit = fit_and_count
    extractor_training_pipeline(OmegaConf.to_container(cfg, resolve=True))
    wall = time.perf_counter() - START
    print(
        json.dumps(
            {
                "program": "oml",
                "wall_s": round(wall, 2),
                "steps": steps.get("global_step"),
                "cmc1": last_scalar(".", "OVERALL/cmc/1"),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
