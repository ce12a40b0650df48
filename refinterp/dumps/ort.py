"""ONNX Runtime node I/O dumps: a folder of ``*.tensorproto`` files (one serialized TensorProto each;
written by ORT builds with ``onnxruntime_DEBUG_NODE_INPUTS_OUTPUTS=1``).  The tensor name is the
proto's ``name`` when set, else the file stem without ORT's ``_rank_N`` suffix (the file name itself
is the sanitised tensor name; alignment matches sanitised names).  Per-sample subfolders hold one run
each (ORT overwrites its files on every run)."""
from __future__ import annotations

import re
from pathlib import Path

from ..errors import DumpError
from .model import Dump, DumpTensor


def read_ort_dump(path: str | Path) -> Dump:
    from ..loaders.onnx_dump_io import read_tensorproto

    p = Path(path)
    files = sorted(p.glob("*.tensorproto")) if p.is_dir() else [p]
    if not files:
        raise DumpError("no *.tensorproto files", str(p))
    d = Dump(str(p), "ort")
    for f in files:
        name, a = read_tensorproto(f)
        name = name or re.sub(r"_rank_\d+$", "", f.stem)
        if name in d.tensors:
            raise DumpError(f"two files hold tensor '{name}'", str(f))
        d.add(DumpTensor(name, [a], file=f.name))
    return d
