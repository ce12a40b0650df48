"""refinterp.loaders.tflite: tensors, quantization, op mapping and malformed-file handling."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")  # the model builder uses LiteRT's schema module

import refinterp  # noqa: E402
from refinterp.errors import ModelError, UnsupportedOpError  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402


def _conv_model(**build_kw) -> tuple[bytes, np.ndarray]:
    rng = np.random.default_rng(1)
    w_val = rng.integers(-127, 128, (4, 3, 3, 3)).astype(np.int8)
    b = TFLiteBuilder()
    x = b.tensor("x", [1, 8, 8, 3], "int8", scale=0.05, zero_point=-3)
    w = b.const("w", w_val, scale=[0.01, 0.02, 0.03, 0.04], zero_point=0, axis=0)
    bias = b.const("b", np.arange(4, dtype=np.int32), scale=[5e-4, 1e-3, 1.5e-3, 2e-3], zero_point=0, axis=0)
    y = b.tensor("y", [1, 4, 4, 4], "int8", scale=0.1, zero_point=5)
    b.op("CONV_2D", [x, w, bias], [y], dict(padding="SAME", stride_w=2, stride_h=2, fused_activation="RELU6"),
         version=3)
    return b.build([x], [y], **build_kw), w_val


def _load(tmp_path, data: bytes, name: str = "m.tflite"):
    p = tmp_path / name
    p.write_bytes(data)
    return refinterp.load(p)


def test_per_channel_conv_loaded(tmp_path):
    data, w_val = _conv_model()
    g = _load(tmp_path, data)
    assert g.format == "tflite" and g.inputs == ["x"] and g.outputs == ["y"]
    w = g.tensors["w"]
    assert w.dtype == "int8" and w.shape == (4, 3, 3, 3) and w.layout is None
    np.testing.assert_array_equal(w.const, w_val)
    assert w.quant.axis == 0
    np.testing.assert_array_equal(w.quant.scale, np.float32([0.01, 0.02, 0.03, 0.04]))
    np.testing.assert_array_equal(w.quant.zero_point, [0, 0, 0, 0])
    x = g.tensors["x"]
    assert x.quant.per_tensor and x.quant.zero_point[0] == -3 and x.layout == "NHWC" and x.const is None
    assert x.quant.scale[0] == np.float32(0.05)
    (n,) = g.nodes
    assert (n.op, n.source_op, n.inputs, n.outputs) == ("Conv", "CONV_2D", ["x", "w", "b"], ["y"])
    assert n.attrs["strides"] == [2, 2] and n.attrs["auto_pad"] == "SAME_UPPER"
    assert n.attrs["activation"] == "RELU6" and n.attrs["layout"] == "NHWC"
    assert n.attrs["weight_layout"] == "OHWI" and n.attrs["group"] == 1 and n.attrs["kernel_shape"] == [3, 3]
    assert n.attrs["op_version"] == 3


def test_external_buffers_match_inline(tmp_path):
    inline, w_val = _conv_model()
    external, _ = _conv_model(external_buffers=True)
    assert len(external) > len(inline)
    g = _load(tmp_path, external)
    np.testing.assert_array_equal(g.tensors["w"].const, w_val)
    np.testing.assert_array_equal(g.tensors["b"].const, np.arange(4))


def test_external_buffer_outside_file(tmp_path):
    external, _ = _conv_model(external_buffers=True)
    with pytest.raises(ModelError, match="outside the file"):
        _load(tmp_path, external[:-40])


def test_duplicate_tensor_names(tmp_path):
    b = TFLiteBuilder()
    x = b.tensor("t", [2, 3])
    h = b.tensor("t", [2, 3])
    y = b.tensor("t", [2, 3])
    b.op("RELU", [x], [h])
    b.op("TANH", [h], [y])
    g = _load(tmp_path, b.build([x], [y]))
    assert list(g.tensors) == ["t", "t:1", "t:2"]
    assert all(t.source_name == "t" for t in g.tensors.values())
    assert [t.index for t in g.tensors.values()] == [0, 1, 2]
    assert g.inputs == ["t"] and g.outputs == ["t:2"]
    assert [(n.inputs, n.outputs) for n in g.nodes] == [(["t"], ["t:1"]), (["t:1"], ["t:2"])]


def test_float16_and_int4_constants(tmp_path):
    w16 = np.array([[0.5, -1.25], [3.0, 1e-3]], np.float16)
    w4 = np.array([[-8, 7, 3], [0, -1, 5]], np.int8)
    b = TFLiteBuilder()
    c16 = b.const("w16", w16)
    c4 = b.const("w4", w4, dtype="int4", scale=0.5, zero_point=0)
    o16 = b.tensor("o16", [2, 2])
    o4 = b.tensor("o4", [2, 3])
    b.op("DEQUANTIZE", [c16], [o16])
    b.op("DEQUANTIZE", [c4], [o4])
    g = _load(tmp_path, b.build([], [o16, o4]))
    assert g.tensors["w16"].dtype == "float16"
    np.testing.assert_array_equal(g.tensors["w16"].const, w16)
    assert g.tensors["w4"].dtype == "int8" and g.metadata["int4_tensors"] == ["w4"]
    np.testing.assert_array_equal(g.tensors["w4"].const, w4)
    assert [n.op for n in g.nodes] == ["Dequantize", "Dequantize"]


def test_shape_signature_dynamic_dims(tmp_path):
    b = TFLiteBuilder()
    x = b.tensor("x", [1, 4], shape_signature=[-1, 4])
    y = b.tensor("y", [1, 4], shape_signature=[-1, 4])
    b.op("RELU", [x], [y])
    g = _load(tmp_path, b.build([x], [y]))
    assert g.tensors["x"].shape == (None, 4)


def test_custom_and_unknown_ops(tmp_path):
    b = TFLiteBuilder()
    x = b.tensor("x", [4])
    h = b.tensor("h", [4])
    y = b.tensor("y", [4])
    b.op("CUSTOM:MyFancyOp", [x], [h], custom_options=b"\x01\x02")
    b.op("MATRIX_DIAG", [h], [y])
    g = _load(tmp_path, b.build([x], [y]))
    assert [n.op for n in g.nodes] == ["Custom:MyFancyOp", "TFLite:MATRIX_DIAG"]
    with pytest.raises(UnsupportedOpError, match="Custom:MyFancyOp"):
        refinterp.Session(g, scheme="float32")


def test_option_decoding_and_input_rewrites(tmp_path):
    b = TFLiteBuilder()
    x = b.tensor("x", [1, 9, 9, 4])
    w = b.const("w", np.zeros((1, 3, 3, 8), np.float32))
    bias = b.const("bias", np.zeros(8, np.float32))
    d = b.tensor("d", [1, 5, 5, 8])
    b.op("DEPTHWISE_CONV_2D", [x, w, bias], [d], dict(padding="VALID", dilation_h=2, dilation_w=3,
                                                      fused_activation="RELU_N1_TO_1"))
    p = b.tensor("p", [1, 6, 8, 8])
    b.op("PAD", [d, b.const("paddings", np.array([[0, 0], [1, 0], [0, 3], [0, 0]], np.int32))], [p])
    s = b.tensor("s", [1, 3, 4, 8])
    b.op("STRIDED_SLICE", [p, b.const("bg", np.array([0, 0, 0, 0], np.int32)),
                           b.const("en", np.array([1, 6, 8, 8], np.int32)),
                           b.const("st", np.array([1, 2, 2, 1], np.int32))], [s],
         dict(begin_mask=9, end_mask=6, shrink_axis_mask=0))
    r = b.tensor("r", [1, 7, 5, 8])
    b.op("RESIZE_NEAREST_NEIGHBOR", [s, b.const("size", np.array([7, 5], np.int32))], [r],
         dict(half_pixel_centers=True), version=3)
    shape = b.const("oshape", np.array([1, 14, 10, 2], np.int32))
    wt = b.const("wt", np.zeros((2, 3, 3, 8), np.float32))
    t = b.tensor("t", [1, 14, 10, 2])
    b.op("TRANSPOSE_CONV", [shape, wt, r], [t], dict(padding="SAME", stride_h=2, stride_w=2))
    g = _load(tmp_path, b.build([x], [t]))
    dw, pad, ss, rs, tc = g.nodes
    assert dw.op == "DepthwiseConv" and dw.attrs["dilations"] == [2, 3] and dw.attrs["auto_pad"] == "VALID"
    assert dw.attrs["depth_multiplier"] == 2 and dw.attrs["group"] == 4 and dw.attrs["weight_layout"] == "1HWO"
    assert dw.attrs["activation"] == "RELU_N1_TO_1"
    assert pad.op == "Pad" and pad.inputs[0] == "d"
    np.testing.assert_array_equal(g.const(pad.inputs[1]), [0, 1, 0, 0, 0, 0, 3, 0])
    assert ss.op == "StridedSlice" and ss.attrs["begin_mask"] == 9 and ss.attrs["end_mask"] == 6
    assert rs.op == "Resize" and rs.inputs == ["s", "", "", "size"] and rs.attrs["mode"] == "nearest"
    assert rs.attrs["coordinate_transformation_mode"] == "tf_half_pixel_for_nn"
    assert rs.attrs["nearest_mode"] == "floor" and rs.attrs["axes"] == [1, 2]
    assert tc.op == "ConvTranspose" and tc.inputs == ["r", "wt", ""] and tc.attrs["output_shape"] == [14, 10]
    assert tc.attrs["strides"] == [2, 2] and tc.attrs["auto_pad"] == "SAME_UPPER"


# -- malformed files --------------------------------------------------------------------------------
def test_empty_file(tmp_path):
    with pytest.raises(ModelError, match="m.tflite"):
        _load(tmp_path, b"")


def test_not_a_model(tmp_path):
    with pytest.raises(ModelError, match="not a TFLite model"):
        _load(tmp_path, b"hello, this is a text file and not a flatbuffer at all\n")


def test_wrong_identifier_direct_call(tmp_path):
    from refinterp.loaders.tflite import load_tflite

    p = tmp_path / "x.bin"
    p.write_bytes(b"\x10\x00\x00\x00ONNX" + b"\x00" * 64)
    with pytest.raises(ModelError, match="x.bin"):
        load_tflite(p)


@pytest.mark.parametrize("keep", [8, 12, 40, 0.5, 0.9])
def test_truncated_file(tmp_path, keep):
    data, _ = _conv_model()
    n = keep if isinstance(keep, int) else int(len(data) * keep)
    with pytest.raises(ModelError) as e:
        _load(tmp_path, data[:n])
    assert "m.tflite" in str(e.value) and "\n" not in str(e.value)


def test_bit_flips_never_escape_as_other_errors(tmp_path):
    data, _ = _conv_model()
    rng = np.random.default_rng(7)
    outcomes = {"ok": 0, "error": 0}
    for k in range(150):
        buf = bytearray(data)
        for pos in rng.integers(8, len(buf), size=1 + k % 4):  # keep the root offset / identifier
            buf[pos] ^= 1 << int(rng.integers(0, 8))
        try:
            _load(tmp_path, bytes(buf))
            outcomes["ok"] += 1
        except ModelError as e:
            assert "\n" not in str(e)
            outcomes["error"] += 1
    assert outcomes["error"] > 0


def _tamper(mutate) -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", [2, 3])
    c = b.const("c", np.ones((2, 3), np.float32))
    y = b.tensor("y", [2, 3])
    b.op("ADD", [x, c], [y])
    mutate(b)
    return b.build([x], [y])


@pytest.mark.parametrize("what,mutate,match", [
    ("buffer", lambda b: setattr(b.tensors[1], "buffer", 99), "buffer 99"),
    ("tensor", lambda b: b.operators[0].inputs.__setitem__(1, 42), "tensor index 42"),
    ("opcode", lambda b: setattr(b.operators[0], "opcodeIndex", 5), "opcode 5"),
    ("shape", lambda b: setattr(b.tensors[0], "shape", [2, -3]), "invalid shape"),
    ("absurd", lambda b: setattr(b.tensors[0], "shape", [1 << 30, 1 << 30, 1 << 30]), "absurd shape"),
    ("bufsize", lambda b: setattr(b.tensors[1], "shape", [2, 4]), "needs 32"),
    ("scales", lambda b: setattr(b.tensors[1], "quantization", b._quant([1.0, 2.0, 3.0], 0, 0)),
     "per-channel scales"),
])
def test_invalid_indices_and_shapes(tmp_path, what, mutate, match):
    with pytest.raises(ModelError, match=match):
        _load(tmp_path, _tamper(mutate))
