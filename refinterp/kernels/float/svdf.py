"""TFLite SVDF, float (LiteRT ``reference/svdf.h`` ``EvalFloatSVDF``): the activation state
S [B, F * M] (a variable tensor, carried between runs) shifts left by one, its newest column gets
x Wf^T, then y = act(bias + sum over rank of sum_m Wt[f, m] S[b, f, m]).  float32 throughout
(equal to LiteRT to float rounding)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from refinterp.errors import InputError
from ..registry import kernel

_ACTS = {None: lambda v: v, "NONE": lambda v: v, "RELU": lambda v: np.maximum(v, 0),
         "RELU6": lambda v: np.clip(v, 0, 6), "RELU_N1_TO_1": lambda v: np.clip(v, -1, 1), "TANH": np.tanh,
         "SIGN_BIT": lambda v: np.signbit(v).astype(v.dtype)}


@dataclass(frozen=True)
class SvdfPlan:
    rank: int
    act: Callable


def _prepare(node, ctx) -> SvdfPlan:
    act = node.attrs.get("svdf_activation")
    if act not in _ACTS:
        raise InputError(f"node '{node.name}' (SVDF): unknown activation {act}")
    return SvdfPlan(int(node.attrs.get("rank", 1)), _ACTS[act])


@kernel("SVDF", "float", prepare=_prepare)
def svdf_float(p, x, wf, wt, b=None, state=None):
    x = np.asarray(x, np.float32)
    wf, wt = np.asarray(wf, np.float32), np.asarray(wt, np.float32)
    n_batch, (n_filter, n_mem) = x.shape[0], wt.shape
    s = np.zeros((n_batch, n_filter, n_mem), np.float32) if state is None else \
        np.asarray(state, np.float32).reshape(n_batch, n_filter, n_mem)
    s = np.concatenate([s[:, :, 1:], (x @ wf.T)[:, :, None]], axis=2).astype(np.float32)
    t = (s * wt[None]).sum(axis=2, dtype=np.float32)
    y = t.reshape(n_batch, -1, p.rank).sum(axis=2, dtype=np.float32)
    if b is not None:
        y = y + np.asarray(b, np.float32)
    return p.act(y).astype(np.float32), s.reshape(n_batch, -1)
