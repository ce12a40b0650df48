"""``export --format raw``: each array as a little-endian raw ``.bin`` + a ``manifest.json`` per case.

``OUT/<case>/input.<k>.bin``, ``output.<k>.bin``, ``acc.<k>.bin``; ``manifest.json`` lists every
file with dtype, shape and byte count, and repeats the case's quantization, plan and provenance,
so a device-side test needs neither Python nor NumPy.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .case import Case, prepare_out_dir


def write_raw(cases: list[Case], out: str | Path, overwrite: bool = False) -> Path:
    root = prepare_out_dir(out, overwrite)
    for c in cases:
        d = root / c.name
        d.mkdir()
        files = []
        for key in sorted(c.arrays):
            if not key.startswith(("input.", "output.", "acc.")):
                continue
            arr = np.ascontiguousarray(c.arrays[key])
            le = arr.astype(arr.dtype.newbyteorder("<")) if arr.dtype.byteorder not in ("|",) else arr
            (d / f"{key}.bin").write_bytes(le.tobytes())
            files.append({"file": f"{key}.bin", "array": key, "dtype": arr.dtype.name, "shape": list(arr.shape),
                          "bytes": int(arr.nbytes), "byte_order": "little"})
        m = c.meta
        manifest = {"case": c.name, "op": m["op"], "source_op": m.get("source_op"), "node": m.get("node"),
                    "files": files, "inputs": m["inputs"], "outputs": m["outputs"], "attrs": m.get("attrs"),
                    "plan": m.get("plan"), "scheme": m["scheme"], "provenance": m.get("provenance")}
        (d / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return root
