"""The fused DepthwiseConv fast path (kernels/tflite/ref/depthwise_fast.py + depthwise_fused.py) equals
(``array_equal``) an independent NumPy reference built from the same plan: float64 cell sums of
(x - zx) * (w - zw), + bias, int32 wrap/saturate, ``Requant``.

Sweep axes: every requantizer form the fast path specialises on (double / upward / channel blocks,
float32_half_even, single, float64_half_away, left shifts), accumulator overflow modes (wrap with
the bias folded into the buffer, saturate, exact), the int16 narrow 3x3 pass and its bound (a -128
weight disables it), small channel counts (k-pixel tiling and its remainder), border / interior
splits (explicit pads larger than the kernel: rows with no valid cell), strides, dilations, depth
multiplier, input dtypes int8 / uint8 / int16, zero points at the ends of the range, extreme biases.
"""
from __future__ import annotations

import numpy as np
import pytest

from refinterp.ir import Node, QuantParams, TensorInfo
from refinterp.quant import fixedpoint_nb
from refinterp.kernels.tflite.ref import depthwise_fast as qdepthwise_fast
from refinterp.kernels.tflite.ref.depthwise_fast import fast_depthwise
from refinterp.kernels.registry import PrepareContext, lookup

from test_ref_fast_vs_numpy import _numpy_qconv  # the same NumPy reference (cell-loop sums, int64)

RNG = np.random.default_rng(1208)

WRAP = {"bits": 32, "overflow": "wrap"}
SETTINGS = {
    "double": {"requant": {"rounding": "double"}, "accumulator": WRAP},
    "upward": {"requant": {"rounding": "upward"}, "accumulator": WRAP},
    "blocks": {"requant": {"rounding": "double", "channel_block": 8, "block_rounding": "upward"},
               "accumulator": WRAP},
    "f32": {"requant": {"rounding": "float32_half_even"}, "accumulator": WRAP},
    "single_sat": {"requant": {"rounding": "single"}, "accumulator": {"bits": 32, "overflow": "saturate"}},
    "f64away": {"requant": {"rounding": "float64_half_away"}, "accumulator": WRAP},
    "double_sat": {"requant": {"rounding": "double"}, "accumulator": {"bits": 32, "overflow": "saturate"}},
    "double_exact": {"requant": {"rounding": "double"}},
    "f32_exact": {"requant": {"rounding": "float32_half_even"}},
}


def _x(shape, dtype="int8"):
    info = np.iinfo(np.dtype(dtype))
    x = RNG.integers(int(info.min), int(info.max) + 1, size=shape).astype(dtype)
    x.flat[:2] = [info.min, info.max]
    return x


def _plan(x, w, b, attrs, settings, zx, zo, sx=0.05, so=0.07, sw=None, act=None, out_dtype="int8"):
    n_out = w.shape[-1]
    if sw is None:
        sw = RNG.uniform(0.002, 0.02, n_out).astype(np.float32)
    wq = QuantParams(np.asarray(sw, np.float32), np.zeros(np.size(sw), np.int64), axis=3)
    infos = [TensorInfo("x", x.shape, str(x.dtype), quant=QuantParams(np.float32(sx), zx)),
             TensorInfo("w", w.shape, str(w.dtype), quant=wq, const=w),
             None if b is None else TensorInfo("b", b.shape, str(b.dtype), quant=None, const=b)]
    node = Node("dw", "DepthwiseConv", ["x", "w", "b" if b is not None else ""], ["y"], {**attrs, "activation": act})
    out = TensorInfo("y", None, out_dtype, quant=QuantParams(np.float32(so), zo))
    ctx = PrepareContext(node, infos, [out], dict(settings))
    k = lookup("DepthwiseConv", ["tflite_ref"], node=node)
    return k, k.prepare(node, ctx)


def _attrs(kernel, strides=(1, 1), dil=(1, 1), pad="SAME_UPPER", mult=1, cin=1, pads=None):
    a = {"layout": "NHWC", "weight_layout": "1HWO", "strides": list(strides), "dilations": list(dil),
         "auto_pad": pad, "kernel_shape": list(kernel), "group": cin, "depth_multiplier": mult}
    if pads is not None:
        a["pads"] = list(pads)
    return a


def _check(plan, x, k=None, w=None, b=None):
    ref = _numpy_qconv(plan, x)
    got = fast_depthwise(plan, x)
    assert got is not None
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert np.array_equal(got, ref)
    if k is not None:
        assert np.array_equal(k.run(plan, x, w, b), ref)  # the registered kernel agrees
    return got


def _weights(c, kernel, narrow=True):
    w = _x((1, *kernel, c))
    if narrow:
        w[w == -128] = -127  # |w| <= 127: the int16 3x3 pass is exact for int8 inputs
    return w


GEOMETRY = [  # (spatial, kernel, strides, dilations, padding, explicit pads)
    ((9, 8), (3, 3), (1, 1), (1, 1), "SAME_UPPER", None),
    ((9, 8), (3, 3), (2, 2), (1, 1), "SAME_UPPER", None),
    ((10, 9), (3, 3), (2, 1), (1, 2), "VALID", None),
    ((7, 11), (3, 3), (1, 2), (2, 2), "SAME_UPPER", None),
    ((6, 7), (3, 3), (1, 1), (1, 1), "NOTSET", (4, 0, 1, 5)),   # rows / columns with no valid cell
    ((8, 8), (5, 2), (1, 1), (1, 1), "SAME_UPPER", None),
    ((8, 9), (2, 3), (2, 2), (2, 1), "NOTSET", (1, 2, 0, 3)),
    ((3, 3), (3, 3), (1, 1), (1, 1), "SAME_UPPER", None),      # no interior pixel at all
    ((1, 1), (1, 1), (1, 1), (1, 1), "VALID", None),
]


@pytest.mark.parametrize("geom", GEOMETRY, ids=lambda g: f"{g[0]}k{g[1]}s{g[2]}d{g[3]}{g[4]}")
@pytest.mark.parametrize("c", [5, 32, 130])
@pytest.mark.parametrize("narrow", [True, False])
def test_geometry_channels_narrow(geom, c, narrow):
    hw, kernel, strides, dil, pad, pads = geom
    x = _x((2, *hw, c))
    w = _weights(c, kernel, narrow)
    b = RNG.integers(-20000, 20000, c).astype(np.int32)
    k, plan = _plan(x, w, b, _attrs(kernel, strides, dil, pad, 1, c, pads), SETTINGS["double"], -128, -3,
                    act="RELU6")
    _check(plan, x, k, w, b)
    p = qdepthwise_fast._dw_prep(plan, c, x.dtype)
    assert p["head"]["narrow"] == narrow
    kq = max(1, -(-qdepthwise_fast.LANES // c))
    assert (p["head"]["k"], p["head"]["kq"]) == (kq if strides[1] == 1 else 1, kq)


@pytest.mark.parametrize("setting", sorted(SETTINGS))
@pytest.mark.parametrize("zx,zo,dtype", [(-128, -128, "int8"), (127, 127, "int8"), (0, 5, "int8"),
                                          (0, 0, "uint8"), (255, 128, "uint8")])
def test_rounding_forms_and_zero_points(setting, zx, zo, dtype):
    c = 24
    x = _x((1, 7, 9, c), dtype)
    w = _weights(c, (3, 3))
    b = RNG.integers(-50000, 50000, c).astype(np.int32)
    sw = RNG.uniform(0.002, 0.02, c).astype(np.float32)
    sw[:3] = [2.0 ** -3, 2.0 ** -4, 2.0 ** -5]  # with sx = so: exact powers of two, i.e. ties
    w[..., :3] = RNG.integers(-2, 3, w[..., :3].shape)  # small sums: the ties land inside the output range
    k, plan = _plan(x, w, b, _attrs((3, 3), cin=c), SETTINGS[setting], zx, zo, sx=0.25, so=0.25, sw=sw,
                    out_dtype=dtype)
    _check(plan, x, k, w, b)


@pytest.mark.parametrize("setting", ["double", "upward", "blocks", "f32", "double_sat", "double_exact"])
def test_extreme_bias_and_large_scales(setting):
    """Biases near the int32 ends make acc + bias leave int32 (wrap / saturate / exact); output
    scales far below the input's give multipliers > 1 (left shifts) on some channels."""
    c = 16
    x = _x((1, 6, 7, c))
    w = _weights(c, (3, 3))
    b = RNG.integers(-20000, 20000, c).astype(np.int32)
    b[:6] = [2 ** 31 - 1, 2 ** 31 - 100, -2 ** 31, -2 ** 31 + 77, 2 ** 31 - 40000, -2 ** 31 + 40000]
    sw = RNG.uniform(0.002, 0.02, c).astype(np.float32)
    sw[6:10] = [3.0, 40.0, 700.0, 1.5]
    k, plan = _plan(x, w, b, _attrs((3, 3), cin=c), SETTINGS[setting], 3, 0, sx=0.05, so=0.07, sw=sw)
    _check(plan, x, k, w, b)


@pytest.mark.parametrize("mult", [2, 3])
@pytest.mark.parametrize("setting", ["double", "f32", "single_sat"])
def test_depth_multiplier(mult, setting):
    c = 7
    x = _x((2, 8, 7, c))
    w = _weights(c * mult, (3, 3))
    b = RNG.integers(-5000, 5000, c * mult).astype(np.int32)
    k, plan = _plan(x, w, b, _attrs((3, 3), (2, 1), (1, 1), "SAME_UPPER", mult, c), SETTINGS[setting], 9, -7)
    _check(plan, x, k, w, b)


def test_no_bias_and_uint8_wide_inputs():
    c = 40
    x = _x((1, 12, 10, c), "uint8")
    w = _weights(c, (3, 3))
    k, plan = _plan(x, w, None, _attrs((3, 3), cin=c), SETTINGS["double"], 131, 120, out_dtype="uint8")
    _check(plan, x, k, w, None)
    assert not qdepthwise_fast._dw_prep(plan, c, x.dtype)["head"]["narrow"]  # 255 * 127 * 2 > 32767


def test_int16_inputs_float_rounding_and_int64_buffer():
    """16x8 with a float rounding (XNNPACK-like): int64 accumulator contract, exact int32 buffer;
    int16 weights push the bound past 2^31: int64 buffer."""
    c = 9
    x = _x((1, 6, 6, c), "int16")
    w = _weights(c, (3, 3))
    b = RNG.integers(-5000, 5000, c).astype(np.int64)
    k, plan = _plan(x, w, b, _attrs((3, 3), cin=c), SETTINGS["f32"], 0, 0, sx=0.001, so=0.002, out_dtype="int16")
    _check(plan, x, k, w, b)
    w16 = _x((1, 3, 3, c), "int16")
    k, plan = _plan(x, w16, b, _attrs((3, 3), cin=c), SETTINGS["f32"], 0, 0, sx=0.001, so=0.002, out_dtype="int16")
    _check(plan, x, k, w16, b)
    assert qdepthwise_fast._dw_prep(plan, c, x.dtype)["arrays"][4].dtype == np.int64  # init


def test_parallel_driver_equals_serial(monkeypatch):
    real = qdepthwise_fast.dw_fused
    c = 48
    x = _x((2, 13, 11, c))
    w = _weights(c, (3, 3))
    b = RNG.integers(-5000, 5000, c).astype(np.int32)
    k, plan = _plan(x, w, b, _attrs((3, 3), cin=c), SETTINGS["blocks"], -128, -3)
    serial = _check(plan, x)
    calls = []
    monkeypatch.setattr(qdepthwise_fast, "kernel_threads", lambda work: calls.append(work) or 2)
    monkeypatch.setattr(qdepthwise_fast, "dw_fused", lambda threads, *a: calls.append(threads) or real(threads, *a))
    assert np.array_equal(_check(plan, x), serial)
    assert calls[-1] == 2  # the parallel driver ran


def test_mbqm_pot_equals_reference_rounding():
    """The one-shift double / upward form against requant.py's two-step loop on int32 extremes,
    ties and every right shift 0..31."""
    from refinterp.kernels.tflite.ref.requant_fast import _fused_srdhm

    C = 64
    M = RNG.integers(1 << 30, 1 << 31, C).astype(np.int64)
    M[:3] = [0, (1 << 31) - 1, 1 << 30]
    sh = -(np.arange(C, dtype=np.int64) % 32)  # right shifts 0..31
    a = RNG.integers(-(1 << 31), 1 << 31, (200, C)).astype(np.int64)
    a[:40] >>= RNG.integers(0, 31, (40, 1))
    a[40, :] = -(1 << 31)
    a[41, :] = (1 << 31) - 1
    a[42:48] = np.array([0, -1, 1, -(1 << 30), 1 << 30, -(1 << 30) - 1])[:, None]
    for upward in (False, True):
        ref = np.empty(a.shape, np.int32)
        _fused_srdhm(a, np.zeros(C, np.int64), M, np.zeros(C, np.int64), -sh, upward, True, 0,
                     -(1 << 31), (1 << 31) - 1, ref)
        cp, cn, total = fixedpoint_nb.pot_consts(M, sh, np.full(C, upward))
        got = np.empty(a.shape, np.int32)
        _pot_loop(a, M.astype(np.int32), cp, cn, total, got)
        assert np.array_equal(got, ref), upward


_pot_loop = None


def setup_module():
    global _pot_loop
    import numba

    @numba.njit
    def loop(a, M, cp, cn, total, out):  # pragma: no cover - compiled
        for i in range(a.shape[0]):
            for c in range(a.shape[1]):
                out[i, c] = fixedpoint_nb.mbqm_pot(np.int32(a[i, c]), M[c], cp[c], cn[c], total[c])

    _pot_loop = loop


def test_declines_uncovered():
    c = 4
    x = _x((1, 5, 5, c), "int16")
    w = _x((1, 3, 3, c))
    k, plan = _plan(x, w, None, _attrs((3, 3), cin=c), SETTINGS["double"], 0, 0, out_dtype="int16")
    assert fast_depthwise(plan, x) is None  # 16x8 DepthwiseConv: int64 accumulator + mbqm64
