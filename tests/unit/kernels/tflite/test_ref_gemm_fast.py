"""Fast FullyConnected / BatchMatMul and the XNNPACK (float32 half-even) forms of the fast conv paths
equal (``array_equal``) an independent NumPy reference built from the plan.

Sweep axes: input dtype (int8 / uint8 / int16), zero points, per-tensor / per-channel filter,
rounding form (incl. ``float64_half_away`` and ``float32_half_even``), int32 overflow mode, K longer
than one float32 chunk, keep_num_dims, adjoint flags; the XNNPACK variant (``xnn``) of every op.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from refinterp.ir import Node, QuantParams, TensorInfo
from refinterp.kernels.float import conv_transpose as ftconv
from refinterp.kernels.tflite.ref.conv_fast import fast_conv
from refinterp.kernels.tflite.ref.depthwise_fast import fast_depthwise
from refinterp.kernels.tflite.ref.matmul_fast import fast_bmm, fast_fc
from refinterp.kernels.tflite.ref.requant_fast import conv_finish
from refinterp.kernels.registry import PrepareContext, lookup
from refinterp.quant.params import accumulate_overflow
from refinterp.quant.requant import Rounding

from test_ref_fast_vs_numpy import _numpy_qconv, _x

RNG = np.random.default_rng(88)
ACC32 = {"accumulator": {"bits": 32, "overflow": "wrap"}}
XNN = {"requant": {"rounding": "double"}, **ACC32, "delegate": {"requant": {"rounding": "float32_half_even"}}}


def _finish(acc, plan_bias, acc32, settings, rq):
    acc = acc.astype(np.int64)
    if plan_bias is not None:
        acc = acc + plan_bias
    if acc32:
        acc = accumulate_overflow(acc, settings)
    return rq(acc)


def _fc(x, w, b, settings, zx, zw, zo, per_channel, variant="tflite_ref", act=None, keep=False):
    o = w.shape[0]
    sw = RNG.uniform(0.002, 0.02, o).astype(np.float32) if per_channel else np.float32(0.01)
    infos = [TensorInfo("x", x.shape, str(x.dtype), quant=QuantParams(np.float32(0.05), zx)),
             TensorInfo("w", w.shape, str(w.dtype), quant=QuantParams(sw, np.full(np.size(sw), zw), axis=0),
                        const=w),
             None if b is None else TensorInfo("b", b.shape, str(b.dtype), quant=None, const=b)]
    node = Node("fc", "FullyConnected", ["x", "w", "b" if b is not None else ""], ["y"],
                {"activation": act, "keep_num_dims": keep})
    out = TensorInfo("y", None, str(x.dtype), quant=QuantParams(np.float32(0.07), zo))
    k = lookup("FullyConnected", [variant], node=node)
    return k, k.prepare(node, PrepareContext(node, infos, [out], dict(settings)))


def _numpy_fc(plan, x):
    """Exact int64 GEMM of (x - zx) and the plan's (w - zw), + bias, overflow, ``Requant``."""
    w = plan.w.astype(np.int64)
    acc = (x.reshape(-1, w.shape[1]).astype(np.int64) - plan.zx) @ w.T
    y = _finish(acc, plan.bias, plan.acc32, plan.settings, plan.requant)
    return y.reshape(x.shape[:-1] + (w.shape[0],)) if plan.keep_num_dims else y


FC_CASES = list(itertools.product(
    ["double", "upward", "single", "float64_half_away", "float32_half_even"],   # rounding
    [("int8", -128, 0), ("int8", 5, 3), ("uint8", 128, 0), ("int16", 0, 0)],  # x dtype, zx, zw
    [False, True],                                                            # per-channel
))


@pytest.mark.parametrize("rounding,dz,per_channel", FC_CASES)
def test_fast_fc_equals_reference(rounding, dz, per_channel):
    dt, zx, zw = dz
    wdt = "int8" if dt != "uint8" else "uint8"
    K = 1300 if dt != "int16" else 40  # int8: > one float32 chunk (518 terms); int16: float64
    x = _x((3, 2, K), dt)
    w = _x((11, K), wdt)
    b = RNG.integers(-50000, 50000, 11).astype(np.int64 if dt == "int16" else np.int32)
    for keep, overflow in [(False, "wrap"), (True, "saturate")]:
        settings = {"requant": {"rounding": rounding, "rounding64": "single"},
                    "accumulator": {"bits": 32, "overflow": overflow}}
        k, plan = _fc(x, w, b, settings, zx, zw, -3, per_channel, keep=keep)
        ref = _numpy_fc(plan, x)
        got = fast_fc(plan, x)
        assert got is not None, (rounding, dz)
        assert got.dtype == ref.dtype and got.shape == ref.shape and np.array_equal(got, ref)
        assert np.array_equal(k.run(plan, x, w, b), ref)  # the registered kernel agrees


def test_fast_fc_declines_mbqm64_and_wraps_overflow():
    x = _x((2, 30), "int16")
    w = _x((5, 30))
    k, plan = _fc(x, w, None, {"requant": {"rounding": "double"}, **ACC32}, 0, 0, 0, True)
    assert plan.requant.rounding is Rounding.MBQM64 and fast_fc(plan, x) is None
    # a huge bias makes the int32 accumulator wrap: the fused path applies the same wrap
    x8, w8 = _x((4, 64)), _x((3, 64))
    b = np.array([2 ** 31 - 10, -(2 ** 31) + 10, 0], np.int64).astype(np.int32)
    k, plan = _fc(x8, w8, b, {"requant": {"rounding": "double"}, **ACC32}, -128, 0, 0, False)
    assert np.array_equal(fast_fc(plan, x8), _numpy_fc(plan, x8))


def _bmm(a, b, settings, za, zb, adj, variant="tflite_ref"):
    infos = [TensorInfo("a", a.shape, str(a.dtype), quant=QuantParams(np.float32(0.03), za)),
             TensorInfo("b", b.shape, str(b.dtype), quant=QuantParams(np.float32(0.02), zb))]
    node = Node("bmm", "BatchMatMul", ["a", "b"], ["y"], {"adj_x": adj[0], "adj_y": adj[1]})
    out = TensorInfo("y", None, str(a.dtype), quant=QuantParams(np.float32(0.4), 3))
    k = lookup("BatchMatMul", [variant], node=node)
    return k, k.prepare(node, PrepareContext(node, infos, [out], dict(settings)))


@pytest.mark.parametrize("rounding", ["double", "upward", "float32_half_even", "float64_half_away"])
@pytest.mark.parametrize("adj", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("dt,za,zb", [("int8", -7, 0), ("uint8", 128, 120)])
def test_fast_bmm_equals_reference(rounding, adj, dt, za, zb):
    K, M, N = 300, 5, 6  # K > 258, the float32 chunk at |a - za|, |b - zb| <= 255
    a = _x((2, 1, K, M) if adj[0] else (2, 1, M, K), dt)
    b = _x((3, N, K) if adj[1] else (3, K, N), dt)
    k, plan = _bmm(a, b, {"requant": {"rounding": rounding}, **ACC32}, za, zb, adj)
    af = a.astype(np.int64) - za
    bf = b.astype(np.int64) - zb
    af = np.swapaxes(af, -1, -2) if adj[0] else af
    bf = np.swapaxes(bf, -1, -2) if adj[1] else bf
    ref = plan.requant(accumulate_overflow(np.matmul(af, bf), plan.settings))
    got = fast_bmm(plan, a, b)
    assert got is not None and got.dtype == ref.dtype and got.shape == (2, 3, M, N)
    assert np.array_equal(got, ref)
    assert np.array_equal(k.run(plan, a, b), ref)


# -- XNNPACK variant: every delegated GEMM-like op takes a fast path ---------------------------------

def test_xnn_fc_and_bmm_take_the_fast_path():
    x, w = _x((2, 700)), _x((9, 700))
    b = RNG.integers(-5000, 5000, 9).astype(np.int32)
    for pc, act in [(True, "RELU6"), (False, None)]:
        k, plan = _fc(x, w, b, XNN, -128, 0, 4, pc, variant="xnn", act=act)
        assert plan.executed_by == "xnnpack" and plan.requant.rounding is Rounding.FLOAT32_HALF_EVEN
        got = fast_fc(plan, x)
        assert got is not None and np.array_equal(got, _numpy_fc(plan, x))
    a, bb = _x((1, 4, 50)), _x((1, 50, 7))
    k, plan = _bmm(a, bb, XNN, 3, 0, (False, False), variant="xnn")
    assert plan.executed_by == "xnnpack" and plan.requant.rounding is Rounding.FLOAT32_HALF_EVEN
    ref = plan.requant(accumulate_overflow((a.astype(np.int64) - 3) @ bb.astype(np.int64), plan.settings))
    got = fast_bmm(plan, a, bb)
    assert got is not None and np.array_equal(got, ref)


def _xnn_conv_plan(op, x, w, b, attrs, act):
    n_out = w.shape[0] if op == "Conv" else w.shape[-1]
    wq = QuantParams(RNG.uniform(0.002, 0.02, n_out).astype(np.float32), np.zeros(n_out, np.int64),
                     axis=0 if op == "Conv" else 3)
    infos = [TensorInfo("x", x.shape, "int8", quant=QuantParams(np.float32(0.05), -128)),
             TensorInfo("w", w.shape, "int8", quant=wq, const=w),
             TensorInfo("b", b.shape, "int32", quant=None, const=b)]
    node = Node("n", op, ["x", "w", "b"], ["y"], {**attrs, "activation": act})
    out = TensorInfo("y", None, "int8", quant=QuantParams(np.float32(0.07), 2))
    k = lookup(op, ["xnn"], node=node)
    plan = k.prepare(node, PrepareContext(node, infos, [out], dict(XNN)))
    assert plan.executed_by == "xnnpack" and plan.requant.rounding is Rounding.FLOAT32_HALF_EVEN
    return k, plan


@pytest.mark.parametrize("kernel,strides,pad", [((1, 1), (1, 1), "VALID"), ((3, 3), (2, 2), "SAME_UPPER")])
def test_xnn_conv_and_depthwise_take_the_fast_path(kernel, strides, pad):
    x = _x((1, 9, 8, 6))
    attrs = {"layout": "NHWC", "strides": list(strides), "dilations": [1, 1], "auto_pad": pad,
             "kernel_shape": list(kernel)}
    w = _x((7, *kernel, 6))
    w[w == -128] = -127  # XNNPACK takes symmetric per-channel filters
    b = RNG.integers(-5000, 5000, 7).astype(np.int32)
    k, plan = _xnn_conv_plan("Conv", x, w, b, {**attrs, "weight_layout": "OHWI", "group": 1}, "RELU6")
    got = fast_conv(plan, x)
    assert got is not None and np.array_equal(got, _numpy_qconv(plan, x))
    wd = _x((1, *kernel, 12))
    bd = RNG.integers(-5000, 5000, 12).astype(np.int32)
    k, plan = _xnn_conv_plan("DepthwiseConv", x, wd, bd, {**attrs, "weight_layout": "1HWO", "group": 6,
                                                           "depth_multiplier": 2}, None)
    got = fast_depthwise(plan, x)
    assert got is not None and np.array_equal(got, _numpy_qconv(plan, x))


def test_xnn_transpose_conv_requantizes_on_the_fast_path():
    x = _x((1, 4, 5, 3))
    w = _x((6, 3, 3, 3))
    b = RNG.integers(-5000, 5000, 6).astype(np.int32)
    attrs = {"layout": "NHWC", "weight_layout": "OHWI", "strides": [2, 2], "auto_pad": "SAME_UPPER",
             "output_shape": [8, 10]}
    infos = [TensorInfo("x", x.shape, "int8", quant=QuantParams(np.float32(0.05), -128)),
             TensorInfo("w", w.shape, "int8", quant=QuantParams(RNG.uniform(0.002, 0.02, 6).astype(np.float32),
                                                               np.zeros(6, np.int64), axis=0), const=w),
             TensorInfo("b", b.shape, "int32", quant=None, const=b)]
    node = Node("tc", "ConvTranspose", ["x", "w", "b"], ["y"], attrs)
    out = TensorInfo("y", (1, 8, 10, 6), "int8", quant=QuantParams(np.float32(0.07), 1))
    k = lookup("ConvTranspose", ["xnn"], node=node)
    plan = k.prepare(node, PrepareContext(node, infos, [out], dict(XNN)))
    assert plan.executed_by == "xnnpack" and plan.requant.rounding is Rounding.FLOAT32_HALF_EVEN
    acc = ftconv.conv_transpose(plan.fplan, x.astype(np.float64) - plan.zx, plan.w, None)
    ref = _finish(acc, plan.bias, plan.acc32, plan.settings, plan.requant)
    got = conv_finish(plan, acc)
    assert got is not None and np.array_equal(got, ref)
    assert np.array_equal(k.run(plan, x, w, b), ref)


@pytest.mark.parametrize("rows", [1, 8, 9])
@pytest.mark.parametrize("dt,zx,wdt,zw", [("int8", -128, "int8", 0), ("uint8", 0, "uint8", 0),
                                          ("int8", 127, "int8", -3)])
def test_fast_fc_integer_dot_path(rows, dt, zx, wdt, zw):
    """<= 8 rows: int32 dot products over int8 (|w - zw| <= 127) or int16 weights; 9 rows: the
    float32 GEMM; both equal the reference, inputs at the far end of the range included."""
    from refinterp.kernels.tflite.ref.matmul_fast import _fc_prep

    K = 700
    x = _x((rows, K), dt)
    x[0, :] = np.iinfo(np.dtype(dt)).min if zx >= 0 else np.iinfo(np.dtype(dt)).max  # |x - zx| maximal
    w = _x((13, K), wdt)
    if dt == "int8" and zw == 0:
        w[w == -128] = -127  # |w| <= 127: the int8 weight copy
    b = RNG.integers(-50000, 50000, 13).astype(np.int32)
    k, plan = _fc(x, w, b, {"requant": {"rounding": "double"}, **ACC32}, zx, zw, -3, True)
    wi = _fc_prep(plan, x.dtype)[-1]
    assert wi is not None and wi.dtype == (np.int8 if np.max(np.abs(plan.w)) <= 127 else np.int16)
    got = fast_fc(plan, x)
    assert got is not None and np.array_equal(got, _numpy_fc(plan, x))


def test_fast_fc_integer_dot_declines_when_int32_could_wrap():
    from refinterp.kernels.tflite.ref.matmul_fast import _fc_prep

    x = _x((1, 70000))  # 255 * 70000 * 127 > 2^31: the float GEMM path (chunked) instead
    w = np.full((2, 70000), 127, np.int8)
    k, plan = _fc(x, w, None, {"requant": {"rounding": "double"}, **ACC32}, -128, 0, 0, False)
    assert _fc_prep(plan, x.dtype)[-1] is None
    assert np.array_equal(fast_fc(plan, x), _numpy_fc(plan, x))
