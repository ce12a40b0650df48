"""XNNPACK parameter derivations for the quantized element-wise ops the LiteRT delegate hands it,
and the delegate's validity limits (a node outside them stays on the built-in kernels).

Sources (google/XNNPACK @75db3c0, google-ai-edge/LiteRT @f674577):

* ``src/microparams-init.c``: ``xnn_init_qs8_add_minmax_scalar_params`` (20-bit add multipliers),
  ``xnn_init_qs8_mul_minmax_scalar_params`` (float product scale), ``xnn_init_qs8_lrelu_scalar_params``
  and ``xnn_init_qs8_cvt_scalar_params`` (8-bit multipliers), ``xnn_init_f32_qs8_cvt_scalar_params``
  (reciprocal output scale), ``xnn_init_qs8_clamp_scalar_params`` (fused activation bounds);
* ``src/operators/binary-elementwise-nd.c``: SUB = ADD with the second scale negated;
* ``src/operators/unary-elementwise-nc.c`` + ``src/reference/unary-elementwise.cc``: 8-bit ops with
  no dedicated kernel (sigmoid, tanh) become a 256-entry table built from the float reference;
* ``src/xnnpack/requantization.h: xnn_qs8_quantize`` and ``src/xnnpack/reference-utils.h``;
* ``tflite/delegates/xnnpack/xnnpack_delegate.cc``: ``VisitBinaryNode`` (ADD/SUB input/output scale
  ratio in [2^-10, 2^8), MUL product/output ratio in [2^-16, 2^8), MAXIMUM/MINIMUM/SQUARED_DIFFERENCE
  float only), ``VisitUnaryNode`` (LEAKY_RELU and QUANTIZE scale limits, HARD_SWISH/RELU*/GELU/RSQRT
  float only), ``CheckTensorFloatOrQUInt8Type`` (8-bit per-tensor only: int16 stays on TFLite),
  ``ConvertActivationToOutputRange`` (fused TANH / SIGN_BIT refused).

All scale arithmetic is float32 with a rounding after each operation, as in the C code.
"""
from __future__ import annotations

import numpy as np

from . import lut

_F = np.float32
_EIGHT_BIT = ("int8", "uint8")
_FUSED_BOUNDS = {None: (None, None), "NONE": (None, None), "RELU": (0.0, None), "RELU6": (0.0, 6.0),
                 "RELU_N1_TO_1": (-1.0, 1.0)}


def qrange(dtype: str) -> tuple[int, int]:
    info = np.iinfo(np.dtype(dtype))
    return int(info.min), int(info.max)


def _normal_positive(s) -> bool:
    s = _F(s)
    return bool(np.isfinite(s) and s >= np.finfo(np.float32).tiny)


# --- validity limits (None = XNNPACK takes the node) -------------------------------------------

def eight_bit_refusal(dtypes: list[str], per_tensor: list[bool]) -> str | None:
    """``CheckTensorFloatOrQUInt8Type``: every quantized tensor int8/uint8 with one scale."""
    bad = [d for d in dtypes if d not in _EIGHT_BIT]
    if bad:
        return f"{bad[0]} tensors (XNNPACK takes only 8-bit quantized tensors here)"
    if not all(per_tensor):
        return "per-axis quantized tensor"
    if len(set(dtypes)) != 1:
        return f"mixed types {' / '.join(dtypes)}"
    return None


def fused_refusal(act: str | None) -> str | None:
    if act not in _FUSED_BOUNDS:
        return f"fused activation {act} (ConvertActivationToOutputRange)"
    return None


def add_refusal(s1, s2, so) -> str | None:
    """ADD / SUB: each input/output scale ratio (float32) in [2^-10, 2^8)."""
    for s in (s1, s2, so):
        if not _normal_positive(s):
            return f"scale {float(s)!r} is not a positive normal float"
    for s in (s1, s2):
        r = _F(_F(s) / _F(so))
        if not (_F(1.0 / 1024.0) <= r < _F(256.0)):
            return f"input/output scale ratio {float(r):.6g} outside [2^-10, 2^8)"
    return None


def mul_refusal(s1, s2, so) -> str | None:
    """MUL: float32(s1*s2)/so in [2^-16, 2^8)."""
    for s in (s1, s2, so):
        if not _normal_positive(s):
            return f"scale {float(s)!r} is not a positive normal float"
    r = _F(_F(_F(s1) * _F(s2)) / _F(so))
    if not (_F(1.0 / 65536.0) <= r < _F(256.0)):
        return f"product/output scale ratio {float(r):.6g} outside [2^-16, 2^8)"
    return None


def lrelu_refusal(sx, so, alpha) -> str | None:
    """LEAKY_RELU: alpha normal and non-zero; sx/so in [2^-8, 2^7]; alpha*sx/so in
    [-127.99609375, 128] with magnitude >= 2^-8 (checked only when both scales are normal)."""
    a = _F(alpha)
    if not (np.isfinite(a) and abs(a) >= np.finfo(np.float32).tiny):
        return f"alpha {float(a)!r} is zero or not normal"
    if not (_normal_positive(sx) and _normal_positive(so)):
        return None
    ps = _F(_F(sx) / _F(so))
    if ps < _F(1.0 / 256.0) or ps > _F(128.0):
        return f"positive scale sx/so = {float(ps):.6g} outside [2^-8, 2^7]"
    ns = _F(ps * a)
    if ns < _F(-127.99609375) or ns > _F(128.0) or abs(ns) < _F(1.0 / 256.0):
        return f"negative scale alpha*sx/so = {float(ns):.6g} outside XNNPACK's range"
    return None


def requant_refusal(sx, so) -> str | None:
    """QUANTIZE int8->int8 / uint8->uint8: sx/so in [2^-8, 2^7] (float32 division)."""
    r = _F(_F(sx) / _F(so))
    if not (r >= _F(1.0 / 256.0) and r <= _F(128.0)):
        return f"input/output scale ratio {float(r):.6g} outside [2^-8, 2^7]"
    return None


# --- parameters ----------------------------------------------------------------------------------

def quantize_bound(f: float, so, zo: int, dtype: str) -> int:
    """``xnn_qs8_quantize`` / ``xnn_qu8_quantize``: lrintf(clamp(f / so + zo, qmin, qmax))."""
    lo, hi = qrange(dtype)
    v = _F(_F(_F(f) / _F(so)) + _F(zo))
    return int(np.rint(min(max(v, _F(lo)), _F(hi))))


def activation_bounds(act: str | None, so, zo: int, dtype: str) -> tuple[int, int]:
    """The clamp node XNNPACK inserts for a fused activation (float bounds quantized with RNE)."""
    lo, hi = qrange(dtype)
    fmin, fmax = _FUSED_BOUNDS[act]
    if fmin is not None:
        lo = max(lo, quantize_bound(fmin, so, zo, dtype))
    if fmax is not None:
        hi = min(hi, quantize_bound(fmax, so, zo, dtype))
    return lo, hi


def add_params(s1, z1: int, s2, z2: int, so, sign_b: int = 1) -> dict:
    """``xnn_init_q{s,u}8_add_minmax_scalar_params`` (SUB: ``sign_b = -1``).

    out = ((bias + a*ma + b*mb) >> shift) + zo with |m| < 2^21, shift in [12, 30],
    bias = 2^(shift-1) - ma*z1 - mb*z2; |a*ma| < 2^29 so the int32 sum never overflows.
    """
    ra = _F(_F(s1) / _F(so))
    rb = _F(_F(sign_b) * _F(s2) / _F(so)) if sign_b < 0 else _F(_F(s2) / _F(so))
    mx = max(abs(ra), abs(rb))
    exponent = int((np.array(mx, np.float32).view(np.uint32) >> 23) & 0xFF) - 127
    shift = 20 - exponent
    # adding shift to the exponent bits = an exact multiplication by 2^shift (normal values)
    ma = int(np.rint(_F(abs(ra) * _F(2.0 ** shift))))
    mb = int(np.rint(_F(abs(rb) * _F(2.0 ** shift))))
    ma = -ma if np.signbit(ra) else ma
    mb = -mb if np.signbit(rb) else mb
    bias = (1 << (shift - 1)) - ma * z1 - mb * z2
    return {"a_multiplier": ma, "b_multiplier": mb, "shift": shift, "bias": bias}


def mul_scale(s1, s2, so) -> np.float32:
    return _F(_F(_F(s1) * _F(s2)) / _F(so))


def mul_rndnu_params(scale: np.float32) -> tuple[int, int, int]:
    """``xnn_init_qs8_mul_minmax_rndnu_neon_params`` (ARM): the float32 product/output scale in
    [2^-16, 2^8) split into a Q31 multiplier (its 24-bit significand << 7, in [2^30, 2^31 - 128]) and
    shift = 126 - biased exponent in [-8, 15]; post_shift = max(shift, 1), the rest a left pre-shift.
    Returns (multiplier, left_pre_shift, post_shift)."""
    bits = int(np.float32(scale).view(np.uint32))
    multiplier = ((bits & 0x007FFFFF) | 0x00800000) << 7
    shift = 127 + 31 - 32 - (bits >> 23)
    post = max(shift, 1)
    return multiplier, post - shift, post


def mul_rndnu(prod: np.ndarray, multiplier: int, left_pre_shift: int, post_shift: int, zo: int,
              dtype: str) -> np.ndarray:
    """The NEON ``qs8/qu8-vmul-minmax-rndnu`` kernels on products ``prod`` = (a - za) * (b - zb),
    |prod| <= 255^2: vqshl by the pre-shift (<= 9 bits: |prod| << 9 < 2^31, never saturates), vqdmulh
    (floor of 2 * acc * M / 2^32; saturates only at INT32_MIN^2, unreachable), vrshl right by
    post_shift (round half up), saturate to int16, add zo saturating in int16, saturate to 8 bits."""
    acc = np.asarray(prod, np.int64) << left_pre_shift
    acc = (2 * acc * multiplier) >> 32
    acc = (acc + (1 << (post_shift - 1))) >> post_shift
    acc = np.clip(np.clip(acc, -32768, 32767) + zo, -32768, 32767)
    lo, hi = qrange(dtype)
    return np.clip(acc, lo, hi)


def lrelu_multipliers(sx, so, alpha) -> tuple[int, int]:
    """(positive, negative) multipliers = lrintf(256 * scale): out = (bias + v*m) >> 8 with
    bias = (zo << 8) + 0x80 (round half up)."""
    ps = _F(_F(sx) / _F(so))
    ns = _F(ps * _F(alpha))
    return int(np.rint(_F(_F(256.0) * ps))), int(np.rint(_F(_F(256.0) * ns)))


def cvt_multiplier(sx, so) -> int:
    """``xnn_init_qs8_cvt_scalar_params``: lrintf(256 * float32(sx/so)) in [1, 2^15]."""
    return int(np.rint(_F(_F(256.0) * _F(_F(sx) / _F(so)))))


def eight_bit_shift(v: np.ndarray, multiplier, zo: int, lo: int, hi: int) -> np.ndarray:
    """(zo*256 + 0x80 + v*multiplier) >> 8, clamped: the 8-bit-multiplier requantization of
    ``qs8-vcvt`` / ``qs8-vlrelu`` (v = q - zx, |v*m| < 2^24)."""
    acc = (np.int64(zo) << 8) + 0x80 + np.asarray(v, np.int64) * multiplier
    return np.clip(acc >> 8, lo, hi)


def reciprocal_scale(so) -> np.float32:
    """``1.0f / output_scale`` (float32 division)."""
    return _F(_F(1.0) / _F(so))


def table_unary(fn_name: str, sx, zx: int, so, zo: int, dtype: str) -> np.ndarray:
    """256-entry table of the float reference (``unary_ukernel_quantized``):
    x = (float(q) - float(zx)) * sx ; y = f(x) ; out = clamp(nearbyint(y * (1/so) + float(zo))).
    sigmoid: float(e / (1 + e)) with e = exp(double(x)) (1 above 100, 0 below -100); tanh: tanhf."""
    lo, hi = qrange(dtype)
    inv = reciprocal_scale(so)
    out = np.empty(hi - lo + 1, np.int64)
    for k, q in enumerate(range(lo, hi + 1)):
        x = _F(_F(_F(q) - _F(zx)) * _F(sx))
        if fn_name == "sigmoid":
            if x > 100:
                y = _F(1.0)
            elif x < -100:
                y = _F(0.0)
            else:
                e = lut.exp_double(float(x))
                y = _F(e / (1.0 + e))
        else:
            y = lut.tanhf(x)
        v = _F(_F(y * inv) + _F(zo))
        v = _F(0.0) if np.isnan(v) else v
        out[k] = int(np.rint(min(max(v, _F(lo)), _F(hi))))
    return out
