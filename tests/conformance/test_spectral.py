"""Audio front ends inside models, float32 under every scheme, vs the runtimes within float tolerance:
TFLite RFFT2D -> COMPLEX_ABS (YAMNet-style spectrogram; REAL / IMAG) vs LiteRT, ONNX DFT / STFT with a
Hann window vs ONNX Runtime.  (ONNX's own DFT / STFT / window / MelWeightMatrix node cases run in
test_onnx_node_cases.py.)"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from tests.conformance.litert_oracle import run_litert  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

SCHEMES_TFLITE = ("float32", "tflite-reference", "tflite-optimized", "tflite-xnnpack")


@pytest.mark.parametrize("frames,length,fft", [(4, 400, (1, 512)), (3, 64, (1, 64)), (5, 100, (1, 128)),
                                                (6, 32, (4, 32))])
@pytest.mark.parametrize("tail", ["COMPLEX_ABS", "REAL", "IMAG"])
def test_tflite_rfft2d(frames, length, fft, tail, tmp_path):
    b = TFLiteBuilder()
    x = b.tensor("x", (frames, 1, length) if fft[0] == 1 else (1, frames, length), "float32")
    n = b.const("fft_length", np.array(fft, np.int32))
    out_shape = (frames, 1, fft[1] // 2 + 1) if fft[0] == 1 else (1, fft[0], fft[1] // 2 + 1)
    spec = b.tensor("spec", out_shape, "complex64")
    y = b.tensor("y", out_shape, "float32")
    b.op("RFFT2D", [x, n], [spec])
    b.op(tail, [spec], [y])
    model = b.build([x], [y])
    shape = (frames, 1, length) if fft[0] == 1 else (1, frames, length)
    xv = np.random.default_rng(frames).standard_normal(shape).astype(np.float32)
    want = run_litert(model, {"x": xv}, "opt")
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    g = refinterp.load(str(p))
    for scheme in SCHEMES_TFLITE:
        got = refinterp.Session(g, scheme).run({"x": xv}, capture="all")
        for name in ("spec", "y"):
            np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-4, err_msg=f"{scheme} {name}")
            assert got[name].dtype == want[name].dtype


def _ort(m, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in s.get_outputs()], s.run(None, feeds)))


@pytest.mark.parametrize("onesided", [0, 1])
def test_onnx_stft_with_hann_window(onesided, tmp_path):
    nodes = [helper.make_node("HannWindow", ["wlen"], ["win"]),
             helper.make_node("STFT", ["sig", "step", "win"], ["spec"], onesided=onesided),
             helper.make_node("ReduceSumSquare", ["spec", "last"], ["power"], keepdims=0)]
    g = helper.make_graph(nodes, "stft", [helper.make_tensor_value_info("sig", TensorProto.FLOAT, [2, 1600, 1])],
                          [helper.make_tensor_value_info("spec", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("power", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array(400, np.int64), "wlen"),
                           numpy_helper.from_array(np.array(160, np.int64), "step"),
                           numpy_helper.from_array(np.array([-1], np.int64), "last")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    x = np.random.default_rng(1).standard_normal((2, 1600, 1)).astype(np.float32)
    want = _ort(m, {"sig": x})
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    for scheme in ("float32", "onnxruntime-cpu", "onnx-reference"):
        got = refinterp.Session(refinterp.load(str(p)), scheme).run({"sig": x})
        for k, v in want.items():  # ORT's float32 DFT of 400 points is itself ~1e-4 of the peak off
            np.testing.assert_allclose(got[k], v, rtol=1e-4, atol=2e-4 * float(np.max(np.abs(v))),
                                       err_msg=f"{scheme} {k}")


@pytest.mark.parametrize("inverse,onesided", [(0, 0), (0, 1), (1, 0)])
def test_onnx_dft_opset20_axis_input(inverse, onesided, tmp_path):
    nodes = [helper.make_node("DFT", ["x", "", "axis"], ["y"], inverse=inverse, onesided=onesided)]
    pairs = 1 if onesided else 2  # ORT takes a one-sided DFT of real signals only
    g = helper.make_graph(nodes, "dft", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 50, pairs])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array(1, np.int64), "axis")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    m.ir_version = 9
    x = np.random.default_rng(2).standard_normal((3, 50, pairs)).astype(np.float32)
    want = _ort(m, {"x": x})
    p = tmp_path / "m.onnx"
    onnx.save(m, str(p))
    got = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run({"x": x})
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-4, atol=1e-4)
