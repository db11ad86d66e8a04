"""Uploads an offline Neptune run as `neptune sync` does, into the neptune client's in-memory
backend, and prints what the run then holds as JSON.

    python neptune_offline_reader.py <folder holding .neptune> <project>

`neptune sync --offline-only --project P` is SyncRunner.sync_all_offline with the hosted backend.
This calls the same function with NeptuneBackendMock (the backend of the client's mode="debug")
in place of Neptune's server, on a copy of the folder (a sync moves the run and deletes it): the
client's DiskQueue reads the operation log, Operation.from_dict decodes each operation, and the
mock applies them, refusing what does not type-check (a series logged into a string, ...).
Nothing here parses the format itself. Used by tests/integration/neptune_tests.cpp.
"""

import base64
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

from neptune.cli.sync import SyncRunner
from neptune.internal.backends.neptune_backend_mock import NeptuneBackendMock
from neptune.internal.container_type import ContainerType
from neptune.internal.operation import LogFloats, LogImages, UploadFile


class RecordingBackend(NeptuneBackendMock):
    """The mock backend, keeping what it was sent: each series value with its step, each file's
    content, and every error (sync itself ignores the errors a backend returns)."""

    def __init__(self):
        super().__init__()
        self.runs = []
        self.errors = []
        self.operations = 0
        self.series = {}
        self.images = {}
        self.files = {}

    def create_run(self, project_id, *args, **kwargs):
        run = super().create_run(project_id, *args, **kwargs)
        self.runs.append(run.id)
        return run

    def execute_operations(self, container_id, container_type, operations, operation_storage):
        for op in operations:
            self.operations += 1
            path = "/".join(op.path)
            if isinstance(op, LogFloats):
                self.series.setdefault(path, []).extend([v.step, v.value] for v in op.values)
            elif isinstance(op, LogImages):
                for v in op.values:
                    data = base64.b64decode(v.value.data)
                    self.images.setdefault(path, []).append([v.step, len(data), hashlib.sha256(data).hexdigest()])
            elif isinstance(op, UploadFile):
                content = Path(op.get_absolute_path(operation_storage)).read_bytes()
                self.files[path] = {"ext": op.ext, "size": len(content), "sha256": hashlib.sha256(content).hexdigest()}
        count, errors = super().execute_operations(container_id, container_type, operations, operation_storage)
        self.errors.extend(str(e) for e in errors)
        return count, errors


def atoms(structure, prefix=""):
    """The run's single values (strings, numbers, booleans, tag sets) by path."""
    out = {}
    for key, value in structure.items():
        path = f"{prefix}/{key}" if prefix else key
        if isinstance(value, dict):
            out.update(atoms(value, path))
            continue
        kind = type(value).__name__
        if kind in ("String", "Float", "Integer", "Boolean"):
            out[path] = value.value
        elif kind == "StringSet":
            out[path] = sorted(value.values)
    return out


def main(folder, project):
    backend = RecordingBackend()
    stdout = sys.stdout
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "run"
        shutil.copytree(Path(folder) / ".neptune", copy / ".neptune", symlinks=False)
        sys.stdout = sys.stderr  # the client's progress lines
        try:
            SyncRunner.sync_all_offline(backend=backend, base_path=copy / ".neptune", project_name=project)
        finally:
            sys.stdout = stdout
        left_offline = list((copy / ".neptune" / "offline").iterdir())
    out = {"runs": len(backend.runs), "errors": backend.errors, "operations": backend.operations,
           "left_offline": len(left_offline), "series": backend.series, "images": backend.images,
           "files": backend.files, "attributes": {}}
    if backend.runs:
        container = backend._get_container(backend.runs[0], ContainerType.RUN)
        out["attributes"] = atoms(container.get_structure())
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
