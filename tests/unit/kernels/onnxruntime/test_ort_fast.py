"""The fast ONNX Runtime (MLAS) integer kernels (refinterp/kernels/fast/ort_*.py) equal
(``array_equal``) the NumPy path of refinterp/kernels/onnxruntime/gemm.py they replace, and are taken.

Sweep: input / weight / output dtypes (u8, s8), zero points at both ends of their range, per-channel
weight zero points, extreme codes, multipliers that make exact .5 ties (powers of two) and that
saturate, odd shapes, strides, dilations, asymmetric padding, batch 2, K long enough to need
several exact float32 chunks.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from refinterp.kernels.onnxruntime import gemm as ort_gemm
from refinterp.kernels.float.conv import ConvPlan
from refinterp.kernels.onnxruntime.conv_fast import fast_ort_conv
from refinterp.kernels.onnxruntime.gemm_fast import fast_ort_gemm

RNG = np.random.default_rng(808)
RANGE = {"uint8": (0, 255), "int8": (-128, 127)}


def _codes(dt: str, shape, extremes: bool = True) -> np.ndarray:
    lo, hi = RANGE[dt]
    v = RNG.integers(lo, hi + 1, size=shape)
    if extremes and v.size >= 4:  # both ends of the range somewhere in every tensor
        flat = v.reshape(-1)
        flat[:: max(1, flat.size // 7)] = lo
        flat[1:: max(1, flat.size // 5)] = hi
    return v.astype(dt)


def _plan(kind, x_dt, w_dt, y_dt, w, zx, zw, zy, mult, bias, strides, dil, pads, group):
    m = w.shape[0]
    zw_b = np.asarray(zw, np.int64).reshape(-1, 1, 1, 1) if np.size(zw) > 1 else np.asarray(zw, np.int64)
    lo, hi = RANGE[y_dt]
    fplan = ConvPlan("n", "NCHW", "OIHW", 0 if kind == "DepthwiseConv" else group, tuple(w.shape[2:]),
                     strides, dil, pads, "NOTSET")
    return ort_gemm.QGemmPlan("n", kind, fplan, int(zx), zw_b, w.astype(np.float64) - zw_b, w,
                              None if bias is None else np.asarray(bias, np.int64),
                              np.asarray(mult, np.float32).reshape(-1), int(zy), lo, hi, y_dt, "mlas_f32", 1)


def _numpy_path(plan, x):
    return ort_gemm._finish(plan, ort_gemm.conv_acc(plan, x, plan.w_raw))


def _mult(kind: str, m: int, k: int) -> np.ndarray:
    if kind == "tie":  # powers of two: acc * 2^-j lands on .5 for many odd accumulators
        return (2.0 ** -RNG.integers(1, 4, size=m)).astype(np.float32)
    if kind == "sat":
        return np.full(m, 0.37, np.float32)
    return (RNG.uniform(0.5, 2.0, size=m) / (k * 64.0)).astype(np.float32)


CONV_CASES = [  # (kernel, cin, cout, strides, dilations, pads, H, W, depthwise)
    ((1, 1), 16, 24, (1, 1), (1, 1), (0, 0, 0, 0), 9, 7, False),
    ((1, 1), 7, 5, (2, 2), (1, 1), (0, 0, 0, 0), 9, 8, False),
    ((1, 1), 600, 9, (1, 1), (1, 1), (0, 0, 0, 0), 3, 5, False),  # K = 600: two f32 chunks
    ((3, 3), 3, 8, (2, 2), (1, 1), (1, 1, 1, 1), 12, 11, False),
    ((1, 1), 8, 96, (1, 1), (1, 1), (0, 0, 0, 0), 40, 41, False),  # several column tiles
    ((3, 3), 3, 32, (1, 1), (1, 1), (1, 1, 1, 1), 70, 71, False),  # im2col + several column tiles
    ((2, 3), 5, 4, (1, 2), (2, 1), (2, 0, 1, 1), 10, 9, False),
    ((3, 3), 8, 8, (1, 1), (1, 1), (1, 1, 1, 1), 9, 10, True),
    ((3, 3), 6, 6, (2, 2), (1, 1), (1, 1, 1, 1), 11, 12, True),
    ((3, 3), 5, 5, (2, 2), (1, 1), (0, 1, 1, 0), 8, 9, True),
    ((5, 3), 4, 4, (1, 2), (2, 1), (2, 0, 3, 1), 13, 7, True),
    ((3, 3), 4, 4, (1, 2), (1, 1), (1, 0, 0, 1), 9, 11, True),
    ((3, 3), 3, 3, (2, 1), (2, 2), (2, 2, 2, 2), 10, 9, True),
    ((3, 3), 5, 5, (1, 1), (1, 1), (0, 0, 0, 0), 4, 3, True),
    ((3, 3), 4, 4, (3, 3), (1, 1), (1, 1, 1, 1), 13, 14, True),  # stride 3: generic phase scatter
    ((3, 3), 5, 5, (2, 2), (1, 1), (1, 1, 1, 1), 31, 30, True),  # plane runs of several 64-cell blocks
    ((3, 3), 3, 3, (2, 2), (1, 1), (1, 2, 0, 1), 9, 7, True),  # odd width, odd left pad: phase swap
    ((3, 3), 3, 6, (3, 2), (1, 1), (2, 1, 0, 2), 14, 13, False),  # im2col from stride phases 3 x 2
    ((1, 1), 4, 6, (1, 1), (1, 1), (1, 0, 0, 1), 6, 7, False),  # padded 1x1: not the direct path
    ((3, 3), 3, 32, (2, 2), (1, 1), (0, 0, 1, 1), 100, 90, False),  # several row tiles, stride 2
]


@pytest.mark.parametrize("case", CONV_CASES,
                         ids=lambda c: f"{'dw' if c[8] else 'conv'}{c[0]}c{c[1]}m{c[2]}s{c[3]}h{c[6]}")
@pytest.mark.parametrize("dts", [("uint8", "int8", "uint8"), ("int8", "int8", "int8"), ("uint8", "uint8", "int8")],
                         ids=lambda d: "".join(t[0] for t in d))
@pytest.mark.parametrize("zps", ["ends_lo", "ends_hi", "mid"])
@pytest.mark.parametrize("mult_kind", ["tie", "sat", "normal"])
def test_conv_fast_equals_numpy(case, dts, zps, mult_kind):
    k, cin, cout, strides, dil, pads, h, w_, dw = case
    x_dt, w_dt, y_dt = dts
    (xlo, xhi), (wlo, whi), (ylo, yhi) = RANGE[x_dt], RANGE[w_dt], RANGE[y_dt]
    pick = {"ends_lo": lambda lo, hi: lo, "ends_hi": lambda lo, hi: hi,
            "mid": lambda lo, hi: int(RNG.integers(lo, hi + 1))}[zps]
    zx, zy = pick(xlo, xhi), pick(ylo, yhi)
    zw = (np.zeros(cout, np.int64) if zps == "mid" and w_dt == "int8"
          else RNG.integers(wlo, whi + 1, size=cout))  # per-channel weight zero points incl. ends
    zw[0] = wlo
    w = _codes(w_dt, (cout, 1 if dw else cin) + k)
    x = _codes(x_dt, (2, cin, h, w_))
    kk = (1 if dw else cin) * k[0] * k[1]
    bias = RNG.integers(-(1 << 15), 1 << 15, size=cout)
    bias[0] = -(1 << 31)  # int32 extremes
    bias[-1] = (1 << 31) - 1
    plan = _plan("DepthwiseConv" if dw else "Conv", x_dt, w_dt, y_dt, w, zx, zw, zy, _mult(mult_kind, cout, kk),
                 bias if mult_kind != "tie" else bias // 7, strides, dil, pads, 1)
    ref = _numpy_path(plan, x)
    fast = fast_ort_conv(plan, x)
    assert fast is not None, "fast path not taken"
    assert fast.dtype == ref.dtype and fast.shape == ref.shape
    assert np.array_equal(fast, ref)


def test_conv_fast_ties_hit():
    """The tie multipliers really produce exact .5 products (else the tie test could not fail)."""
    x = _codes("uint8", (1, 4, 6, 6))
    w = _codes("int8", (3, 4, 1, 1))
    plan = _plan("Conv", "uint8", "int8", "uint8", w, 0, np.zeros(3, np.int64), 128, np.full(3, 0.5, np.float32),
                 None, (1, 1), (1, 1), (0, 0, 0, 0), 1)
    acc = np.einsum("nchw,mc->nmhw", x.astype(np.int64), w[:, :, 0, 0].astype(np.int64))
    assert np.any(acc % 2 == 1)
    assert np.array_equal(fast_ort_conv(plan, x), _numpy_path(plan, x))


def test_conv_no_bias_scalar_mult():
    x = _codes("int8", (1, 5, 7, 6))
    w = _codes("int8", (4, 5, 3, 3))
    plan = _plan("Conv", "int8", "int8", "int8", w, -3, 0, 5, 0.003, None, (1, 1), (1, 1), (1, 1, 1, 1), 1)
    fast = fast_ort_conv(plan, x)
    assert fast is not None and np.array_equal(fast, _numpy_path(plan, x))


@pytest.mark.parametrize("dw", [False, True], ids=["conv", "dw"])
def test_conv_f32_requant_rows(dw):
    """float32 bias rows are taken exactly where the bias is a float32 (2^24 + 1 is not), and a bias
    that is not a float32 changes the result if added in float32 (so the test can fail): at
    acc = 1, bias = 2^24 + 65537 is 128.5 + 2^-16 after * 2^-17 (-> 129); f32(bias) + 1 gives 128."""
    from refinterp.kernels.onnxruntime.conv_fast import _prep

    m = 6
    w = np.ones((m, 1, 1, 1), np.int8)
    x = np.arange(256, dtype=np.uint8).reshape(1, 1, 16, 16)  # acc = x: every value 0..255
    if dw:
        x = np.repeat(x, m, axis=1)
    big = (1 << 24) + 65537
    bias = np.array([big, big - 1, (1 << 24) - 1, -big, -(big - 1), 1 << 25], np.int64)
    plan = _plan("DepthwiseConv" if dw else "Conv", "uint8", "int8", "uint8", w, 0, 0, 0,
                 np.full(m, 2.0 ** -17, np.float32), bias, (1, 1), (1, 1), (0, 0, 0, 0), 1)
    kind, _, _, spec = _prep(plan, x)
    f32ok = spec[3][2] if kind == "gemm" else spec[1][15]  # the f32ok flags handed to the kernel
    assert list(f32ok) == [int(float(np.float32(b)) == b) for b in bias] == [0, 1, 1, 0, 1, 1]
    ref = _numpy_path(plan, x)
    got = fast_ort_conv(plan, x)
    assert np.array_equal(got, ref)
    assert ref[0, 0].reshape(-1)[1] == 129  # acc = 1: the exact sum rounds up, f32(bias) + 1 would not


def test_conv_multi_chunk_ignores_f32_rows():
    """K long enough for several float32 chunks: the chunk sums stay float64 even for small bias."""
    from refinterp.kernels.onnxruntime.conv_fast import _prep

    w = _codes("int8", (5, 700, 1, 1))
    x = _codes("uint8", (1, 700, 3, 4))
    plan = _plan("Conv", "uint8", "int8", "int8", w, 7, -128, 2, _mult("normal", 5, 700),
                 RNG.integers(-100, 100, size=5), (1, 1), (1, 1), (0, 0, 0, 0), 1)
    kind, _, _, spec = _prep(plan, x)
    assert kind == "gemm" and len(spec[2]) > 1  # several weight chunks
    assert np.array_equal(fast_ort_conv(plan, x), _numpy_path(plan, x))


@pytest.mark.parametrize("parts", [2, 3])
@pytest.mark.parametrize("shape", [(1, 7, 9, 10), (2, 5, 14, 14)])
def test_depthwise_split_over_threads_equals_numpy(monkeypatch, parts, shape):
    """REFINTERP_THREADS > 1: planes split into blocks over Numba's threads, same result."""
    from refinterp.kernels.onnxruntime import depthwise_fast as ort_dw

    c = shape[1]
    w = _codes("int8", (c, 1, 3, 3))
    x = _codes("uint8", shape)
    plan = _plan("DepthwiseConv", "uint8", "int8", "uint8", w, 128, 0, 3, _mult("normal", c, 9),
                 RNG.integers(-5000, 5000, size=c), (1, 1), (1, 1), (1, 1, 1, 1), 1)
    blocks = []
    real = ort_dw._dw_planes_par

    def spy(*args):
        blocks.append(args[-1])
        return real(*args)

    monkeypatch.setattr(ort_dw, "kernel_threads", lambda work: parts)
    monkeypatch.setattr(ort_dw, "_dw_planes_par", spy)
    got = fast_ort_conv(plan, x)
    assert blocks == [min(parts, shape[0] * c)]
    assert got is not None and np.array_equal(got, _numpy_path(plan, x))


@pytest.mark.parametrize("what", ["impl", "nhwc", "float_out", "grouped"])
def test_conv_not_covered_returns_none(what):
    x = _codes("uint8", (1, 4, 5, 5))
    w = _codes("int8", (4, 2 if what == "grouped" else 4, 3, 3))
    plan = _plan("Conv", "uint8", "int8", "uint8", w, 0, 0, 0, 0.01, None, (1, 1), (1, 1), (1, 1, 1, 1),
                 2 if what == "grouped" else 1)
    import dataclasses

    if what == "impl":
        plan = dataclasses.replace(plan, impl="onnx_ref_f64")
    elif what == "nhwc":
        plan = dataclasses.replace(plan, fplan=dataclasses.replace(plan.fplan, layout="NHWC"))
    elif what == "float_out":
        plan = dataclasses.replace(plan, dtype="float32")
    assert fast_ort_conv(plan, x) is None


# -- QLinearAdd (x86 FMA form) -----------------------------------------------------------------------

def _add_plan(dt: str, shift: bool, scales, zps):
    from refinterp.kernels.onnxruntime import elementwise as ew

    lo, hi = (0, 255) if shift else RANGE[dt]
    (sa, sb, sc), (za, zb, zc) = scales, zps
    return ew.BinaryPlan((np.float32(sa), za), (np.float32(sb), zb), (np.float32(sc), zc), lo, hi, dt, "fma_x86",
                         128 if shift else 0)


ADD_SCALES = [(0.02, 0.03, 0.05), (0.5, 0.25, 0.5), (0.1, 0.1, 0.001), (1.0, 1.0, 2.0), (0.0123, 0.0456, 0.0789)]


@pytest.mark.parametrize("dt,shift", [("uint8", False), ("int8", False), ("int8", True)])
@pytest.mark.parametrize("scales", ADD_SCALES)
@pytest.mark.parametrize("zps", ["lo", "hi", "mixed"])
def test_qladd_fast_equals_numpy(monkeypatch, dt, shift, scales, zps):
    from refinterp.kernels.onnxruntime import elementwise as ew

    lo, hi = (0, 255) if shift else RANGE[dt]
    z = {"lo": (lo, lo, lo), "hi": (hi, hi, hi), "mixed": (lo, hi, (lo + hi) // 2)}[zps]
    p = _add_plan(dt, shift, scales, z)
    a, b = _codes(dt, (2, 5, 7, 3)), _codes(dt, (2, 5, 7, 3))
    fast = ew.fast_ort_add(p, a, b)
    monkeypatch.setattr(ew, "_FAST", False)
    ref = ew.ort_add(p, a, b)
    assert fast is not None
    assert fast.dtype == ref.dtype and np.array_equal(fast, ref)


def test_qladd_ties_and_broadcast_fallback(monkeypatch):
    from refinterp.kernels.onnxruntime import elementwise as ew

    # sa = sb = sc / 2 with zero zero points: t = (a + b) / 2 lands on .5 for every odd sum
    p = _add_plan("uint8", False, (0.25, 0.25, 0.5), (0, 0, 0))
    a = np.arange(256, dtype=np.uint8)
    b = np.roll(a, 7)
    assert np.any((a.astype(int) + b) % 2 == 1)
    fast = ew.fast_ort_add(p, a, b)
    monkeypatch.setattr(ew, "_FAST", False)
    assert fast is not None and np.array_equal(fast, ew.ort_add(p, a, b))
    assert ew.fast_ort_add(p, a[None, :], b[:, None][:3]) is None  # broadcasting: NumPy path


# -- QuantizeLinear / DequantizeLinear ---------------------------------------------------------------

@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("zp_end", ["lo", "hi", "none"])
@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("scale", [0.5, 0.0123, 3e-8, 1e4])
def test_quantize_fast_equals_numpy(monkeypatch, dt, zp_end, scale):
    from refinterp.kernels.float import quantize as qo

    lo, hi = RANGE[dt]
    plan = qo.QuantizeLinearPlan(1, 0, (np.dtype(dt).type, lo, hi), None)
    x = (RNG.standard_normal((3, 4, 5, 6)) * 200 * scale).astype(np.float32)
    flat = x.reshape(-1)
    flat[:40] = (np.arange(40) - 20.5).astype(np.float32) * np.float32(scale)  # exact .5 ties (scale 0.5)
    flat[40:46] = [np.inf, -np.inf, np.nan, 3e38, -3e38, -0.0]
    zp = None if zp_end == "none" else np.array(lo if zp_end == "lo" else hi, dtype=dt)
    s = np.array(scale, np.float32)
    fast = qo.fast_quantize(plan, x, s, zp)
    monkeypatch.setattr(qo, "_FAST", False)
    ref = qo.quantize_linear(plan, x, s, zp)
    assert fast is not None and fast.dtype == ref.dtype and np.array_equal(fast, ref)


@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("zp_end", ["lo", "hi", "none"])
def test_dequantize_fast_equals_numpy(monkeypatch, dt, zp_end):
    from refinterp.kernels.float import quantize as qo

    lo, hi = RANGE[dt]
    plan = qo.DequantizeLinearPlan(1, 0, None)
    x = _codes(dt, (2, 3, 5, 7))
    zp = None if zp_end == "none" else np.array(lo if zp_end == "lo" else hi, dtype=dt)
    s = np.array(0.0371, np.float32)
    fast = qo.fast_dequantize(plan, x, s, zp)
    monkeypatch.setattr(qo, "_FAST", False)
    ref = qo.dequantize_linear(plan, x, s, zp)
    assert fast is not None and fast.dtype == ref.dtype and np.array_equal(fast, ref)
    assert qo.fast_dequantize(dataclasses.replace(plan, block=2), x, s, zp) is None  # blocked: the NumPy path


@pytest.mark.parametrize("dt", ["uint8", "int8"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("with_zp", [True, False])
def test_dequantize_per_axis_fast_equals_numpy(monkeypatch, dt, axis, with_zp):
    from refinterp.kernels.float import quantize as qo

    lo, hi = RANGE[dt]
    x = _codes(dt, (3, 5, 4, 2))
    c = x.shape[axis]
    s = RNG.uniform(1e-4, 2.0, c).astype(np.float32)
    zp = _codes(dt, (c,)) if with_zp else None
    if zp is not None:
        zp[0], zp[-1] = lo, hi
    plan = qo.DequantizeLinearPlan(axis, 0, None)
    fast = qo.fast_dequantize(plan, x, s, zp)
    monkeypatch.setattr(qo, "_FAST", False)
    ref = qo.dequantize_linear(plan, x, s, zp)
    assert fast is not None and fast.dtype == ref.dtype and np.array_equal(fast, ref)


# -- QLinearMatMul / QGemm with a constant B -----------------------------------------------------------

def _gemm_plan(kind, a_dt, w_dt, y_dt, w, za, zw, zy, mult, bias, trans_b):
    lo, hi = RANGE[y_dt]
    zw = np.asarray(zw, np.int64)
    zw_b = zw.reshape(-1, 1) if (trans_b and zw.size > 1) else (zw.reshape(1, -1) if zw.size > 1 else zw)
    return ort_gemm.QGemmPlan("n", kind, ort_gemm.GemmTranspose(0, int(trans_b)), int(za), zw_b,
                              w.astype(np.float64) - zw_b, w, None if bias is None else np.asarray(bias, np.int64),
                              np.asarray(mult, np.float32).reshape(-1), int(zy), lo, hi, y_dt, "mlas_f32", -1)


@pytest.mark.parametrize("kind,trans_b", [("MatMul", False), ("Gemm", True), ("Gemm", False)])
@pytest.mark.parametrize("dts", [("uint8", "int8", "uint8"), ("int8", "int8", "int8"), ("uint8", "uint8", "int8")],
                         ids=lambda d: "".join(t[0] for t in d))
@pytest.mark.parametrize("zps", ["ends_lo", "ends_hi"])
@pytest.mark.parametrize("mult_kind", ["tie", "sat", "normal"])
@pytest.mark.parametrize("k", [7, 1280])
def test_gemm_fast_equals_numpy(monkeypatch, kind, trans_b, dts, zps, mult_kind, k):
    a_dt, w_dt, y_dt = dts
    (alo, ahi), (wlo, whi), (ylo, yhi) = RANGE[a_dt], RANGE[w_dt], RANGE[y_dt]
    za, zy = (alo, ylo) if zps == "ends_lo" else (ahi, yhi)
    n = 11
    zw = RNG.integers(wlo, whi + 1, size=n)
    zw[0] = whi if zps == "ends_hi" else wlo
    w = _codes(w_dt, (n, k) if trans_b else (k, n))
    a = _codes(a_dt, (2, 3, k) if kind == "MatMul" else (3, k))
    if k == 7:  # more rows than the integer mat-vec path takes: the float32 GEMM path
        a = _codes(a_dt, (3, 5, k) if kind == "MatMul" else (13, k))
    bias = RNG.integers(-(1 << 20), 1 << 20, size=n) if kind == "Gemm" else None
    plan = _gemm_plan(kind, a_dt, w_dt, y_dt, w, za, zw, zy, _mult(mult_kind, n, k), bias, trans_b)
    fast = fast_ort_gemm(plan, a)
    monkeypatch.setattr(ort_gemm, "_FAST", False)
    ref = ort_gemm.ort_matmul(plan, a, w) if kind == "MatMul" else ort_gemm.ort_gemm(plan, a, w)
    assert fast is not None, "fast path not taken"
    assert fast.dtype == ref.dtype and fast.shape == ref.shape and np.array_equal(fast, ref)


def test_gemm_row_bias_not_covered():
    w = _codes("int8", (5, 4))
    plan = _gemm_plan("Gemm", "uint8", "int8", "uint8", w, 0, 0, 0, 0.01, np.ones((3, 4), np.int64), False)
    assert fast_ort_gemm(plan, _codes("uint8", (3, 5))) is None  # (M, N) C: the NumPy path


# -- whole models: every tensor equal with and without the fast paths ----------------------------------

@pytest.mark.parametrize("name", ["small_cnn_qdq_s8s8.onnx", "small_cnn_qop_u8s8.onnx"])
def test_models_every_tensor_fast_equals_numpy(monkeypatch, name):
    from pathlib import Path

    import refinterp
    from refinterp.kernels.onnxruntime import elementwise as ort_elementwise
    from refinterp.kernels.float import quantize as quantize_ops

    path = Path(__file__).resolve().parents[3] / "fixtures" / "onnx" / name
    g = refinterp.load(str(path))
    rng = np.random.default_rng(3)
    feeds = {n: rng.uniform(-1.0, 1.0, [d if isinstance(d, int) and d > 0 else 1 for d in g.tensors[n].shape])
             .astype(np.float32) for n in g.inputs}
    fast = refinterp.Session(g, "onnxruntime-cpu").run(feeds, capture="all")
    for mod in (ort_gemm, ort_elementwise, quantize_ops):
        monkeypatch.setattr(mod, "_FAST", False)
    ref = refinterp.Session(g, "onnxruntime-cpu").run(feeds, capture="all")
    assert fast.keys() == ref.keys()
    for k in ref:
        assert fast[k].dtype == ref[k].dtype and np.array_equal(fast[k], ref[k]), k
