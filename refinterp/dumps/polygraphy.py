"""Polygraphy ``RunResults`` JSON (``polygraphy run --save-outputs``) and input files
(``--save-inputs``: a JSON list of feed dicts).

Arrays travel as base64 of ``.npy`` bytes; they are decoded with ``allow_pickle=False``, so object
arrays are refused, and so are torch tensors (which Polygraphy stores as ``torch.save`` pickles).
Each iteration of the chosen runner is one sample.
"""
from __future__ import annotations

import base64
import binascii
import io
import json
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from ..fsutil import atomic_write
from ..errors import DumpError, OutputError
from .model import Dump, DumpTensor


def _decode(obj: Any, where: str) -> np.ndarray:
    if isinstance(obj, dict):
        cls = obj.get("polygraphy_class")
        if cls == "LazyArray" or ("values" in obj and "array" not in obj):
            return _decode(obj.get("values"), where)
        if "tensor" in obj:
            raise DumpError("holds a torch tensor (pickled by torch.save); refusing to unpickle it", where)
        if "array" in obj:
            data = obj["array"]
        else:
            raise DumpError(f"unknown array encoding (keys: {', '.join(sorted(obj))})", where)
    else:
        raise DumpError("expected an encoded array object", where)
    if not isinstance(data, str):
        raise DumpError("array payload is not a base64 string", where)
    try:
        raw = base64.b64decode(data.encode(), validate=True)
    except (binascii.Error, ValueError):
        raw = data.encode("latin-1", errors="strict")  # Polygraphy's older latin-1 .npy encoding
    try:
        return np.load(io.BytesIO(raw), allow_pickle=False)
    except ValueError as e:
        raise DumpError(f"array needs pickle or is not .npy data ({e}); refused", where) from None


def _iterations(doc: Any, path: str, runner: str | None) -> tuple[list[dict], str, list[str]]:
    if isinstance(doc, list):  # input file: [{name: array}, ...]
        return doc, "inputs", []
    if not isinstance(doc, dict) or "lst" not in doc:
        raise DumpError("not a Polygraphy RunResults file (no 'lst')", path)
    runs = doc["lst"]
    if not isinstance(runs, list) or not runs:
        raise DumpError("RunResults holds no runner", path)
    names = [r[0] for r in runs if isinstance(r, list) and len(r) == 2]
    pick = next((r for r in runs if r[0] == runner), None) if runner else runs[0]
    if pick is None:
        raise DumpError(f"no runner '{runner}' (have: {', '.join(names)})", path)
    its = []
    for it in pick[1]:
        outs = it.get("outputs", it) if isinstance(it, dict) else None
        if not isinstance(outs, dict):
            raise DumpError("malformed IterationResult", path)
        its.append(outs)
    return its, pick[0], names


def read_polygraphy(path: str | Path, runner: str | None = None) -> Dump:
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except FileNotFoundError:
        raise DumpError("no such file", str(p)) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise DumpError(f"not readable JSON ({e})", str(p)) from None
    its, rname, names = _iterations(doc, str(p), runner)
    d = Dump(str(p), "polygraphy", meta={"runner": rname, "runners": names})
    for i, outs in enumerate(its):
        if not isinstance(outs, dict):
            raise DumpError(f"iteration {i} is not a mapping", str(p))
        for name, obj in outs.items():
            if name == "polygraphy_class":
                continue
            a = _decode(obj, f"{p}: iteration {i}, tensor '{name}'")
            t = d.tensors.get(name)
            if t is None:
                d.add(DumpTensor(name, [a]))
            else:
                t.samples.append(a)
    if not d.tensors:
        raise DumpError("no tensors", str(p))
    return d


def _encode(a: np.ndarray) -> dict[str, Any]:
    buf = io.BytesIO()
    np.save(buf, np.asarray(a), allow_pickle=False)
    return {"values": {"array": base64.b64encode(buf.getvalue()).decode(), "polygraphy_class": "ndarray"},
            "polygraphy_class": "LazyArray"}


def write_polygraphy(path: str | Path, samples: list[Mapping[str, np.ndarray]], runner_name: str,
                     overwrite: bool = False) -> Path:
    """RunResults JSON with one IterationResult per sample, loadable by ``--load-outputs``."""
    p = Path(path)
    if p.exists() and not overwrite:
        raise OutputError("exists; pass --overwrite to replace it", str(p))
    its = [{"outputs": {k: _encode(v) for k, v in s.items()}, "runtime": None, "runner_name": runner_name,
            "polygraphy_class": "IterationResult"} for s in samples]
    doc = {"lst": [[runner_name, its]], "polygraphy_class": "RunResults"}
    atomic_write(p, lambda f: json.dump(doc, f), binary=False)
    return p


def looks_like_polygraphy(head: str) -> bool:
    return '"polygraphy_class"' in head or head.lstrip().startswith('{"lst"')
