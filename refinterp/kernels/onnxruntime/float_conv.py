"""Conv variant ``ort_float``: ONNX Runtime CPU (x86-64 MLAS) float32 Conv summation order.

Quantized Conv nodes (QLinearConv, fused QDQ units) run the ``ort`` kernel unchanged.  Float Conv
nodes (e.g. the Conv nodes ORT leaves between DequantizeLinear and QuantizeLinear when int8 QDQ
units are not fused on x86) that MLAS runs as ``MlasConvAlgorithmGemmDirect`` -- a pointwise conv:
every kernel extent 1, group 1, strides 1, no padding, NCHW, batch 1 (MlasConvPrepare in
onnxruntime/core/mlas/lib/convolve.cpp) -- are computed as

    y[c, p] = fl( sgemm(W (C_out x C_in), X (C_in x H*W))[c, p] + bias[c] )

with ``sgemm`` in MLAS's order (refinterp/kernels/onnxruntime/float_sgemm.py: K blocks of FMA chains, the
thread split of the ORT intra-op pool).  Every other float Conv (spatial kernels: im2col / NCHWc /
depthwise algorithms; batch or group > 1; segments that take MLAS's M1 kernels) runs the generic
``float`` kernel, whose summation order is NumPy/BLAS's, not MLAS's (may differ by a few ulp).

``threads`` (plan): ORT's default intra-op thread count, the number of physical cores available to
the process (onnxruntime/core/platform/posix/env.cc, GetDefaultThreadCount via cpuinfo).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from .common import is_quantized
from .float_sgemm import mlas_sgemm
from ..registry import Delegate, kernel, require

VARIANT = "ort_float"


def physical_cores() -> int:
    """Distinct (package, core) pairs among the CPUs this process may run on (>= 1)."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)
    seen = set()
    for c in cpus:
        base = f"/sys/devices/system/cpu/cpu{c}/topology/"
        try:
            with open(base + "physical_package_id") as f1, open(base + "core_id") as f2:
                seen.add((f1.read().strip(), f2.read().strip()))
        except OSError:
            seen.add(("cpu", str(c)))
    return max(1, len(seen))


@dataclass(frozen=True)
class OrtFloatConvPlan:
    name: str
    pointwise: bool   # attributes allow MlasConvAlgorithmGemmDirect (shapes checked at run time)
    threads: int
    fallback: Any     # (kernel, plan) of the generic float Conv

    def describe(self) -> dict:
        return {"executed_by": "MLAS SGEMM order (GemmDirect)" if self.pointwise else "generic float conv",
                "threads": self.threads}


def _pointwise(node, fplan) -> bool:
    a = node.attrs
    if fplan.layout != "NCHW" or fplan.weight_layout != "OIHW" or fplan.group not in (1,):
        return False
    if fplan.kernel_shape is not None and any(k != 1 for k in fplan.kernel_shape):
        return False
    if fplan.strides is not None and any(s != 1 for s in fplan.strides):
        return False
    if fplan.pads is not None and any(p != 0 for p in fplan.pads):
        return False
    return fplan.auto_pad in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER") and not a.get("activation")


def _prepare(node, ctx):
    first_in = ctx.inputs[0] if ctx.inputs else None
    first_out = ctx.outputs[0] if ctx.outputs else None
    if is_quantized(first_in) or is_quantized(first_out) or any(is_quantized(t) for t in ctx.inputs):
        k = require("Conv", "ort")
        return Delegate(k, k.prepare(node, ctx))  # the session runs and reports it as the ort kernel
    fk = require("Conv", "float")
    fplan = fk.prepare(node, ctx)
    if not _pointwise(node, fplan):
        return Delegate(fk, fplan)  # not MLAS's GemmDirect: the generic float conv, reported as such
    return OrtFloatConvPlan(node.name, True, physical_cores(), (fk, fplan))


@kernel("Conv", VARIANT, prepare=_prepare)
def ort_float_conv(plan, x, w, b=None):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, x, w, b)
    fk, fplan = plan.fallback
    x = np.asarray(x)
    w = np.asarray(w)
    ok = (plan.pointwise and x.dtype == np.float32 and x.ndim >= 3 and x.shape[0] == 1
          and w.ndim == x.ndim and w.shape[1] == x.shape[1] and all(d == 1 for d in w.shape[2:]))
    if ok:
        cout, cin = w.shape[:2]
        y = mlas_sgemm(w.reshape(cout, cin), x.reshape(cin, -1), plan.threads)
        if y is not None:
            if b is not None:
                y = (y + np.asarray(b, np.float32).reshape(-1, 1)).astype(np.float32)
            return y.reshape((1, cout) + x.shape[2:])
    return fk.run(fplan, x, w, b)
