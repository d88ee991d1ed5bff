"""A minimal osfoundry checkpoint store, in the format of the original
Python class: <project>/.osfoundry/checkpoints/index.json (a JSON list of
turns) and blobs/<sha256> holding raw pre-image bytes. Used by the tests
to build real stores for `turnback import-osfoundry`.

Usage: osfoundry.py PROJECT TURN LABEL PATH...   (records the pre-images of
PATH..., each absolute or relative to PROJECT, exactly as the class does:
absolute paths, no check that they lie inside the project)
"""

import hashlib
import json
import os
import sys
import time

MAX_BYTES = 1 << 20


class Checkpoints:
    def __init__(self, project):
        self.project = os.path.abspath(project)
        self.dir = os.path.join(self.project, ".osfoundry", "checkpoints")
        self.blobs = os.path.join(self.dir, "blobs")
        self.index = os.path.join(self.dir, "index.json")
        os.makedirs(self.blobs, exist_ok=True)
        if os.path.exists(self.index):
            with open(self.index) as f:
                self.turns = json.load(f)
        else:
            self.turns = []

    def _pre(self, path):
        if not os.path.lexists(path):
            return {"kind": "absent"}
        if not os.path.isfile(path):
            return {"kind": "skipped", "reason": "not a regular file"}
        size = os.path.getsize(path)
        if size > MAX_BYTES:
            return {"kind": "skipped", "reason": f"larger than {MAX_BYTES} bytes"}
        with open(path, "rb") as f:
            data = f.read()
        sha = hashlib.sha256(data).hexdigest()
        blob = os.path.join(self.blobs, sha)
        if not os.path.exists(blob):
            with open(blob + ".tmp", "wb") as f:
                f.write(data)
            os.replace(blob + ".tmp", blob)
        return {"kind": "content", "sha256": sha, "bytes": len(data)}

    def checkpoint(self, turn, label, paths):
        entry = {"turn": turn, "label": label, "at": time.time_ns(), "files": []}
        for p in paths:
            path = p if os.path.isabs(p) else os.path.join(self.project, p)
            entry["files"].append({"path": path, "pre": self._pre(path)})
        self.turns.append(entry)
        with open(self.index + ".tmp", "w") as f:
            json.dump(self.turns, f, indent=1)
        os.replace(self.index + ".tmp", self.index)


if __name__ == "__main__":
    project, turn, label, *paths = sys.argv[1:]
    Checkpoints(project).checkpoint(turn, label, paths)
