"""Every fast kernel equals (``array_equal``) the NumPy reference path it replaces.

Sweep axes: zero points (input, weight, output), odd channel counts, strides, dilation, padding
(SAME / VALID / explicit), depth multiplier, rounding form, channel blocks, int32 overflow mode,
output dtype.  Inputs cover the full dtype range so the exactness bounds are exercised at their edge.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from refinterp.ir import Node, QuantParams, TensorInfo
from refinterp.kernels.float import conv as fconv
from refinterp.kernels.spatial import ints, resolve_window
from refinterp.kernels.tflite.ref.conv_fast import fast_conv
from refinterp.kernels.tflite.ref.depthwise_fast import fast_depthwise
from refinterp.kernels.tflite.ref.requant_fast import fused_requant
from refinterp.kernels.registry import PrepareContext, lookup
from refinterp.quant.fixedpoint import wrap_int32
from refinterp.quant.params import Requant, accumulate_overflow
from refinterp.quant.requant import Rounding, requantize

RNG = np.random.default_rng(8)


# -- float conv fast paths (conv.conv_channels_last vs conv_channels_last_numpy) -------------------

FLOAT_CASES = [  # (kernel, group kind, cin, mg/cout, strides, dilations, pads)
    ((1, 1), "dense", 7, 5, (1, 1), (1, 1), (0, 0, 0, 0)),
    ((1, 1), "dense", 3, 9, (2, 2), (1, 1), (0, 0, 0, 0)),
    ((1, 1), "dense", 5, 3, (2, 1), (1, 1), (1, 0, 1, 1)),
    ((3, 3), "dw", 7, 1, (1, 1), (1, 1), (1, 1, 1, 1)),
    ((3, 3), "dw", 5, 2, (2, 2), (1, 1), (0, 1, 1, 0)),
    ((3, 2), "dw", 9, 1, (1, 2), (2, 1), (2, 0, 1, 1)),
    ((5, 5), "dw", 3, 3, (2, 2), (2, 2), (2, 2, 2, 2)),
]


@pytest.mark.parametrize("case", FLOAT_CASES, ids=lambda c: f"{c[1]}{c[0]}c{c[2]}m{c[3]}s{c[4]}d{c[5]}")
@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("bias", [False, True])
def test_float_conv_fast_equals_numpy(case, dt, bias):
    k, kind, cin, m, strides, dil, pads = case
    x = RNG.standard_normal((2, 11, 10, cin)).astype(dt)
    x[0, 0, 0, 0] = -0.0
    if kind == "dense":
        wk = RNG.standard_normal(k + (1, cin, m)).astype(dt)
        b = RNG.standard_normal(m).astype(dt) if bias else None
    else:
        wk = RNG.standard_normal(k + (cin, 1, m)).astype(dt)
        b = RNG.standard_normal(cin * m).astype(dt) if bias else None
    win = resolve_window(x.shape[1:3], k, strides, dil, pads)
    cdt = np.dtype(dt)
    fast = fconv.conv_channels_last(x, wk, b, win, cdt)
    ref = fconv.conv_channels_last_numpy(x, wk, b, win, cdt)
    assert fast.dtype == ref.dtype and fast.shape == ref.shape
    assert np.array_equal(fast, ref)
    assert np.array_equal(np.signbit(fast), np.signbit(ref))  # -0.0 kept as the cell loop makes it


# -- fused requantizer vs Requant(accumulate_overflow(acc + bias)) ---------------------------------

def _requant(rounding, C, per_channel, zo, dtype, block=0, block_rounding=None):
    eff = RNG.uniform(1e-5, 0.9, C) if per_channel else np.array(RNG.uniform(1e-5, 0.9))
    if per_channel:
        eff[:2] = [2.0 ** -11, 2.0 ** -12]  # exact powers of two: ties in every rounding form
    info = np.iinfo(np.dtype(dtype))
    lo, hi = int(info.min) + 3, int(info.max) - 2
    return Requant.build(eff, Rounding(rounding), zo, lo, hi, dtype, block,
                         None if block_rounding is None else Rounding(block_rounding))


@pytest.mark.parametrize("rounding", ["double", "upward", "single", "float32_half_even", "float64_half_away"])
@pytest.mark.parametrize("per_channel,block", [(False, 0), (True, 0), (True, 8)])
@pytest.mark.parametrize("overflow", [None, "wrap", "saturate"])
@pytest.mark.parametrize("dtype,zo", [("int8", -5), ("int8", 0), ("uint8", 128), ("int16", 0)])
def test_fused_requant_equals_numpy(rounding, per_channel, block, overflow, dtype, zo):
    C = 19
    rq = _requant(rounding, C, per_channel, zo, dtype, block, "upward" if block else None)
    acc = RNG.integers(-(1 << 20), 1 << 20, size=(37, C)).astype(np.int64)
    acc[0, :] = [k * (1 << 11) + (1 << 10) for k in range(-9, 10)]  # exact ties at shift 11..12
    acc[1, :3] = [(1 << 31) - 1, -(1 << 31), 0]
    if overflow is not None:
        acc[2, :4] = [(1 << 33) + 5, -(1 << 32) - 7, (1 << 31), -(1 << 31) - 1]  # leave int32
    bias = RNG.integers(-(1 << 16), 1 << 16, size=C).astype(np.int64)
    settings = {} if overflow is None else {"accumulator": {"bits": 32, "overflow": overflow}}
    acc32 = overflow is not None
    if not acc32:
        acc = np.clip(acc, -(1 << 30), (1 << 30))  # integer forms need int32-valued accumulators
    exp_acc = acc + bias
    if acc32:
        exp_acc = accumulate_overflow(exp_acc, settings)
    ref = rq(exp_acc)
    for a in (acc, acc.astype(np.float64)):
        got = fused_requant(rq, a, bias, acc32, settings)
        assert got.dtype == ref.dtype
        assert np.array_equal(got, ref)


def test_fused_requant_declines_other_forms():
    rq = _requant("double", 4, True, 0, "int8")
    for r in ("mbqm64", "pot"):
        other = Requant.build(rq.scale, Rounding(r), 0, -128, 127, "int8")
        assert fused_requant(other, np.zeros((2, 4), np.int64)) is None


# -- fast TFLite integer Conv / DepthwiseConv vs qconv's NumPy kernels -------------------------------

SETTINGS = {
    "tflite_ref": {"requant": {"rounding": "double"}, "accumulator": {"bits": 32, "overflow": "wrap"}},
    "upward": {"requant": {"rounding": "upward"}, "accumulator": {"bits": 32, "overflow": "wrap"}},
    "blocks": {"requant": {"rounding": "double", "channel_block": 8, "block_rounding": "upward"},
               "accumulator": {"bits": 32, "overflow": "wrap"}},
    "single": {"requant": {"rounding": "single"}, "accumulator": {"bits": 32, "overflow": "saturate"}},
}


def _plan(op, x, w, b, attrs, settings, zx, zw, zo, per_channel, act=None, out_dtype="int8"):
    n_out = w.shape[0] if op == "Conv" else w.shape[-1]
    sw = RNG.uniform(0.002, 0.02, n_out).astype(np.float32) if per_channel else np.float32(0.01)
    wq = QuantParams(sw, np.full(np.size(sw), zw), axis=0 if op == "Conv" else 3)
    infos = [TensorInfo("x", x.shape, str(x.dtype), quant=QuantParams(np.float32(0.05), zx)),
             TensorInfo("w", w.shape, str(w.dtype), quant=wq, const=w),
             None if b is None else TensorInfo("b", b.shape, "int32", quant=None, const=b)]
    node = Node("n", op, ["x", "w", "b" if b is not None else ""], ["y"], {**attrs, "activation": act})
    out = TensorInfo("y", None, out_dtype, quant=QuantParams(np.float32(0.07), zo))
    ctx = PrepareContext(node, infos, [out], dict(settings))
    k = lookup(op, ["tflite_ref"], node=node)
    return k, k.prepare(node, ctx)


def _numpy_qconv(plan, x):
    """The NumPy reference of a TFLite integer (depthwise) conv from its plan, independent of the
    registered kernel (which may itself call the fast path once wired): float64 cell-loop sums of
    (x - zx) * (w - zw), + bias, int32 wrap/saturate, ``Requant``."""
    fp = plan.fplan
    group = x.shape[-1] if fp.group == 0 else fp.group
    wk = fconv.internal_weights(plan.w, fp.weight_layout, group, 2, fp.name)
    win = resolve_window(x.shape[1:3], wk.shape[:2], ints(fp.strides, 2, 1), ints(fp.dilations, 2, 1), fp.pads,
                         fp.auto_pad)
    acc = fconv.conv_channels_last_numpy(x.astype(np.float64) - plan.zx, wk, None, win, np.dtype(np.float64))
    acc = acc.astype(np.int64)
    if plan.bias is not None:
        acc = acc + plan.bias
    if plan.acc32:
        acc = accumulate_overflow(acc, plan.settings)
    return plan.requant(acc)


def _x(shape, dtype="int8"):
    info = np.iinfo(np.dtype(dtype))
    x = RNG.integers(int(info.min), int(info.max) + 1, size=shape).astype(dtype)
    x.flat[:2] = [info.min, info.max]
    return x


CONV_CASES = list(itertools.product(
    [(1, 1), (3, 3), (2, 3)],                       # kernel
    [(1, 1), (2, 2)],                                # strides
    [(1, 1), (2, 1)],                                # dilations
    ["SAME_UPPER", "VALID"],                         # padding
))


@pytest.mark.parametrize("kernel,strides,dil,pad", CONV_CASES)
@pytest.mark.parametrize("cin,cout", [(3, 8), (13, 7)])
def test_fast_conv_equals_reference(kernel, strides, dil, pad, cin, cout):
    x = _x((2, 9, 8, cin))
    w = _x((cout, *kernel, cin))
    b = RNG.integers(-5000, 5000, cout).astype(np.int32)
    attrs = {"layout": "NHWC", "weight_layout": "OHWI", "strides": list(strides), "dilations": list(dil),
             "auto_pad": pad, "kernel_shape": list(kernel), "group": 1}
    for name, zx, zw, zo, pc, act in [("tflite_ref", -128, 0, -3, True, "RELU6"), ("upward", 7, 0, 0, True, None),
                                      ("blocks", 0, 3, 5, False, "RELU"), ("single", -1, -2, 100, True, None)]:
        k, plan = _plan("Conv", x, w, b, attrs, SETTINGS[name], zx, zw, zo, pc, act)
        ref = _numpy_qconv(plan, x)
        assert np.array_equal(k.run(plan, x, w, b), ref), name  # the registered kernel agrees
        got = fast_conv(plan, x)
        assert got is not None, name
        assert got.dtype == ref.dtype and np.array_equal(got, ref), name


def test_fast_conv_long_k_chunks_and_int16():
    """K = 3*3*160 = 1440 > one float32 chunk (518 at |x-zx| <= 255, |w| <= 127); int16 x -> float64."""
    x = _x((1, 6, 5, 160))
    w = _x((9, 3, 3, 160))
    w.flat[0] = -128
    attrs = {"layout": "NHWC", "weight_layout": "OHWI", "strides": [1, 1], "dilations": [1, 1],
             "auto_pad": "SAME_UPPER", "group": 1}
    k, plan = _plan("Conv", x, w, None, attrs, SETTINGS["tflite_ref"], -128, 0, 2, True)
    assert np.array_equal(fast_conv(plan, x), _numpy_qconv(plan, x))
    x16 = _x((1, 5, 4, 6), "int16")
    w16 = _x((4, 1, 1, 6))
    b64 = RNG.integers(-5000, 5000, 4).astype(np.int32)
    k, plan = _plan("Conv", x16, w16, b64, attrs, SETTINGS["tflite_ref"], 0, 0, 0, True, out_dtype="int16")
    ref = _numpy_qconv(plan, x16)
    got = fast_conv(plan, x16)  # int16 x + int32 bias: the int32 path, float64 GEMM
    assert got is not None and np.array_equal(got, ref)



def test_fast_conv_column_l1_bound_one_float32_gemm():
    """K = 3*3*160 = 1440 but every output column's sum of |w| is at most (2^24 - 1) // 255, so any
    partial sum stays below 2^24: one float32 GEMM, exact even with the inputs at the far end."""
    from refinterp.kernels.tflite.ref.conv_fast import _conv_prep

    cap = ((1 << 24) - 1) // 255
    w = np.zeros((5, 3, 3, 160), np.int8)
    flat = w.reshape(5, -1)
    for m in range(5):
        idx = RNG.choice(flat.shape[1], 700, replace=False)
        vals = RNG.integers(-127, 128, 700)
        vals[0] = -127 if m % 2 else 127
        vals = np.where(np.cumsum(np.abs(vals)) <= cap, vals, 0)
        vals[-1] = 0
        vals[-1] = (cap - int(np.abs(vals).sum())) % 128  # reach the bound exactly where possible
        flat[m, idx] = vals
    assert int(np.abs(flat.astype(np.int64)).sum(axis=1).max()) <= cap
    x = np.full((1, 6, 5, 160), -128, np.int8)  # |x - zx| = 255 everywhere with zx = 127
    x[0, 0, 0, :3] = [127, 0, -1]
    attrs = {"layout": "NHWC", "weight_layout": "OHWI", "strides": [1, 1], "dilations": [1, 1],
             "auto_pad": "SAME_UPPER", "group": 1}
    k, plan = _plan("Conv", x, w, None, attrs, SETTINGS["tflite_ref"], 127, 0, 2, True)
    prep = _conv_prep(plan, 160, x.dtype)
    assert prep[1] == np.float32 and prep[2] == 1440  # one chunk
    assert np.array_equal(fast_conv(plan, x), _numpy_qconv(plan, x))
    from refinterp.kernels.tflite.ref.conv_fast import _chunks
    assert _chunks(1440, np.dtype(np.int8), 127, 127.0, float(cap + 1))[1] < 1440  # one over: chunked


DW_CASES = list(itertools.product(
    [(3, 3), (5, 2)],                                # kernel
    [(1, 1), (2, 2), (1, 2)],                        # strides
    [(1, 1), (2, 2)],                                # dilations
    ["SAME_UPPER", "VALID"],                         # padding
    [1, 2],                                          # depth multiplier
))


@pytest.mark.parametrize("kernel,strides,dil,pad,mult", DW_CASES)
def test_fast_depthwise_equals_reference(kernel, strides, dil, pad, mult):
    cin = 11
    x = _x((2, 12, 11, cin))
    w = _x((1, *kernel, cin * mult))
    b = RNG.integers(-5000, 5000, cin * mult).astype(np.int32)
    attrs = {"layout": "NHWC", "weight_layout": "1HWO", "strides": list(strides), "dilations": list(dil),
             "auto_pad": pad, "kernel_shape": list(kernel), "group": cin, "depth_multiplier": mult}
    for name, zx, zw, zo, pc, act in [("tflite_ref", -128, 0, -3, True, "RELU6"), ("blocks", 9, 0, 0, True, None),
                                      ("upward", 0, 4, 11, False, "RELU"), ("single", 3, 0, -100, True, None)]:
        k, plan = _plan("DepthwiseConv", x, w, b, attrs, SETTINGS[name], zx, zw, zo, pc, act)
        ref = _numpy_qconv(plan, x)
        assert np.array_equal(k.run(plan, x, w, b), ref), name
        got = fast_depthwise(plan, x)
        assert got is not None, name
        assert got.dtype == ref.dtype and np.array_equal(got, ref), name


def test_fast_paths_decline_uncovered_cases():
    x = _x((1, 5, 5, 4), "int16")
    w = _x((1, 3, 3, 4))
    attrs = {"layout": "NHWC", "weight_layout": "1HWO", "strides": [1, 1], "dilations": [1, 1],
             "auto_pad": "SAME_UPPER", "group": 4, "depth_multiplier": 1}
    _, plan = _plan("DepthwiseConv", x, w, None, attrs, SETTINGS["tflite_ref"], 0, 0, 0, True, out_dtype="int16")
    assert fast_depthwise(plan, x) is None  # 16x8 depthwise: int64 accumulator + mbqm64 -> NumPy path


# -- fast TFLite ADD / SUB vs qelementwise's NumPy kernel ---------------------------------------------

ADD_CASES = [  # (dtype, s1, z1, s2, z2, so, zo, activation, shapes)
    ("int8", 0.02, -3, 0.05, 7, 0.06, -1, None, ((2, 5, 7, 3), (2, 5, 7, 3))),
    ("int8", 0.1, 0, 0.1, 0, 0.1, 0, "RELU6", ((4, 9), (4, 9))),
    ("int8", 0.3, 127, 0.001, -128, 0.2, 5, "RELU", ((3, 1, 5), (1, 4, 5))),  # broadcast
    ("uint8", 0.02, 128, 0.03, 100, 0.04, 120, None, ((6, 11), (6, 11))),
    ("int16", 0.0003, 0, 0.0007, 0, 0.0009, 0, None, ((5, 13), (5, 13))),  # general int16 path
]


def _numpy_add_sub(p, a, b):
    """ADD / SUB (non power-of-two) from the plan with the NumPy requantizer, independent of the
    registered kernel: int32-valued intermediates, wrap of the sum, clamp."""
    r = Rounding(p.rounding)
    a, b = a.astype(np.int64), b.astype(np.int64)
    A = requantize((a - p.z1) << p.left_shift, p.m1, p.e1, r)
    B = requantize((b - p.z2) << p.left_shift, p.m2, p.e2, r)
    s = wrap_int32(A - B if p.sub else A + B)
    return np.clip(requantize(s, p.mo, p.eo, r) + p.zo, *p.clamp).astype(p.dtype)


@pytest.mark.parametrize("case", ADD_CASES, ids=lambda c: f"{c[0]}-{c[7]}-{c[8][0]}")
@pytest.mark.parametrize("op", ["Add", "Sub"])
@pytest.mark.parametrize("rounding", ["double", "upward", "single"])
def test_fast_add_sub_equals_reference(case, op, rounding):
    from refinterp.kernels.tflite.ref.elementwise_fast import fast_add_sub

    dt, s1, z1, s2, z2, so, zo, act, (sha, shb) = case
    a, b = _x(sha, dt), _x(shb, dt)
    node = Node("n", op, ["a", "b"], ["y"], {"activation": act, "pot_scale_int16": False})
    infos = [TensorInfo("a", sha, dt, quant=QuantParams(np.float32(s1), z1)),
             TensorInfo("b", shb, dt, quant=QuantParams(np.float32(s2), z2))]
    out = TensorInfo("y", None, dt, quant=QuantParams(np.float32(so), zo))
    ctx = PrepareContext(node, infos, [out], {"requant": {"rounding": rounding}})
    k = lookup(op, ["tflite_ref"], node=node)
    plan = k.prepare(node, ctx)
    ref = _numpy_add_sub(plan, a, b)
    assert np.array_equal(k.run(plan, a, b), ref)  # the registered kernel agrees
    got = fast_add_sub(plan, a, b)
    assert got is not None and got.dtype == ref.dtype and np.array_equal(got, ref)
