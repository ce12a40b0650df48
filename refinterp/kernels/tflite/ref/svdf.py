"""TFLite integer SVDF (keyword-spotting models; variant ``tflite_ref``, LiteRT ``reference/svdf.h``
``EvalIntegerSVDF`` and TFLite Micro ``svdf_common.cc``).

int8 input x [B, I], int8 feature weights Wf [F, I], time weights Wt [F, M] and the activation state
S [B, F * M] (a variable tensor: carried between runs) in int16 (or int8 with a zero point: TFLite
Micro), int32 bias [U] (U = F / rank), int8 output [B, U].  Per run::

    S = S shifted left by one (the oldest column dropped, per batch and filter)
    S[b, f, M-1] = clamp(MBQM(sum_i Wf[f, i] (x[b, i] - zx), M1, e1), state range) + zs
    t[b, f]     = sum_m Wt[f, m] (S[b, f, m] - zs)                (int32)
    y[b, u]     = clamp(MBQM(bias[u] + sum_r t[b, u * rank + r], M2, e2) + zo, -128, 127)

M1 ~ f32(sx * swf / ss), M2 ~ f32(ss * swt / so) (float32 products, as both runtimes' Prepare forms
them), QuantizeMultiplier; MBQM in the scheme's rounding (double).  No activation is applied in
the integer path (the fused activation is a float-path option).  LiteRT supports int16 state only
(zero point 0).  Every int32 sum stays below 2^31: |Wf * (x - zx)| < 2^15 * I, |Wt * S| < 2^30 / M.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant.fixedpoint import quantize_multiplier
from ..common import check_dtype, mbqm, qparams, qrange, rounding, where
from ...registry import declare_settings, kernel

declare_settings(__name__, "requant")  # the scheme settings these kernels read

VARIANT = "tflite_ref"
_F = np.float32
# scheme ``impl``: int16_state (LiteRT: an int8 activation state is refused -- LiteRT 2.3 corrupts its
# heap on one) | any_state (TFLite Micro: int16, or int8 with a zero point)
IMPLS = ("int16_state", "any_state")


@dataclass(frozen=True)
class QSvdfPlan:
    wf: np.ndarray  # [F, I] int8 codes as int64
    wt: np.ndarray  # [F, M] time weights as int64
    bias: np.ndarray | None
    zx: int
    zs: int
    zo: int
    m1: tuple[int, int]  # (multiplier, shift) of the feature product into the state
    m2: tuple[int, int]  # (multiplier, shift) of the time product into the output
    rank: int
    memory: int
    state_range: tuple[int, int]
    state_dtype: str
    rounding: object

    def describe(self) -> dict:
        return {"rank": self.rank, "memory": self.memory, "m1": self.m1, "m2": self.m2,
                "zero_points": [self.zx, self.zs, self.zo], "state_dtype": self.state_dtype,
                "rounding": getattr(self.rounding, "value", self.rounding)}


def _prepare(node, ctx) -> QSvdfPlan:
    x, wf, wt, b, st = (ctx.inputs[k] if k < len(ctx.inputs) else None for k in range(5))
    y = ctx.outputs[0]
    check_dtype(x, node, ("int8",))
    if wf is None or wt is None or st is None or wf.const is None or wt.const is None:
        raise UnsupportedOpError(f"{where(node)}: SVDF needs constant feature and time weights and a state tensor")
    if st.dtype not in ("int16", "int8") or wt.dtype != st.dtype or y.dtype != "int8":
        raise UnsupportedOpError(f"{where(node)}: integer SVDF needs int8 weights_feature, int16 (or int8) time "
                                 f"weights and state, int8 output; got {wt.dtype} / {st.dtype} -> {y.dtype}")
    how = ctx.settings.get("impl", "int16_state")
    if how not in IMPLS:
        raise UnsupportedOpError(f"{where(node)}: impl '{how}' is not one of {', '.join(IMPLS)}")
    if st.dtype != "int16" and how == "int16_state":
        raise UnsupportedOpError(f"{where(node)}: an {st.dtype} activation state is not supported by LiteRT's "
                                 f"integer SVDF (int16 only; LiteRT 2.3 corrupts memory on such a model)")
    sx, zx = qparams(x, node, "input")
    swf, _ = qparams(wf, node, "weights_feature")
    swt, _ = qparams(wt, node, "weights_time")
    ss, zs = qparams(st, node, "activation state")
    so, zo = qparams(y, node, "output")
    rank = int(node.attrs.get("rank", 1))
    n_filter, n_memory = wt.const.shape
    if rank < 1 or n_filter % rank:
        raise UnsupportedOpError(f"{where(node)}: {n_filter} filters are not a multiple of rank {rank}")
    m1 = quantize_multiplier(float(_F(_F(sx * swf) / ss)))
    m2 = quantize_multiplier(float(_F(_F(ss * swt) / so)))
    bias = None if b is None or b.const is None else b.const.astype(np.int64)
    return QSvdfPlan(wf.const.astype(np.int64), wt.const.astype(np.int64), bias, zx, zs, zo, m1, m2, rank,
                     n_memory, qrange(st.dtype), st.dtype, rounding(ctx))


@kernel("SVDF", VARIANT, prepare=_prepare, impls=IMPLS)
def svdf_int(p, x, wf=None, wt=None, b=None, state=None):
    xb = np.asarray(x).astype(np.int64)
    n_batch = xb.shape[0]
    n_filter, n_mem = p.wt.shape
    s = np.asarray(state).astype(np.int64).reshape(n_batch, n_filter, n_mem)
    s = np.concatenate([s[:, :, 1:], np.zeros((n_batch, n_filter, 1), np.int64)], axis=2)
    feat = (xb - p.zx) @ p.wf.T  # [B, F]
    lo, hi = p.state_range
    s[:, :, -1] = np.clip(mbqm(feat, *p.m1, p.rounding), lo, hi) + p.zs
    t = ((s - p.zs) * p.wt[None]).sum(axis=2)  # [B, F]
    acc = t.reshape(n_batch, -1, p.rank).sum(axis=2)
    if p.bias is not None:
        acc = acc + p.bias
    y = np.clip(mbqm(acc, *p.m2, p.rounding) + p.zo, -128, 127).astype(np.int8)
    return y, s.reshape(n_batch, -1).astype(p.state_dtype)
