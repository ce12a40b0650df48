"""Conv variant ``ort_float``: ONNX Runtime CPU (x86-64 MLAS) float32 Conv summation order.

Quantized Conv nodes (QLinearConv, fused QDQ units) run the ``ort`` kernel unchanged.  Float Conv
nodes (e.g. the Conv nodes ORT leaves between DequantizeLinear and QuantizeLinear when int8 QDQ
units are not fused on x86) that MLAS runs as ``MlasConvAlgorithmGemmDirect`` -- a pointwise conv:
every kernel extent 1, group 1, strides 1, no padding, NCHW (MlasConvPrepare in
onnxruntime/core/mlas/lib/convolve.cpp) -- are computed as

    y[c, p] = fl( sgemm(W (C_out x C_in), X (C_in x H*W))[c, p] + bias[c] )

with ``sgemm`` in MLAS's order (refinterp/kernels/onnxruntime/float_sgemm.py: K blocks of FMA chains, the
thread split of the ORT intra-op pool).  Spatial float Convs (NCHW, any group count, depthwise
included) follow MLAS's expand-then-GEMM order (float_conv_expand.py).  A batch of several images is
computed image by image (MlasConv's batch-group work items; GemmDirect then runs one single-threaded
GEMM per image).  A Conv the ``ort_nchwc16`` / ``ort_nchwc8`` pass marked (ORT_ENABLE_ALL's NCHWc
rewrite of a constant-weight Conv) runs MlasNchwcConv's order (float_conv_nchwc.py), with the Sum of an
Add ORT fused into it as a fourth input.  Every other float Conv (grouped pointwise convs, the
one-input-channel GemmDirect shapes, MLAS's one-row M1 segments of a threaded GEMM) runs the generic
``float`` kernel, whose summation order is NumPy/BLAS's, not MLAS's (may differ by a few ulp).

``threads`` (plan): ORT's default intra-op thread count, the number of physical cores available to
the process (onnxruntime/core/platform/posix/env.cc, GetDefaultThreadCount via cpuinfo).
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import InputError
from .common import is_quantized
from .float_conv_expand import expand_then_gemm
from .float_conv_nchwc import nchwc_conv
from .float_sgemm import mlas_sgemm
from ..registry import Delegate, kernel, require
from ..spatial import ints, resolve_window
from refinterp.passes.ort_nchwc import MARK

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
    expand: bool = False  # a spatial NCHW group-1 conv: MLAS's expand-then-GEMM order
    nchwc: int = 0  # NCHWc block of the NchwcTransformer's rewrite (float_conv_nchwc.py), else 0

    def describe(self) -> dict:
        how = (f"MLAS NCHWc{self.nchwc} order (MlasNchwcConv)" if self.nchwc else
               "MLAS SGEMM order (GemmDirect)" if self.pointwise else
               "MLAS SGEMM order (expand then GEMM)" if self.expand else "generic float conv")
        return {"executed_by": how, "threads": self.threads}


def _plain(node, fplan) -> bool:
    """NCHW, OIHW weights, no fused activation: the layouts MlasConv runs directly."""
    return (fplan.layout == "NCHW" and fplan.weight_layout == "OIHW" and fplan.group >= 0
            and not node.attrs.get("activation"))  # group 0: one group per input channel


def _pointwise(node, fplan) -> bool:
    a = node.attrs
    if not _plain(node, fplan) or fplan.group != 1:
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
        k = require(node.op, "ort")
        return Delegate(k, k.prepare(node, ctx))  # the session runs and reports it as the ort kernel
    fk = require(node.op, "float")  # Conv, or DepthwiseConv (the loader's name for group == channels)
    fplan = fk.prepare(node, ctx)
    if node.attr(MARK) and _plain(node, fplan):
        return OrtFloatConvPlan(node.name, False, physical_cores(), (fk, fplan), nchwc=int(node.attr(MARK)))
    if _pointwise(node, fplan):
        return OrtFloatConvPlan(node.name, True, physical_cores(), (fk, fplan))
    if _plain(node, fplan):
        return OrtFloatConvPlan(node.name, False, physical_cores(), (fk, fplan), expand=True)
    if len(node.inputs) > 3 and node.inputs[3]:  # a FusedConv's Sum: the generic conv, then the Sum
        return OrtFloatConvPlan(node.name, False, physical_cores(), (fk, fplan))
    return Delegate(fk, fplan)  # not a layout MlasConv runs: the generic float conv, reported as such


@kernel(("Conv", "DepthwiseConv"), VARIANT, prepare=_prepare)
def ort_float_conv(plan, x, w, b=None, s=None):
    """``s``: the Sum of an Add ORT fused into the Conv -- an NCHWc Conv's (passes/ort_nchwc.py) or a
    FusedConv's (passes/ort_conv_add.py: MlasConv with Beta 1, the products accumulated onto it, the
    bias added after)."""
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, x, w, b)
    fk, fplan = plan.fallback
    x = np.asarray(x)
    w = np.asarray(w)
    if plan.nchwc:
        return _nchwc(plan, fplan, x, w, b, s)
    s = None if s is None else np.asarray(s, np.float32)
    if x.dtype == np.float32 and x.ndim >= 3 and x.shape[0] > 1:
        # MlasConv with several images runs each image's GEMMs as a work item (GemmDirect: one
        # single-threaded MlasGemm per image; the other algorithms as for one image)
        one = dataclasses.replace(plan, threads=1) if plan.pointwise else plan
        return np.concatenate([ort_float_conv(one, x[i:i + 1], w, b, None if s is None else s[i:i + 1])
                               for i in range(x.shape[0])])
    group = fplan.group or (x.shape[1] if x.ndim > 1 else 1)
    c0 = None if s is None else s.reshape(s.shape[1] if s.ndim > 1 else 1, -1)
    y = shape = None
    if (plan.pointwise and x.dtype == np.float32 and x.ndim >= 3 and x.shape[0] == 1
            and w.ndim == x.ndim and w.shape[1] == x.shape[1] and all(d == 1 for d in w.shape[2:])):
        cout, cin = w.shape[:2]
        y = mlas_sgemm(w.reshape(cout, cin), x.reshape(cin, -1), plan.threads,
                       c=None if c0 is None else np.array(c0, np.float32))
        shape = (1, cout) + x.shape[2:]
    elif (plan.expand and x.dtype == np.float32 and 3 <= x.ndim <= 5 and x.shape[0] == 1 and w.ndim == x.ndim
          and w.shape[1] * group == x.shape[1]):
        y, shape = _expand(plan, fplan, x, w, group, c0)
    if y is not None and s is not None and s.shape != shape:
        raise InputError(f"node '{plan.name}': the fused Add's other input has shape {s.shape}, the Conv output {shape}")
    if y is None:
        y = fk.run(fplan, x, w, b)
        # not an order MLAS takes here: the generic conv, then the Sum (not MLAS's rounding either)
        return y if s is None else (y + s).astype(np.float32)
    if b is not None:
        y = (y + np.asarray(b, np.float32).reshape(-1, 1)).astype(np.float32)  # MlasActivation: one addition
    return y.reshape(shape)


def _expand(plan, fplan, x, w, group: int, c0=None):
    """(columns-by-filters result or None, output shape) of MLAS's expand-then-GEMM forms."""
    nsp = x.ndim - 2
    win = resolve_window(x.shape[2:], w.shape[2:], ints(fplan.strides, nsp, 1), ints(fplan.dilations, nsp, 1),
                         fplan.pads, fplan.auto_pad, where=fplan.name)
    shape = (1, w.shape[0]) + tuple(win.out)
    if any(o <= 0 for o in win.out):
        return None, shape
    plain = all(s == 1 for s in win.strides) and not any(win.pad_begin) and not any(win.pad_end)
    if plain and all(k == 1 for k in win.kernel):
        return None, shape  # GemmDirect shapes reached through explicit zero attributes: the generic kernel
    if plain and w.shape[1] == 1 and x.ndim == 4 and all(d == 1 for d in win.dilations) and \
            (win.kernel[1] == x.shape[3] or (win.kernel[0] == x.shape[2] and win.kernel[1] == 1)):
        return None, shape  # MLAS's one-channel GemmDirect forms: not modelled
    return expand_then_gemm(x[0], w, win, plan.threads, group, c0), shape


def _nchwc(plan, fplan, x, w, b, s):
    """MlasNchwcConv's order (float_conv_nchwc.py) for the 4-D float32 Conv the pass marked."""
    if x.dtype != np.float32 or x.ndim != 4 or w.ndim != 4:
        raise InputError(f"node '{plan.name}': the NCHWc Conv takes a 4-D float32 input, got {x.dtype} {x.shape}")
    group = fplan.group or x.shape[1]
    if w.shape[1] * group != x.shape[1] or w.shape[0] % group:
        raise InputError(f"node '{plan.name}': input {x.shape} does not match weights {w.shape} with group {group}")
    win = resolve_window(x.shape[2:], w.shape[2:], ints(fplan.strides, 2, 1), ints(fplan.dilations, 2, 1),
                         fplan.pads, fplan.auto_pad, where=fplan.name)
    shape = (x.shape[0], w.shape[0]) + tuple(win.out)
    if s is not None:
        s = np.asarray(s, np.float32)
        if s.shape != shape:
            raise InputError(f"node '{plan.name}': the fused Add's other input has shape {s.shape}, "
                             f"the Conv output {shape}")
    if any(o <= 0 for o in win.out) or x.shape[0] == 0:
        return np.zeros(shape, np.float32)
    return nchwc_conv(x, w, b, s, group, win.strides, win.dilations, win.pad_begin, win.pad_end, win.out, plan.nchwc)
