"""Vitis AI fixed-point dumps.

* ``vai_q_pytorch`` ``export_xmodel(deploy_check=True)``: ``deploy_check_data_int/<graph>/`` with
  ``<node>_fix.bin`` (int8 codes) or ``<node>_fix.txt`` (one integer per line); recurrent graphs use
  ``frame_<i>/`` sub-folders, read as samples.
* DPU dumps (``XLNX_ENABLE_DUMP=1 xdputil run``): folders of ``*.bin`` int8 tensors.

Files carry neither shape nor fix position: data is NHWC, flat, reshaped against the model; the fix
position comes from an optional ``manifest`` (see ``rawdir.py``, ``fix_pos``) or, failing that, the
model's own quantization parameters are used to dequantize (file layout inferred from UG1414).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from ..errors import DumpError
from .model import Dump, DumpTensor, merge_samples
from .rawdir import find_manifest, load_manifest, read_raw_file


def _stem(f: Path) -> str:
    return re.sub(r"_fix$", "", f.stem)


def _read_folder(folder: Path) -> Dump:
    d = Dump(str(folder), "vitis")
    files = sorted(list(folder.rglob("*.bin")) + list(folder.rglob("*.txt")))
    for f in files:
        if "frame_" in f.relative_to(folder).as_posix().split("/")[0] and f.parent != folder:
            continue
        if "_weight" in f.stem or "_bias" in f.stem:
            continue
        rel = f.relative_to(folder).with_name(_stem(f)).as_posix()
        if f.suffix == ".txt":
            try:
                a = np.loadtxt(f, dtype=np.int64, ndmin=1).astype(np.int8)
            except ValueError as e:
                raise DumpError(f"not one integer per line ({e})", str(f)) from None
        else:
            a = read_raw_file(f, np.dtype(np.int8), None, str(f))
        if rel in d.tensors:
            continue  # the .bin and .txt of one node hold the same codes
        d.add(DumpTensor(rel, [a], layout="NHWC", file=f.name))
    return d


def read_vitis(path: str | Path) -> Dump:
    p = Path(path)
    if not p.is_dir():
        raise DumpError("not a folder", str(p))
    frames = sorted((x for x in p.rglob("frame_*") if x.is_dir()), key=lambda x: x.as_posix())
    d = merge_samples([_read_folder(f) for f in frames], str(p), "vitis") if frames else _read_folder(p)
    d.format = "vitis"
    if not d.tensors:
        raise DumpError("no *_fix.bin / *.bin / *.txt tensors", str(p))
    m = find_manifest(p)
    if m is not None:
        data = load_manifest(m)
        for e in data["tensors"]:
            t = d.tensors.get(str(e.get("file", e.get("name", ""))).rsplit(".", 1)[0]) or \
                d.tensors.get(str(e.get("name")))
            if t is not None and e.get("fix_pos") is not None:
                t.fix_pos = int(e["fix_pos"])
            if t is not None and e.get("name") and t.name != e["name"]:
                d.tensors[e["name"]] = d.tensors.pop(t.name)
                t.name = e["name"]
    return d
