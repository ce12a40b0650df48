"""Headerless ``.raw`` / ``.bin`` tensors described by a small manifest (JSON or YAML).

Manifest (``manifest.json`` / ``manifest.yaml`` / ``raw_manifest.json`` in the folder, or given
directly)::

    byte_order: little            # or big; default little
    dtype: float32                # default dtype of every entry
    layout: NHWC                  # default layout hint (optional)
    samples: [run0, run1]         # optional per-sample subfolders holding the same files
    tensors:
      - name: conv1/Relu          # model tensor name
        file: conv1_Relu.raw      # relative to the folder (or to each sample subfolder)
        dtype: int8
        shape: [1, 8, 8, 4]       # optional; flat data is reshaped against the model
        layout: NHWC
        scale: 0.05               # optional affine params (number or list) ...
        zero_point: 0
        axis: null
        fix_pos: 4                # ... or a power-of-two fix position: real = q * 2**-fix_pos
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..errors import DumpError
from ..ir import QuantParams
from .model import Dump, DumpTensor

MANIFEST_NAMES = ("manifest.json", "manifest.yaml", "manifest.yml", "raw_manifest.json", "raw_manifest.yaml")


def find_manifest(folder: Path) -> Path | None:
    for n in MANIFEST_NAMES:
        if (folder / n).is_file():
            return folder / n
    return None


def load_manifest(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise DumpError(f"unreadable manifest ({e})", str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("tensors"), list):
        raise DumpError("manifest must be a mapping with a 'tensors' list", str(path))
    return data


def is_raw_manifest(data: dict[str, Any]) -> bool:
    return data.get("format") != "refinterp-npy-dump" and all(
        isinstance(e, dict) and "file" in e and not str(e["file"]).endswith(".npy") for e in data["tensors"])


def _dtype(v: Any, where: str) -> np.dtype:
    try:
        dt = np.dtype(str(v))
    except TypeError:
        raise DumpError(f"unknown dtype '{v}'", where) from None
    if dt.hasobject:
        raise DumpError(f"dtype '{v}' is not a plain numeric type", where)
    return dt


def quant_from_entry(e: dict[str, Any], where: str) -> QuantParams | None:
    if e.get("scale") is None:
        return None
    try:
        return QuantParams(np.asarray(e["scale"], np.float32), np.asarray(e.get("zero_point", 0), np.int64),
                           e.get("axis"))
    except (TypeError, ValueError) as e2:
        raise DumpError(f"bad scale/zero_point ({e2})", where) from None


def read_raw_file(f: Path, dt: np.dtype | None, shape: Any, where: str) -> np.ndarray:
    try:
        buf = f.read_bytes()
    except OSError as e:
        raise DumpError(f"cannot read ({e.strerror})", str(f)) from None
    if dt is None:
        return np.frombuffer(buf, np.uint8).copy()
    if len(buf) % dt.itemsize:
        raise DumpError(f"{len(buf)} bytes is not a whole number of {dt} values", str(f))
    a = np.frombuffer(buf, dt).copy()
    if shape is not None:
        n = int(np.prod(shape)) if len(shape) else 1
        if a.size % max(n, 1):
            raise DumpError(f"{a.size} values do not fill shape {list(shape)}", where)
        k = a.size // max(n, 1)
        a = a.reshape(tuple(shape) if k == 1 else (k,) + tuple(shape))
    return a


def read_raw_dump(path: str | Path) -> Dump:
    p = Path(path)
    mpath = p if p.is_file() else find_manifest(p)
    if mpath is None:
        raise DumpError("no manifest (manifest.json / manifest.yaml) describing the raw files", str(p))
    root = mpath.parent
    m = load_manifest(mpath)
    order = str(m.get("byte_order", "little")).lower()
    if order not in ("little", "big"):
        raise DumpError(f"byte_order must be 'little' or 'big', got '{order}'", str(mpath))
    folders = [root / s for s in m.get("samples") or []] or [root]
    d = Dump(str(root), "raw", meta={"manifest": str(mpath)})
    for i, e in enumerate(m["tensors"]):
        where = f"{mpath}: tensors[{i}]"
        if not isinstance(e, dict) or "name" not in e or "file" not in e:
            raise DumpError("each tensor entry needs 'name' and 'file'", where)
        rel = Path(str(e["file"]))
        if rel.is_absolute() or ".." in rel.parts:
            raise DumpError(f"file '{rel}' is outside the dump folder", where)
        dt = _dtype(e.get("dtype", m.get("dtype", "float32")), where)
        dt = dt.newbyteorder("<" if order == "little" else ">") if dt.itemsize > 1 else dt
        arrs = []
        for folder in folders:
            f = folder / rel
            if not f.is_file():
                raise DumpError(f"missing file '{rel}' for tensor '{e['name']}'", str(folder))
            arrs.append(read_raw_file(f, dt, e.get("shape"), where).astype(dt.newbyteorder("=")))
        fix = e.get("fix_pos")
        d.add(DumpTensor(str(e["name"]), arrs, layout=e.get("layout", m.get("layout")),
                         quant=quant_from_entry(e, where), fix_pos=int(fix) if fix is not None else None,
                         file=str(rel)))
    return d
