"""HTP Sqrt, Abs, Log, Floor, Ceil, Round, Sign, Sin, Cos, Atan, Asin, Clip, HardSigmoid (a float32 path,
below) and Sigmoid, Tanh, HardSwish, Elu, Gelu (the exact form, also for approximate="tanh"), Softplus, Exp,
Relu, LeakyRelu (uint8 only: the QNN EP takes it on the HTP with uint8 tensors only) and the SiLU unit (a
Mul of x by its own Sigmoid, which the HTP runs as one op: passes/qdq_htp.py makes it ``Swish``) on 8-bit
activations (v68 and v73 alike): a 256-entry table of the float64 function of the dequantized code,
rounded to the nearest output code.

    y[q] = clamp(round(f((q - zp_x) * s_x) / s_y) + zp_y)

Evidence: every input code at 12 random scale sets per op and arch gives 0 differences from this
(Elu, Gelu, Softplus, Exp, Relu, LeakyRelu: 3 sets per op, arch and type, 0 of 768 each)
(float32 evaluation followed by the HTP's float16 QuantizeLinear differs on 38-80 of 3,072).  Exact
ties are *not* characterised: on power-of-two scale ratios HardSwish entries that are exactly n + 1/2
go up, down or away from zero by no float32 or float16 evaluation order tried; a node whose table has
an entry within 1e-9 of a tie is refused, and so is one with an entry that rounds one way in float64 and
the other from float32 inputs (Elu's linear side measured to follow the float32 one there).

Sqrt, Abs, Log, Floor, Ceil, Round, Sign, Sin, Cos, Atan, Asin, Clip (constant bounds) and HardSigmoid
(uint8 only, as LeakyRelu) take a float32 path instead (the one of Add / Sub with a constant,
elementwise.py): x = f32((q - zp_x) s_x), v = the float32 function (sqrt, sin, cos, atan, asin correctly
rounded; log as NumPy's float32 log; Round half to even, as ONNX; Clip as max-then-min with the float32
bounds; HardSigmoid as f32(f32(alpha x) + beta) clamped to [0, 1]), t = f32(f32(v * f32(1 / s_y)) + zp_y)
with the uint8-domain zero point (int8 + 128), rounded half to even; NaN (Sqrt of a negative, Asin
outside [-1, 1]) gives the largest code, Log of 0 or a negative the smallest.  Evidence: every code at
10 scale sets per op (five with power-of-two ratios, exact ties for Abs / Floor), v73 uint8 and int8,
v68 uint8: 0 of 2,445-2,560 finite codes per op and set; the float64 table rounded half up differs on
1-33 of 768 (Sqrt, Log, Abs), on 49 of 256 for Floor.  Ceil / Round / Sign / Sin / Cos / Atan / Asin /
Clip (bounds -1.3 .. 2.1, 0 .. 6, 0 ..): every code at 6 scale sets per op, type (uint8, int8) and arch
(68, 73), exact ties among them: 0 off; Sin / Cos / Atan at 26 more sets per type on v73: 0 off but for
one Atan entry whose t lay 1.5e-5 below a tie (the HTP's atan is a few ulps off the correctly rounded
one there), so a node whose Sin / Cos / Atan / Asin entry changes code within 4 float32 ulps of v is
refused.  HardSigmoid: 150 sets built to put one entry within 3e-8 .. 3e-5 of a rounding tie (alpha
1/6, 0.2, 1/3, 0.15, beta 0.4 .. 0.6, output zero points 0 .. 99), v68 and v73: 0 off, where the float64
table misses 8-16 codes per 30 sets (found on a MobileNetV3's squeeze-excitation gate: 2 of 120 codes).
16-bit Clip / Round / Sin follow neither this path nor the float64 table (thousands of codes
off): 8-bit only.  Neg (65 of 2,560 off) and Reciprocal (5-66 of 256, near ties: an approximate
reciprocal) follow neither: refused; so is PRelu (it depends on the producer: MEASURED.md).

16-bit Sigmoid and Tanh read a measured curve on the HTP's own input grid, in the output encoding the QNN EP
imposes (quant/htp_curve16.py); the other ops here are 8-bit only.

Relu and Clip units are ops of their own only on a graph input's codes (measured on off-grid inputs:
0 off); after other ops the HTP fuses them into the producer (``_require_graph_input``): refused."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp, htp_curve16
from ..tflite.common import qparams, qrange, where
from .common import ARCHS, htp_kernel, require_8bit, shift_of


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _f32(node, key: str, default: float) -> float:
    return float(np.float32(node.attr(key, default)))


# f(x, node): the float64 function the table samples (attributes as the float32 values stored)
_FUNCS = {
    "Sigmoid": lambda x, n: 1.0 / (1.0 + np.exp(-x)),
    "Tanh": lambda x, n: np.tanh(x),
    "HardSwish": lambda x, n: x * np.clip(x + 3.0, 0.0, 6.0) / 6.0,
    "Swish": lambda x, n: x / (1.0 + np.exp(-x)),
    "Elu": lambda x, n: np.where(x >= 0, x, _f32(n, "alpha", 1.0) * np.expm1(np.minimum(x, 0))),
    # the QNN EP / HTP computes the exact form for approximate="tanh" too (measured: the tanh form's table
    # differs from the emulator on 5 of 256 codes, the erf form on none)
    "Gelu": lambda x, n: 0.5 * x * (1 + _erf(x / math.sqrt(2))),
    "Softplus": lambda x, n: np.logaddexp(0.0, x),
    "Exp": lambda x, n: np.exp(x),
    "Relu": lambda x, n: np.maximum(x, 0.0),
    "LeakyRelu": lambda x, n: np.where(x >= 0, x, _f32(n, "alpha", 0.01) * x),
}
# measured on uint8 only: the QNN EP does not take these with int8 tensors (CPU fallback needed)
_UINT8_ONLY = ("LeakyRelu", "HardSigmoid")


def _require_graph_input(node) -> None:
    """A Relu / Clip unit runs as its own op on the HTP only on a graph input's codes (measured: 0 off on
    off-grid inputs, 6 parameter sets per arch and type, Relu-range outputs and equal parameters among
    them).  After Conv, ConvTranspose, MatMul, Add, Sub, Mul, AveragePool, Sigmoid or Resize it is folded
    into the producer in ways not characterised (25-1,484 codes of 1,152-4,608 off the op on the
    producer's codes, depending on the producer and the output parameters)."""
    kind = node.attrs.get("htp_input_from", "input")
    if kind != "input":
        raise UnsupportedOpError(f"{where(node)}: a {node.op} of codes made by {kind}: the HTP folds it into "
                                 "the producer there, not characterised")


@dataclass(frozen=True)
class HtpLutPlan:
    table: np.ndarray  # output code per input code - lo
    lo: int
    dtype: str


# v73 runs HardSwish / LeakyRelu fused into these producers when nothing else reads the producer's output -- on
# the producer's own result, not its output codes (measured: the plain emulator's output is within 2-9 codes in
# 512 of the exact activation of the exact Conv output, the table on the Conv's codes 50-292 off); after a MatMul
# the emulator differs from the table even with the MatMul's output exposed (uint8).  v68 does not (0 off after
# every producer); nor does v73 after Add, Mul, GlobalAveragePool, (HardSwish) ConvTranspose or a strided depthwise
# Conv (stride 2, 1x1 to 7x7: the table on its codes, 0 off as deployed; a full Conv fuses at every stride).
# tests/conformance/test_qnn_htp_fused.py.  Refused there; not characterised.
_FUSED_V73 = {"HardSwish": ("Conv", "DepthwiseConv", "MatMul", "Gemm"),
              "LeakyRelu": ("Conv", "DepthwiseConv", "ConvTranspose", "MatMul", "Gemm")}
_FUSED_EVEN_SHARED = ("MatMul", "Gemm")


def _require_unfused(node, arch: str) -> None:
    kind = node.attrs.get("htp_input_from", "input")
    if arch != "v73" or kind not in _FUSED_V73.get(node.op, ()):
        return
    if node.attrs.get("htp_input_shared") and kind not in _FUSED_EVEN_SHARED:
        return
    if kind == "DepthwiseConv" and node.attrs.get("htp_input_strided"):
        return
    raise UnsupportedOpError(f"{where(node)}: a {node.op} of codes made by {kind}: v73 fuses it into the producer "
                             "(the activation of the producer's own result), not characterised")


def _prepare(node, ctx, arch: str = "v73") -> HtpLutPlan:
    _require_unfused(node, arch)
    if node.op in htp_curve16.GRID and ctx.inputs[0] is not None and ctx.inputs[0].dtype in ("uint16", "int16"):
        return _curve16_prepare(node, ctx)
    require_8bit(node, [ctx.inputs[0], ctx.outputs[0]])
    if node.op == "Relu":
        _require_graph_input(node)
    if node.op == "Swish" and not (node.attr("htp_fused_silu") and float(node.attr("alpha", 1.0)) == 1.0):
        raise UnsupportedOpError(f"{where(node)}: a Swish op of the model itself is not characterised on the HTP "
                                 "(only the Mul(x, Sigmoid(x)) unit the HTP forms)")
    if ctx.inputs[0].dtype != ctx.outputs[0].dtype:
        raise UnsupportedOpError(f"{where(node)}: mixed input / output types are not characterised on the HTP")
    if node.op in _UINT8_ONLY and ctx.inputs[0].dtype != "uint8":
        raise UnsupportedOpError(f"{where(node)}: onnxruntime-qnn's QNN EP does not run {node.op} on int8 tensors "
                                 "on the HTP (measured), so it is not characterised there")
    (sx, zx), (sy, zy) = qparams(ctx.inputs[0], node, "X"), qparams(ctx.outputs[0], node, "Y")
    lo, hi = qrange(ctx.outputs[0].dtype)
    codes = np.arange(lo, hi + 1)
    with np.errstate(over="ignore"):
        t = _FUNCS[node.op]((codes - zx) * float(sx), node) / float(sy)
        # the same with the input rounded to float32 and times f32(1 / s_y), as the HTP's float32 steps: an entry
        # that is a tie there is one (HardSwish at x = f32(-50 * f32(0.03)) = -1.5, s_y = 0.05: -0.375 * 20.0 =
        # -7.5 exactly, 1.1e-7 away in float64; measured: the HTP rounded it down, the float64 table up)
        x32 = ((codes - zx) * np.float32(sx)).astype(np.float32).astype(np.float64)
        t32 = _FUNCS[node.op](x32, node) * float(np.float32(1) / np.float32(sy))
    # LeakyRelu: within 1e-5 of a tie too -- f32(alpha) (0.1) moves an exact tie by ~1e-7 and the HTP rounds
    # as if on the tie (measured: 5-7 of 256 codes one above); the transcendental tables keep 1e-9 (their
    # near-ties measured to round as here: the SiLU / Sigmoid tests)
    near = 1e-5 if node.op == "LeakyRelu" else 1e-9
    if node.op == "Gelu":
        # Gelu within 4 float32 ulps of a tie: its float32 evaluation lands on the tie itself (measured: float32
        # s_x 0.0921745, z_x 122, s_y 0.0257485, z_y 144, code 115: t = -6.50000005 in float64, -6.5 in float32;
        # the HTP gave code 138, the float64 table 137)
        near = np.maximum(near, 4 * np.spacing(np.abs(t32).astype(np.float32)).astype(np.float64))
    if np.any(np.abs(t - np.floor(t) - 0.5) < near) or np.any(np.abs(t32 - np.floor(t32) - 0.5) < near):
        raise UnsupportedOpError(f"{where(node)}: a table entry lies on (or within {np.max(near):g} of) a rounding "
                                 "tie, where the HTP's rounding is not characterised")
    # an entry the float64 and the float32-input evaluations round apart (measured: Elu's linear side at s_x
    # 0.0985652, z_x 43, s_y 0.136048, code 190: t = 106.5000031 in float64, 106.4999982 from float32 inputs; the
    # HTP gave 106, the float64 table 107)
    if np.any((np.floor(t + 0.5) != np.floor(t32 + 0.5)) & np.isfinite(t) & np.isfinite(t32)):
        raise UnsupportedOpError(f"{where(node)}: a table entry rounds one way in float64 and the other from float32 "
                                 "inputs (within about 1e-7 of a tie, relative), where the HTP's rounding is not "
                                 "characterised")
    table = np.clip(np.floor(t + 0.5) + zy, lo, hi).astype(ctx.outputs[0].dtype)
    return HtpLutPlan(table, lo, ctx.outputs[0].dtype)


def _curve16_prepare(node, ctx) -> HtpLutPlan:
    """16-bit Sigmoid / Tanh: the measured curve on the HTP's input grid, in the output encoding the QNN EP
    imposes (quant/htp_curve16.py; passes/qdq_htp.py gives the output tensor that encoding)."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    if y is None or y.dtype != x.dtype:
        raise UnsupportedOpError(f"{where(node)}: mixed input / output types are not characterised on the HTP")
    sx, zx = qparams(x, node, "X")
    sy, zy = qparams(y, node, "Y")
    enc = htp_curve16.ENCODING[node.op, x.dtype]
    if (float(sy), zy) != (float(np.float32(enc[0])), enc[1]):
        raise UnsupportedOpError(f"{where(node)}: the output encoding is not the QNN EP's fixed one for a 16-bit "
                                 f"{node.op} (scale {enc[0]:g}, zero point {enc[1]}); run the fuse_qdq_htp pass")
    table = htp_curve16.codes(node.op, x.dtype, float(sx), zx, where(node))
    return HtpLutPlan(table, qrange(x.dtype)[0], x.dtype)


def _f64(fn):
    """A float32 function correctly rounded: evaluated in float64 (|error| < 1 float64 ulp), rounded once."""
    return lambda x: fn(x.astype(np.float64))


# the float32 function of the float32 input; exact ops (Abs, Floor, Ceil, Round, Sign) need no float64
_FLOAT_PATH = {"Sqrt": np.sqrt, "Abs": np.abs, "Log": np.log, "Floor": np.floor, "Ceil": np.ceil,
               "Round": np.round, "Sign": np.sign, "Sin": _f64(np.sin), "Cos": _f64(np.cos),
               "Atan": _f64(np.arctan), "Asin": _f64(np.arcsin)}
# the HTP's own float32 functions: a few ulps off the correctly rounded value (Atan measured), so a table
# entry within _ULPS of a code boundary is not characterised
_APPROXIMATE = ("Sin", "Cos", "Atan", "Asin")
_ULPS = 4


def _clip_bounds(node, ctx):
    """Clip's float32 bounds: constant inputs 1 and 2 (absent: unbounded)."""
    out = []
    for i, name in ((1, "min"), (2, "max")):
        present = i < len(node.inputs) and node.inputs[i]
        c = ctx.const(i) if present else None
        if present and (c is None or np.size(c) != 1):
            raise UnsupportedOpError(f"{where(node)}: a Clip {name} that is not a one-element constant is not "
                                     "characterised on the HTP")
        out.append(None if c is None else np.float32(np.asarray(c).reshape(())))
    return out


def _float_path_prepare(node, ctx) -> HtpLutPlan:
    """The HTP's float32 path (module docstring), as a table over the codes."""
    require_8bit(node, [ctx.inputs[0], ctx.outputs[0]])
    if node.op == "Clip":
        _require_graph_input(node)
    if ctx.inputs[0].dtype != ctx.outputs[0].dtype:
        raise UnsupportedOpError(f"{where(node)}: mixed input / output types are not characterised on the HTP")
    if node.op in _UINT8_ONLY and ctx.inputs[0].dtype != "uint8":
        raise UnsupportedOpError(f"{where(node)}: onnxruntime-qnn's QNN EP does not run {node.op} on int8 tensors "
                                 "on the HTP (measured), so it is not characterised there")
    (sx, zx), (sy, zy) = qparams(ctx.inputs[0], node, "X"), qparams(ctx.outputs[0], node, "Y")
    lo, hi = qrange(ctx.outputs[0].dtype)
    shift = shift_of(ctx.outputs[0].dtype)
    f32 = np.float32
    x = ((np.arange(lo, hi + 1) - zx) * f32(sx)).astype(f32)  # |q - z| <= 255: one rounding
    if node.op == "Clip":
        cmin, cmax = _clip_bounds(node, ctx)
        v = x if cmin is None else np.maximum(x, cmin)
        v = v if cmax is None else np.minimum(v, cmax)  # min > max: max everywhere (ONNX's order)
    elif node.op == "HardSigmoid":
        # f32(f32(alpha x) + beta) clamped to [0, 1]: two float32 roundings (no fused multiply-add)
        ax = (np.float32(_f32(node, "alpha", 0.2)) * x).astype(f32)
        v = np.clip((ax + f32(_f32(node, "beta", 0.5))).astype(f32), f32(0), f32(1))
    else:
        with np.errstate(all="ignore"):
            v = _FLOAT_PATH[node.op](x).astype(f32)
    if node.op == "Log":
        v = np.where(x > 0, v, f32(-np.inf))  # measured: 0 and negatives give the smallest code
    codes = htp.float_path_codes(v, sy, zy, shift, lo, hi)
    if node.op in _APPROXIMATE:
        up, down = v, v
        for _ in range(_ULPS):
            up, down = np.nextafter(up, f32(np.inf)), np.nextafter(down, f32(-np.inf))
        finite = np.isfinite(v)
        moved = (htp.float_path_codes(up, sy, zy, shift, lo, hi) != codes) | \
            (htp.float_path_codes(down, sy, zy, shift, lo, hi) != codes)
        if np.any(moved & finite):
            raise UnsupportedOpError(f"{where(node)}: a table entry changes code within {_ULPS} float32 ulps of "
                                     f"{node.op}'s value, where the HTP's own {node.op} is not characterised")
    return HtpLutPlan(codes.astype(ctx.outputs[0].dtype), lo, ctx.outputs[0].dtype)


def _run(p: HtpLutPlan, x, *bounds):
    # Clip's bounds (inputs 1, 2) are in the table already
    return p.table[np.asarray(x).astype(np.int64) - p.lo]


for _variant, _arch in ARCHS.items():
    for _op in _FUNCS:
        htp_kernel(_op, _variant, functools.partial(_prepare, arch=_arch))(_run)
    for _op in (*_FLOAT_PATH, "Clip", "HardSigmoid"):
        htp_kernel(_op, _variant, _float_path_prepare)(_run)
