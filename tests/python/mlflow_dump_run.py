"""Prints, as JSON, the one run of an MLflow experiment as MLflow's own client reads it back.

    python mlflow_dump_run.py TRACKING_URI EXPERIMENT_NAME

{"run_id", "run_name", "status", "params": {k: v}, "tags": {k: v},
 "metrics": {key: [[step, value, timestamp], ...]}, "artifacts": [path, ...]} (artifacts recursive,
files only). tests/integration/mlflow_tests.cpp compares it with train.jsonl / metrics.jsonl.
"""

import json
import math
import os
import sys

os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3.x reads file: stores only when asked

from mlflow import MlflowClient  # noqa: E402


def artifacts(client, run_id, path=None):
    out = []
    for item in client.list_artifacts(run_id, path):
        out.extend(artifacts(client, run_id, item.path) if item.is_dir else [item.path])
    return out


def number(value):
    return value if math.isfinite(value) else str(value)


def main():
    uri, experiment_name = sys.argv[1], sys.argv[2]
    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(experiment_name)
    if experiment is None:
        sys.exit(f"no experiment '{experiment_name}' at {uri}")
    runs = client.search_runs([experiment.experiment_id])
    if len(runs) != 1:
        sys.exit(f"experiment '{experiment_name}' has {len(runs)} runs, expected 1")
    run = runs[0]
    run_id = run.info.run_id
    metrics = {}
    for key in run.data.metrics:
        history = sorted(client.get_metric_history(run_id, key), key=lambda m: (m.step, m.timestamp))
        metrics[key] = [[m.step, number(m.value), m.timestamp] for m in history]
    print(
        json.dumps(
            {
                "run_id": run_id,
                "run_name": run.info.run_name,
                "status": run.info.status,
                "params": run.data.params,
                "tags": run.data.tags,
                "metrics": metrics,
                "artifacts": sorted(artifacts(client, run_id)),
            }
        )
    )


if __name__ == "__main__":
    main()
