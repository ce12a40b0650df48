"""QuantizeLinear / DequantizeLinear against onnx.reference (exact), TFLite Quantize / Dequantize
against LiteRT (exact on integers)."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_same, onnx_ref, run_kernel
from refinterp.ir import QuantParams

RNG = np.random.default_rng(11)

# Values that land exactly on .5 ties for scale 0.5 / 0.25, plus saturation.
TIES = np.array([0.25, 0.75, -0.25, -0.75, 1.25, -1.25, 0.0, 1000.0, -1000.0, 3.3, -3.3, 0.125],
                np.float32)


def _x(shape):
    return RNG.uniform(-40, 40, shape).astype(np.float32)


def _ref_int(v):
    """onnx.reference returns ml_dtypes int4/uint4 arrays; compare their integer values."""
    v = np.asarray(v)
    if v.dtype.kind not in "iuf" or v.dtype.name in ("int4", "uint4"):
        return v.astype(np.int8 if "u" not in v.dtype.name else np.uint8)
    return v


@pytest.mark.parametrize("zp_dtype,zp", [(np.uint8, 128), (np.int8, -3), (np.int16, 100), (np.uint16, 30000),
                                         (np.uint8, 0), (np.int8, 127)])
@pytest.mark.parametrize("scale", [0.5, 0.25, 0.0137])
def test_quantize_linear_per_tensor(zp_dtype, zp, scale):
    x = np.concatenate([TIES, _x((40,))])
    ins = [x, np.array(scale, np.float32), np.array(zp, zp_dtype)]
    want = onnx_ref("QuantizeLinear", ins)[0]
    for c in (True, False):
        assert_same(run_kernel("QuantizeLinear", ins, const=c)[0], want)


def test_quantize_linear_no_zero_point_defaults_to_uint8():
    x = np.concatenate([TIES, _x((10,))])
    ins = [x, np.array(0.5, np.float32)]
    assert_same(run_kernel("QuantizeLinear", ins)[0], onnx_ref("QuantizeLinear", ins)[0])


@pytest.mark.parametrize("code,np_dt", [(3, np.int8), (5, np.int16), (4, np.uint16)])
def test_quantize_linear_output_dtype_attr(code, np_dt):
    x = _x((3, 5))
    ins = [x, np.array(0.1, np.float32)]
    want = onnx_ref("QuantizeLinear", ins, {"output_dtype": code})[0]
    got = run_kernel("QuantizeLinear", ins, {"output_dtype": code})[0]
    assert got.dtype == np_dt
    assert_same(got, want)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_quantize_dequantize_per_axis(axis):
    x = _x((3, 4, 5))
    n = x.shape[axis]
    scale = RNG.uniform(0.05, 0.5, n).astype(np.float32)
    zp = RNG.integers(-10, 10, n).astype(np.int8)
    ins = [x, scale, zp]
    q = onnx_ref("QuantizeLinear", ins, {"axis": axis})[0]
    assert_same(run_kernel("QuantizeLinear", ins, {"axis": axis})[0], q)
    dq = onnx_ref("DequantizeLinear", [q, scale, zp], {"axis": axis})[0]
    assert_same(run_kernel("DequantizeLinear", [q, scale, zp], {"axis": axis})[0], dq, rtol=0, atol=0)


@pytest.mark.parametrize("block", [2, 3, 4])
def test_quantize_dequantize_blocked(block):
    x = _x((4, 7))  # 7 is not a multiple of 2 or 4: partial last block
    nb = -(-7 // block)
    scale = RNG.uniform(0.05, 0.5, (4, nb)).astype(np.float32)
    zp = RNG.integers(-5, 5, (4, nb)).astype(np.int8)
    attrs = {"axis": 1, "block_size": block}
    q = onnx_ref("QuantizeLinear", [x, scale, zp], attrs)[0]
    assert_same(run_kernel("QuantizeLinear", [x, scale, zp], attrs)[0], q)
    dq = onnx_ref("DequantizeLinear", [q, scale, zp], attrs)[0]
    assert_same(run_kernel("DequantizeLinear", [q, scale, zp], attrs)[0], dq, rtol=0, atol=0)


@pytest.mark.parametrize("kind", ["int4", "uint4"])
def test_quantize_linear_int4(kind):
    import onnx
    code = onnx.TensorProto.INT4 if kind == "int4" else onnx.TensorProto.UINT4
    x = np.concatenate([TIES, _x((20,)) / 8])
    ins = [x, np.array(0.5, np.float32)]
    want = _ref_int(onnx_ref("QuantizeLinear", ins, {"output_dtype": code})[0])
    got = run_kernel("QuantizeLinear", ins, {"output_dtype": code})[0]
    assert_same(got, want)
    # Loader form: zero point stored in int8/uint8 with the TensorInfo dtype naming the 4-bit type.
    zp = np.array(1, np.int8 if kind == "int4" else np.uint8)
    got = run_kernel("QuantizeLinear", [x, ins[1], zp], in_dtypes=[None, None, kind], out_dtype=kind)[0]
    want = _ref_int(onnx_ref("QuantizeLinear", ins + [np.array(1, dtype=_ml(kind))])[0])
    assert_same(got, want)


def _ml(kind):
    import ml_dtypes
    return getattr(ml_dtypes, kind)


def test_quantize_linear_float16_input():
    x = np.concatenate([TIES, _x((20,))]).astype(np.float16)
    ins = [x, np.array(0.25, np.float16), np.array(3, np.int8)]
    assert_same(run_kernel("QuantizeLinear", ins)[0], onnx_ref("QuantizeLinear", ins)[0])


@pytest.mark.parametrize("dtype,zp", [(np.int8, -5), (np.uint8, 131), (np.int16, -300), (np.uint16, 40000),
                                      (np.int32, 0)])
def test_dequantize_linear_per_tensor(dtype, zp):
    info = np.iinfo(dtype)
    q = RNG.integers(info.min, info.max, (4, 9), endpoint=True).astype(dtype)
    ins = [q, np.array(0.0371, np.float32), np.array(zp, dtype)]
    if dtype == np.int32:
        ins = ins[:2]
    want = onnx_ref("DequantizeLinear", ins)[0]
    for c in (True, False):
        assert_same(run_kernel("DequantizeLinear", ins, const=c)[0], want, rtol=0, atol=0)


def test_dequantize_linear_output_dtype_and_float16_scale():
    q = RNG.integers(-128, 127, (3, 4)).astype(np.int8)
    ins = [q, np.array(0.1, np.float16), np.array(2, np.int8)]
    assert_same(run_kernel("DequantizeLinear", ins)[0], onnx_ref("DequantizeLinear", ins)[0], rtol=0, atol=0)
    ins = [q, np.array(0.1, np.float32), np.array(2, np.int8)]
    want = onnx_ref("DequantizeLinear", ins, {"output_dtype": 10})[0]
    assert_same(run_kernel("DequantizeLinear", ins, {"output_dtype": 10})[0], want, rtol=0, atol=0)


def test_dequantize_linear_int4_values():
    q = np.arange(-8, 8, dtype=np.int8)
    scale = np.array(0.3, np.float32)
    want = onnx_ref("DequantizeLinear", [q.astype(_ml("int4")), scale, np.array(-2, _ml("int4"))])[0]
    got = run_kernel("DequantizeLinear", [q, scale, np.array(-2, np.int8)], in_dtypes=["int4", None, "int4"])[0]
    assert_same(got, want, rtol=0, atol=0)


# -- TFLite QUANTIZE / DEQUANTIZE against LiteRT ------------------------------------------------

def _litert(op, x, in_spec, out_spec, resolver="ref"):
    """LiteRT reference kernels (BUILTIN_REF, in a subprocess: they may abort)."""
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert_subprocess
    from tests.tflite_builder import TFLiteBuilder

    b = TFLiteBuilder()
    i = b.tensor("x", list(x.shape), *in_spec[:1], **in_spec[1])
    o = b.tensor("y", list(x.shape), *out_spec[:1], **out_spec[1])
    b.op(op, [i], [o])
    return run_litert_subprocess(b.build([i], [o]), {"x": x}, resolver=resolver, preserve_all=False)["y"]


@pytest.mark.parametrize("dtype,scale,zp", [("int8", 0.5, -1), ("int8", 0.0371, 10), ("uint8", 0.25, 128),
                                            ("int16", 0.001, 0)])
def test_tflite_quantize_float_to_int_vs_litert(dtype, scale, zp):
    x = np.concatenate([TIES, _x((52,))]).reshape(8, 8)
    want = _litert("QUANTIZE", x, ("float32", {}), (dtype, {"scale": scale, "zero_point": zp}))
    q = QuantParams(np.float32(scale), np.int64(zp))
    got = run_kernel("Quantize", [x], out_dtype=dtype, out_quant=q)[0]
    assert_same(got, want)


def test_tflite_quantize_half_away_from_zero():
    x = np.array([0.25, -0.25, 0.75, -0.75], np.float32)
    q = QuantParams(np.float32(0.5), np.int64(0))
    np.testing.assert_array_equal(run_kernel("Quantize", [x], out_dtype="int8", out_quant=q)[0], [1, -1, 2, -2])


def test_tflite_quantize_int_to_int_float_variant_is_dequant_requant():
    x = np.arange(-128, 128, dtype=np.int8)
    qi = QuantParams(np.float32(0.1), np.int64(3))
    qo = QuantParams(np.float32(0.25), np.int64(-7))
    got = run_kernel("Quantize", [x], out_dtype="int8", out_quant=qo, in_quant=[qi])[0]
    real = ((x.astype(np.int64) - 3).astype(np.float32) * np.float32(0.1)).astype(np.float32)
    v = real / np.float32(0.25)
    want = np.clip(np.sign(v) * np.floor(np.abs(v) + 0.5) - 7, -128, 127).astype(np.int8)
    assert_same(got, want)


@pytest.mark.parametrize("dtype,scale,zp", [("int8", 0.0371, -5), ("uint8", 0.5, 128), ("int16", 0.0003, 0)])
def test_tflite_dequantize_vs_litert(dtype, scale, zp):
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (4, 16), endpoint=True).astype(dtype)
    want = _litert("DEQUANTIZE", x, (dtype, {"scale": scale, "zero_point": zp}), ("float32", {}))
    q = QuantParams(np.float32(scale), np.int64(zp))
    got = run_kernel("Dequantize", [x], in_quant=[q], out_dtype="float32")[0]
    assert_same(got, want, rtol=0, atol=0)


def test_tflite_dequantize_float16_vs_litert():
    x = RNG.uniform(-100, 100, (3, 5)).astype(np.float16)
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert
    from tests.tflite_builder import TFLiteBuilder

    b = TFLiteBuilder()
    c = b.const("w", x)
    o = b.tensor("y", [3, 5], "float32")
    b.op("DEQUANTIZE", [c], [o])
    want = run_litert(b.build([], [o]), {}, preserve_all=False)["y"]
    assert_same(run_kernel("Dequantize", [x], out_dtype="float32")[0], want, rtol=0, atol=0)


def test_tflite_dequantize_per_channel():
    x = RNG.integers(-128, 127, (3, 4)).astype(np.int8)
    q = QuantParams(np.array([0.1, 0.2, 0.3, 0.4], np.float32), np.zeros(4, np.int64), axis=1)
    got = run_kernel("Dequantize", [x], in_quant=[q], out_dtype="float32")[0]
    want = (q.scale.astype(np.float64)[None, :] * x.astype(np.int64)).astype(np.float32)
    assert_same(got, want, rtol=0, atol=0)
