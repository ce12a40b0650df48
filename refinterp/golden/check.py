"""``check``: re-run golden cases with refinterp's kernels or a user callable; compare exactly.

A user kernel is ``fn(case: dict, inputs: list[np.ndarray | None]) -> list[np.ndarray]`` (a single
array or a tuple is accepted too).  ``case`` is the parsed case.json plus ``"dir"`` (the case folder)
and ``"accumulators"`` arrays under ``"arrays"`` (``{"acc.0": ...}``) for kernels that want to check
an intermediate; ``inputs[k]`` is the node's input ``k`` as stored (integer codes for quantized
tensors; ``None`` for an absent optional input).  Outputs must match shape, dtype and every value.
"""
from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..errors import GoldenError, RefinterpError
from .case import Case, list_cases, read_case
from .rebuild import case_graph, feeds_of

UserKernel = Callable[[dict, list], Any]


@dataclass
class CaseResult:
    case: str  # folder name
    path: str
    ok: bool
    message: str = ""


def load_user_kernel(spec: str) -> UserKernel:
    """Import ``module:function`` (only ever called for an explicit --kernel)."""
    mod_name, sep, fn_name = spec.partition(":")
    if not sep or not mod_name or not fn_name:
        raise GoldenError(f"--kernel expects module:function, got '{spec}'")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # like `python -m`: modules in the working folder are importable
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        raise GoldenError(f"cannot import kernel module '{mod_name}' ({e})") from None
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise GoldenError(f"module '{mod_name}' has no callable '{fn_name}'")
    return fn


def first_difference(expected: np.ndarray, got: Any, what: str) -> str | None:
    """None when identical, else a one-line description of the first difference."""
    if not isinstance(got, np.ndarray):
        return f"{what}: kernel returned {type(got).__name__}, expected a numpy array"
    if got.shape != expected.shape:
        return f"{what}: shape {list(got.shape)}, expected {list(expected.shape)}"
    if got.dtype != expected.dtype:
        return f"{what}: dtype {got.dtype}, expected {expected.dtype}"
    diff = got != expected
    if expected.dtype.kind == "f":
        diff &= ~(np.isnan(got) & np.isnan(expected))
    if not diff.any():
        return None
    flat = int(np.flatnonzero(diff.ravel())[0])
    idx = tuple(int(i) for i in np.unravel_index(flat, expected.shape))
    return (f"{what}: first difference at index {list(idx)} (flat {flat}): got {got[idx].item()}, "
            f"expected {expected[idx].item()} ({int(diff.sum())} of {diff.size} values differ)")


def _refinterp_outputs(case: Case, scheme: str | None) -> list[np.ndarray]:
    from ..runtime import Session

    g = case_graph(case)
    sess = Session(g, scheme or case.meta["scheme"]["name"])
    feeds = feeds_of(case, g)
    res = sess.run(feeds)
    return [res[o] for o in g.outputs]


def _user_outputs(case: Case, fn: UserKernel) -> list:
    meta = dict(case.meta, dir=str(case.path), arrays={k: v for k, v in case.arrays.items()
                                                       if k.startswith(("acc.", "plan."))})
    res = fn(meta, case.inputs())
    if isinstance(res, np.ndarray):
        return [res]
    if isinstance(res, (list, tuple)):
        return list(res)
    return [res]


def check_case(case: Case, scheme: str | None = None, kernel: UserKernel | None = None) -> CaseResult:
    name, path = case.name, str(case.path)
    try:
        got = _user_outputs(case, kernel) if kernel is not None else _refinterp_outputs(case, scheme)
    except RefinterpError as e:
        return CaseResult(name, path, False, f"error: {type(e).__name__}: {e}")
    except Exception as e:  # a user kernel (or a kernel bug) raising: report, keep checking
        who = "user kernel" if kernel is not None else "refinterp kernel"
        return CaseResult(name, path, False, f"{who} raised {type(e).__name__}: {e}")
    expected = case.outputs()
    if len(got) != len(expected):
        return CaseResult(name, path, False, f"kernel returned {len(got)} outputs, expected {len(expected)}")
    msgs = [m for k, (e, g) in enumerate(zip(expected, got))
            if (m := first_difference(e, g, f"output.{k}")) is not None]
    return CaseResult(name, path, not msgs, "; ".join(msgs))


def check_dir(root: str | Path, scheme: str | None = None, kernel: UserKernel | None = None) -> list[CaseResult]:
    results = []
    for folder in list_cases(root):
        try:
            case = read_case(folder)
        except GoldenError as e:
            results.append(CaseResult(folder.name, str(folder), False, f"error: {e}"))
            continue
        results.append(check_case(case, scheme, kernel))
    return results
