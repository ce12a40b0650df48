"""refinterp's own dump: a folder with one ``.npy`` per tensor plus ``manifest.json``.

manifest.json (format_version 1)::

    {"format": "refinterp-npy-dump", "format_version": 1, "refinterp_version": "...",
     "model": {"path": ..., "format": "onnx"|"tflite"|null}, "scheme": "float32",
     "samples": null | N,          # N: every array has a leading sample axis of size N
     "tensors": [{"name", "file", "dtype", "shape", "layout",
                  "quantization": {"scale": [...], "zero_point": [...], "axis": a} | null,
                  "node": producing node name | null, "op": canonical op | null,
                  "source_op": op in the model file | null, "index": execution index | null}, ...]}

Writing is atomic per file (temporary name + ``os.replace``), the manifest is written last, and
nothing that the dump does not name is ever deleted.  Reading works with or without a manifest
(then every ``*.npy`` is a tensor named after its file stem).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..fsutil import atomic_write, temp_dir_beside
from ..errors import DumpError, OutputError
from ..ir import QuantParams
from .model import Dump, DumpTensor

MANIFEST = "manifest.json"
FORMAT_NAME = "refinterp-npy-dump"
FORMAT_VERSION = 1
_MAX_STEM = 120


def sanitize_file_stem(name: str) -> str:
    stem = re.sub(r"[^A-Za-z0-9_.-]", "_", name).strip(".") or "tensor"
    return stem[:_MAX_STEM]


def _unique_stems(names: list[str]) -> dict[str, str]:
    """File stem per tensor name; unique even on case-insensitive file systems."""
    used: set[str] = {MANIFEST.lower().rsplit(".", 1)[0]}
    out: dict[str, str] = {}
    for n in names:
        base = sanitize_file_stem(n)
        stem, k = base, 1
        while stem.lower() in used:
            stem = f"{base}__{k}"
            k += 1
        used.add(stem.lower())
        out[n] = stem
    return out


def _atomic_bytes(path: Path, write) -> None:
    atomic_write(path, write)


def _tensor_entry(name: str, file: str, arr: np.ndarray, graph, producers, samples) -> dict[str, Any]:
    info = graph.tensors.get(name) if graph is not None else None
    node = producers.get(name)
    shape = list(arr.shape[1:] if samples is not None else arr.shape)
    return {
        "name": name, "file": file, "dtype": str(arr.dtype), "shape": shape,
        "layout": info.layout if info is not None else None,
        "quantization": info.quant.to_json() if info is not None and info.quant is not None else None,
        "node": node.name if node is not None else None,
        "op": node.op if node is not None else None,
        "source_op": (node.source_op or None) if node is not None else None,
        "index": int(node.index) if node is not None else None,
    }


def write_npy_dump(out_dir: str | os.PathLike, tensors: Mapping[str, np.ndarray], graph=None,
                   scheme_name: str | None = None, overwrite: bool = False,
                   samples: int | None = None) -> Path:
    """Write ``tensors`` (name -> array, in execution order) as a refinterp dump folder.

    ``samples``: when given, every array has a leading sample axis of that size.
    Refuses a non-empty ``out_dir`` unless ``overwrite`` (then only the files named here are replaced).
    """
    from .. import __version__

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise OutputError("exists and is not a folder", str(out))
    if out.is_dir() and any(out.iterdir()) and not overwrite:
        raise OutputError("folder is not empty (use --overwrite to replace the files of a previous dump)",
                          str(out))
    arrays: dict[str, np.ndarray] = {}
    for name, v in tensors.items():
        a = np.asarray(v)
        if a.dtype.hasobject:
            raise OutputError(f"tensor '{name}' has dtype object; refusing to write it", str(out))
        if samples is not None and (a.ndim == 0 or a.shape[0] != samples):
            raise OutputError(f"tensor '{name}' has shape {list(a.shape)}; expected a leading sample axis "
                              f"of {samples}", str(out))
        arrays[name] = a
    stems = _unique_stems(list(arrays))
    producers = graph.producer() if graph is not None else {}
    manifest = {
        "format": FORMAT_NAME, "format_version": FORMAT_VERSION, "refinterp_version": __version__,
        "model": {"path": getattr(graph, "path", None), "format": getattr(graph, "format", None)},
        "scheme": scheme_name, "samples": samples, "tensors": [],
    }
    fresh = not out.exists()
    if fresh:
        out.parent.mkdir(parents=True, exist_ok=True)
    target = temp_dir_beside(out) if fresh else out
    try:
        for name, a in arrays.items():
            fname = stems[name] + ".npy"
            _atomic_bytes(target / fname, lambda f, a=a: np.save(f, a, allow_pickle=False))
            manifest["tensors"].append(_tensor_entry(name, fname, a, graph, producers, samples))
        text = json.dumps(manifest, indent=1).encode()
        _atomic_bytes(target / MANIFEST, lambda f: f.write(text))
        if fresh:
            os.rename(target, out)
    except BaseException:
        if fresh:  # only our own temporary folder, holding only files we wrote
            for p in target.iterdir():
                p.unlink()
            target.rmdir()
        raise
    return out


def _quant_from_json(q: Any, where: str) -> QuantParams | None:
    if q is None:
        return None
    if not isinstance(q, dict) or "scale" not in q:
        raise DumpError("'quantization' must be null or an object with 'scale'", where)
    try:
        return QuantParams(np.asarray(q["scale"], np.float32), np.asarray(q.get("zero_point", 0), np.int64),
                           q.get("axis"), int(q.get("block_size", 0) or 0))
    except (TypeError, ValueError) as e:
        raise DumpError(f"bad quantization entry ({e})", where) from None


def load_npy(path: Path) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as e:
        raise DumpError(f"cannot read .npy ({e}); object arrays are refused", str(path)) from None
    except OSError as e:
        raise DumpError(f"cannot read .npy ({e})", str(path)) from None


def read_npy_dump(path: str | os.PathLike) -> Dump:
    root = Path(path)
    if not root.is_dir():
        raise DumpError("not a folder", str(root))
    mpath = root / MANIFEST
    if not mpath.is_file():
        files = sorted(root.glob("*.npy"))
        if not files:
            raise DumpError("no .npy files and no manifest.json", str(root))
        d = Dump(str(root), "npy")
        for f in files:
            d.add(DumpTensor(f.stem, [load_npy(f)], file=f.name))
        return d
    try:
        m = json.loads(mpath.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DumpError(f"unreadable manifest ({e})", str(mpath)) from None
    if not isinstance(m, dict) or not isinstance(m.get("tensors"), list):
        raise DumpError("manifest must be an object with a 'tensors' list", str(mpath))
    ver = m.get("format_version", 1)
    if not isinstance(ver, int) or ver > FORMAT_VERSION:
        raise DumpError(f"manifest format_version {ver!r} is newer than this refinterp reads "
                        f"({FORMAT_VERSION})", str(mpath))
    samples = m.get("samples")
    d = Dump(str(root), "npy", meta={k: m.get(k) for k in ("model", "scheme", "refinterp_version", "samples")})
    for i, e in enumerate(m["tensors"]):
        where = f"{mpath}: tensors[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not isinstance(e.get("file"), str):
            raise DumpError("each tensor entry needs 'name' and 'file'", where)
        f = root / e["file"]
        if Path(e["file"]).is_absolute() or ".." in Path(e["file"]).parts:
            raise DumpError(f"file '{e['file']}' is outside the dump folder", where)
        if not f.is_file():
            raise DumpError(f"missing file '{e['file']}' for tensor '{e['name']}'", str(root))
        a = load_npy(f)
        if samples is not None:
            if a.ndim == 0 or a.shape[0] != samples:
                raise DumpError(f"tensor '{e['name']}' lacks the leading sample axis of {samples}", str(f))
            arrs = [a[k] for k in range(samples)]
        else:
            arrs = [a]
        d.add(DumpTensor(e["name"], arrs, layout=e.get("layout"),
                         quant=_quant_from_json(e.get("quantization"), where),
                         fix_pos=e.get("fix_pos"), node=e.get("node"), op=e.get("op"),
                         index=e.get("index"), file=e["file"]))
    return d
