"""A node's resolved plan as JSON (multipliers, shifts, clamp bounds, rounding...), never truncated.

Uses the plan's ``describe()`` when it has one (the same source as ``refinterp inspect``), else its
dataclass fields or dict items.  Arrays up to ``MAX_INLINE`` values are inlined as lists; longer
ones (lookup tables) are replaced by ``{"size", "dtype", "sha256"}`` and the full array is returned
separately so ``make`` can store it in tensors.npz as ``plan.<key>``.
"""
from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import numpy as np

from ..kernels.prepared import plan_fields
from .case import to_jsonable

MAX_INLINE = 4096


def plan_to_json(plan: Any) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(JSON-able plan, large arrays keyed ``plan.<key>``)."""
    out: dict[str, Any] = {}
    big: dict[str, np.ndarray] = {}
    for k, v in plan_fields(plan).items():
        if callable(v) and not isinstance(v, np.ndarray):
            continue
        if isinstance(v, (list, tuple)) and v and all(isinstance(e, (int, float, np.number)) for e in v):
            v = np.asarray(v)
        if isinstance(v, np.ndarray):
            if v.size > MAX_INLINE:
                big[f"plan.{k}"] = v
                out[k] = {"size": int(v.size), "dtype": v.dtype.name, "shape": list(v.shape),
                          "sha256": hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest(),
                          "stored_as": f"plan.{k}"}
            else:
                out[k] = v.tolist()
            continue
        if dataclasses.is_dataclass(v) and not isinstance(v, type):
            v = repr(v)
        out[k] = to_jsonable(v)
    return out, big
