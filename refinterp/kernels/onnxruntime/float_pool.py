"""GlobalAveragePool variant ``ort_float``: ONNX Runtime CPU's float32 global average pool (x86-64).

* On an input ORT_ENABLE_ALL's NchwcTransformer keeps in NCHWc (node marked ``_ort_nchwc`` by
  passes/ort_nchwc.py): MLAS's NCHWc pooling kernel with the whole image as the window
  (onnxruntime/core/mlas/lib/snchwc.cpp MLAS_NCHWC_POOL_ALGORITHM, x86_64/SpoolKernelAvx512F.S): per
  channel, from 0, one float32 addition per cell in row-major order (vaddps), then one division by
  float32(H * W) (vdivps).
* Otherwise (NCHW, any spatial rank): MlasPoolGlobalKernel (mlas/lib/pooling.cpp): per channel, four
  lanes summed over the cells in groups of four (lane j takes cells j, j + 4, ...), the lanes reduced
  as (l0 + l2) + (l1 + l3) (MlasReduceAddFloat32x4 on x86), the last size % 4 cells added one at a
  time, then one division by float32(cell count).

Quantized nodes run the ``ort`` kernel, other layouts / dtypes the generic float kernel.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError
from refinterp.passes.ort_nchwc import MARK
from .common import is_quantized
from ..registry import Delegate, kernel, require


@dataclass(frozen=True)
class OrtGapPlan:
    name: str
    nchwc: bool

    def describe(self) -> dict:
        return {"executed_by": "MLAS NCHWc pool order (row-major sum, one division)" if self.nchwc else
                "MLAS global pool order (four lanes, (l0 + l2) + (l1 + l3), tail, one division)"}


def _prepare(node, ctx):
    quantized = any(is_quantized(t) for t in list(ctx.inputs) + list(ctx.outputs))
    if quantized:
        k = require("GlobalAveragePool", "ort")
        return Delegate(k, k.prepare(node, ctx))
    fk = require("GlobalAveragePool", "float")
    x = ctx.inputs[0] if ctx.inputs else None
    if x is not None and x.dtype == "float32" and (node.attrs.get("layout") or "NCHW") == "NCHW":
        return OrtGapPlan(node.name, bool(node.attr(MARK)))
    return Delegate(fk, fk.prepare(node, ctx))


@kernel("GlobalAveragePool", "ort_float", prepare=_prepare)
def ort_float_global_average_pool(plan, x):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, x)
    x = np.asarray(x)
    if x.dtype != np.float32 or x.ndim < 3 or (plan.nchwc and x.ndim != 4):
        raise InputError(f"node '{plan.name}': GlobalAveragePool takes a float32 input of rank >= 3"
                         f"{' (4 in NCHWc)' if plan.nchwc else ''}, got {x.dtype} {x.shape}")
    n, c = x.shape[:2]
    size = int(np.prod(x.shape[2:]))
    cells = x.reshape(n, c, size)
    if plan.nchwc:
        acc = np.zeros((n, c), np.float32)
        for i in range(size):  # float32 + float32 rounds once: one vaddps per cell
            acc = acc + cells[:, :, i]
    else:
        lanes = np.zeros((n, c, 4), np.float32)
        full = size // 4 * 4
        for i in range(0, full, 4):
            lanes = lanes + cells[:, :, i:i + 4]
        acc = (lanes[..., 0] + lanes[..., 2]) + (lanes[..., 1] + lanes[..., 3])
        for i in range(full, size):
            acc = acc + cells[:, :, i]
    return (acc / np.float32(size)).astype(np.float32).reshape((n, c) + (1,) * (x.ndim - 2))
