"""Match a dump's tensors to the model's tensors and bring them to the model's shape and layout.

Name matching, in order of precedence: an explicit mapping file (model name -> dump name, or null
to ignore a tensor); the exact name (or the model file's original name for TFLite duplicates);
the name with ``/``, ``:`` and ``.`` replaced by ``_`` (as QNN/SNPE/AIMET write files); the name
with every non-alphanumeric character replaced by ``_`` (ONNX Runtime's rule), compared without
leading/trailing underscores.  A loose key shared by several tensors on either side is ambiguous
and never guessed.  Tensors present on one side only are returned as such.

Shape alignment (per tensor, against the reference array's shape S): identical shape; a leading
sample axis ``(k,)+S`` or a batch ``k*S[0]`` with ``S[0] == 1`` (k samples); channels-last vs
channels-first (an ``NHWC`` dump of an ``NCHW`` model and the reverse, also 3-D/5-D), decided by
the dump's layout hint when the shape alone is ambiguous; flat (headerless raw) data of
``k * size(S)`` elements, reshaped in the dump's layout.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from ..errors import DumpError
from ..ir import Graph


def sanitize(name: str) -> str:
    return re.sub(r"[/:.]", "_", name)


def loose(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "_", name).strip("_")


def load_mapping(path: str) -> dict[str, str | None]:
    """Mapping file (YAML or JSON): ``{model tensor: dump tensor | null}``, optionally under ``tensors:``."""
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise DumpError("mapping file not found", path) from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise DumpError(f"unreadable mapping file ({e})", path) from None
    if isinstance(data, dict) and isinstance(data.get("tensors"), dict):
        data = data["tensors"]
    if not isinstance(data, dict) or not all(isinstance(k, str) and (v is None or isinstance(v, str))
                                             for k, v in data.items()):
        raise DumpError("a mapping file must map model tensor names to dump tensor names (or null)", path)
    return data


@dataclass
class NameMatch:
    pairs: dict[str, tuple[str, str]]  # model name -> (dump name, how)
    model_only: list[str]
    dump_only: list[str]
    ambiguous: list[str] = field(default_factory=list)


def match_names(model_names: list[str], dump_names: list[str], mapping: dict[str, str | None] | None = None,
                source_names: dict[str, str] | None = None) -> NameMatch:
    mapping = mapping or {}
    dump_set = set(dump_names)
    pairs: dict[str, tuple[str, str]] = {}
    used: set[str] = set()
    ignored = {k for k, v in mapping.items() if v is None}
    for m, d in mapping.items():
        if d is None or m not in model_names:
            continue
        if d not in dump_set:
            raise DumpError(f"mapping names dump tensor '{d}' for '{m}', but the dump has no such tensor")
        pairs[m], _ = (d, "mapping"), used.add(d)
    for m in model_names:
        if m in pairs or m in ignored:
            continue
        for cand in (m, (source_names or {}).get(m)):
            if cand and cand in dump_set and cand not in used:
                pairs[m] = (cand, "exact")
                used.add(cand)
                break
    ambiguous: list[str] = []
    for keyfn, how in ((sanitize, "sanitised"), (loose, "sanitised")):
        rest_m = [m for m in model_names if m not in pairs and m not in ignored]
        rest_d = [d for d in dump_names if d not in used]
        by_d: dict[str, list[str]] = {}
        for d in rest_d:
            by_d.setdefault(keyfn(d), []).append(d)
        by_m: dict[str, list[str]] = {}
        for m in rest_m:
            by_m.setdefault(keyfn(m), []).append(m)
        for key, ms in by_m.items():
            ds = by_d.get(key, [])
            if len(ms) == 1 and len(ds) == 1:
                pairs[ms[0]] = (ds[0], how)
                used.add(ds[0])
            elif ds and keyfn is loose:
                ambiguous.extend(ms)
    model_only = [m for m in model_names if m not in pairs and m not in ignored]
    dump_only = [d for d in dump_names if d not in used]
    return NameMatch(pairs, model_only, dump_only, sorted(set(ambiguous)))


def _perm_to_last(ndim: int) -> tuple[int, ...]:
    return (0,) + tuple(range(2, ndim)) + (1,)


def _perm_to_first(ndim: int) -> tuple[int, ...]:
    return (0, ndim - 1) + tuple(range(1, ndim - 1))


def model_layout(graph: Graph, name: str, ndim: int) -> str | None:
    info = graph.tensors.get(name)
    if info is not None and info.layout:
        return info.layout
    if ndim not in (3, 4, 5):
        return None
    return "NCHW" if graph.format == "onnx" else "NHWC" if graph.format == "tflite" else None


@dataclass
class Shaped:
    samples: list[np.ndarray]
    notes: list[str]
    layout_note: str | None = None


def _channels_last(layout: str | None) -> bool | None:
    if not layout or len(layout) < 3:
        return None
    return layout.upper().endswith("C")


def fit_shape(arrays: list[np.ndarray], target: tuple[int, ...], mlayout: str | None,
              hint: str | None) -> Shaped | None:
    """Bring one dump tensor's samples to ``target`` (the model's shape); None when impossible."""
    target = tuple(int(d) for d in target)
    nd = len(target)
    size = int(np.prod(target)) if target else 1
    m_last, h_last = _channels_last(mlayout), _channels_last(hint)
    alt = back = None
    if nd >= 3:
        fwd = _perm_to_first(nd) if m_last else _perm_to_last(nd)
        back = _perm_to_last(nd) if m_last else _perm_to_first(nd)
        alt = tuple(target[i] for i in fwd)  # the target written in the other layout
    other = ("NCHW" if m_last else "NHWC") if nd == 4 else ("channels-first" if m_last else "channels-last")
    swap = alt is not None and m_last is not None and h_last is not None and m_last != h_last
    notes: set[str] = set()
    layout_note: list[str] = []

    def one(a: np.ndarray) -> np.ndarray | None:
        if alt is not None and (swap or alt != target):
            if a.shape == alt and (swap or a.shape != target):
                layout_note.append(f"dump is {other}, model is {mlayout or 'channels-' + ('last' if m_last else 'first')}"
                                   f": transposed")
                return np.transpose(a, back)
            if a.ndim == 1 and a.size == size and swap:
                layout_note.append(f"flat data read as {other}, transposed")
                return np.transpose(a.reshape(alt), back)
        if a.shape == target:
            return a
        if a.size == size and (a.ndim <= 1 or alt is None or a.shape != alt):
            notes.add(f"reshaped {list(a.shape)} -> {list(target)}")
            return a.reshape(target)
        return None

    out: list[np.ndarray] = []
    for a in arrays:
        a = np.asarray(a)
        r = one(a)
        if r is not None:
            out.append(r)
            continue
        parts: list[np.ndarray] | None = None
        if a.ndim == nd + 1 and a.shape[0] > 0:
            parts = [a[i] for i in range(a.shape[0])]
            notes.add(f"split a leading sample axis of {a.shape[0]}")
        elif nd and target[0] == 1 and a.ndim == nd and a.shape[0] > 1:
            parts = [a[i:i + 1] for i in range(a.shape[0])]
            notes.add(f"split a batch of {a.shape[0]} into samples")
        elif a.ndim == 1 and size and a.size % size == 0 and a.size > size:
            parts = list(a.reshape(a.size // size, size))
            notes.add(f"split flat data into {a.size // size} samples")
        if parts is None:
            return None
        for p in parts:
            r = one(p)
            if r is None:
                return None
            out.append(r)
    return Shaped(out, sorted(notes), layout_note[0] if layout_note else None)
