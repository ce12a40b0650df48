"""Float Conv / DepthwiseConv / ConvTranspose against onnx.reference, onnxruntime and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_close, onnx_reference, onnx_runtime, rng
from kernel_harness import run_float as run_kernel

CONV_CASES = [
    # id, x shape, w shape, attrs
    ("2d-basic", (1, 3, 7, 6), (4, 3, 3, 3), {}),
    ("2d-pads-strides", (2, 3, 9, 8), (5, 3, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 3]}),
    ("2d-dilation", (1, 2, 10, 9), (3, 2, 3, 3), {"dilations": [2, 3], "pads": [1, 1, 1, 1]}),
    ("2d-same-upper", (1, 3, 8, 7), (4, 3, 3, 4), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("2d-same-lower", (1, 3, 8, 7), (4, 3, 4, 3), {"auto_pad": "SAME_LOWER", "strides": [2, 3]}),
    ("2d-valid", (1, 3, 8, 7), (4, 3, 3, 3), {"auto_pad": "VALID", "strides": [2, 2]}),
    ("2d-group2", (1, 4, 6, 6), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    ("2d-depthwise-group", (1, 3, 6, 5), (6, 1, 3, 3), {"group": 3, "pads": [1, 1, 1, 1]}),
    ("2d-group16", (1, 32, 5, 5), (48, 2, 3, 3), {"group": 16, "pads": [1, 1, 1, 1]}),
    ("1d", (2, 3, 11), (4, 3, 3), {"pads": [1, 2], "strides": [2], "dilations": [2]}),
    ("3d", (1, 2, 5, 6, 4), (3, 2, 2, 3, 2), {"pads": [0, 1, 0, 1, 1, 1], "strides": [1, 2, 1]}),
    ("1x1", (1, 8, 4, 4), (5, 8, 1, 1), {}),
]


@pytest.mark.parametrize("cid,xs,ws,attrs", CONV_CASES, ids=[c[0] for c in CONV_CASES])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "nobias"])
def test_conv_matches_onnx_reference(cid, xs, ws, attrs, with_bias):
    r = rng(1)
    x = r.standard_normal(xs).astype(np.float32)
    w = r.standard_normal(ws).astype(np.float32)
    b = r.standard_normal(ws[0]).astype(np.float32) if with_bias else None
    ins = [x, w] + ([b] if with_bias else [])
    want = onnx_reference("Conv", ins, attrs)[0]
    got = run_kernel("Conv", ins, attrs)[0]
    assert_close(got, want)


@pytest.mark.parametrize("cid,xs,ws,attrs", CONV_CASES[:8], ids=[c[0] for c in CONV_CASES[:8]])
def test_conv_nhwc_ohwi_equals_nchw(cid, xs, ws, attrs):
    r = rng(2)
    x = r.standard_normal(xs).astype(np.float32)
    w = r.standard_normal(ws).astype(np.float32)
    b = r.standard_normal(ws[0]).astype(np.float32)
    want = onnx_runtime("Conv", [x, w, b], attrs)[0]
    got = run_kernel("Conv", [x.transpose(0, 2, 3, 1), w.transpose(0, 2, 3, 1), b],
                     dict(attrs, layout="NHWC", weight_layout="OHWI"))[0]
    assert_close(got.transpose(0, 3, 1, 2), want)


def test_conv_float64_and_float16_keep_dtype():
    r = rng(3)
    x = r.standard_normal((1, 2, 5, 5))
    w = r.standard_normal((3, 2, 3, 3))
    got = run_kernel("Conv", [x, w], {"pads": [1, 1, 1, 1]})[0]
    assert_close(got, onnx_reference("Conv", [x, w], {"pads": [1, 1, 1, 1]})[0], rtol=1e-10, atol=1e-12)
    x16, w16 = x.astype(np.float16), w.astype(np.float16)
    got16 = run_kernel("Conv", [x16, w16], {})[0]
    assert got16.dtype == np.float16
    want16 = onnx_runtime("Conv", [x16, w16], {})[0]
    assert_close(got16, want16, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("mult", [1, 2])
@pytest.mark.parametrize("attrs", [{"pads": [1, 1, 1, 1]}, {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
                                   {"dilations": [2, 2], "pads": [2, 2, 2, 2]}], ids=["pad", "same-s2", "dil"])
def test_depthwise_both_weight_layouts(mult, attrs):
    r = rng(4)
    c = 3
    x = r.standard_normal((1, c, 7, 8)).astype(np.float32)
    w = r.standard_normal((c * mult, 1, 3, 3)).astype(np.float32)  # ONNX group conv weights
    b = r.standard_normal(c * mult).astype(np.float32)
    want = onnx_reference("Conv", [x, w, b], dict(attrs, group=c))[0]
    got = run_kernel("DepthwiseConv", [x, w, b], dict(attrs, group=c, depth_multiplier=mult,
                                                         weight_layout="OIHW"))[0]
    assert_close(got, want)
    w_1hwo = w[:, 0].transpose(1, 2, 0)[None]  # (1, kh, kw, C*M)
    got = run_kernel("DepthwiseConv", [x.transpose(0, 2, 3, 1), w_1hwo, b],
                     dict(attrs, group=c, depth_multiplier=mult, layout="NHWC", weight_layout="1HWO"))[0]
    assert_close(got.transpose(0, 3, 1, 2), want)


CT_CASES = [
    ("basic", (1, 2, 4, 5), (2, 3, 3, 3), {}),
    ("strides-pads", (1, 2, 4, 4), (2, 3, 3, 3), {"strides": [2, 2], "pads": [1, 0, 1, 1]}),
    ("output-padding", (1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_padding": [1, 1]}),
    ("output-shape", (1, 1, 3, 3), (1, 2, 3, 3), {"strides": [3, 2], "output_shape": [10, 8]}),
    ("same-upper", (1, 1, 3, 3), (1, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("same-lower", (1, 1, 3, 3), (1, 2, 3, 3), {"strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ("dilations", (1, 1, 3, 3), (1, 1, 2, 2), {"dilations": [2, 2]}),
    ("group", (1, 4, 3, 3), (4, 2, 3, 3), {"group": 2, "strides": [2, 1]}),
    ("1d", (1, 2, 5), (2, 3, 3), {"strides": [2], "pads": [1, 0]}),
    ("3d", (1, 1, 3, 4, 2), (1, 2, 3, 2, 2), {"strides": [2, 1, 2]}),
]


@pytest.mark.parametrize("cid,xs,ws,attrs", CT_CASES, ids=[c[0] for c in CT_CASES])
def test_conv_transpose_matches_onnx_reference(cid, xs, ws, attrs):
    r = rng(5)
    x = r.standard_normal(xs).astype(np.float32)
    w = r.standard_normal(ws).astype(np.float32)
    b = r.standard_normal(ws[1] * attrs.get("group", 1)).astype(np.float32)
    # onnx.reference (1.23) cannot run grouped ConvTranspose; ORT agrees with it elsewhere except
    # for the head/tail split of odd output_shape padding.
    oracle = onnx_runtime if attrs.get("group", 1) > 1 else onnx_reference
    want = oracle("ConvTranspose", [x, w, b], attrs)[0]
    got = run_kernel("ConvTranspose", [x, w, b], attrs)[0]
    assert_close(got, want)


# ---- LiteRT (TFLite NHWC semantics) -------------------------------------------------------------

def _litert(model: bytes, feeds: dict) -> dict:
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert

    return run_litert(model, feeds, resolver="opt", preserve_all=False)


@pytest.mark.parametrize("padding,stride,dil", [("SAME", 1, 1), ("SAME", 2, 1), ("VALID", 2, 1),
                                                ("SAME", 1, 2), ("VALID", 1, 2)])
def test_conv2d_vs_litert(padding, stride, dil):
    pytest.importorskip("ai_edge_litert")
    from tests.tflite_builder import single_op

    r = rng(6)
    x = r.standard_normal((1, 9, 8, 3)).astype(np.float32)
    w = r.standard_normal((4, 3, 3, 3)).astype(np.float32)  # OHWI
    b = r.standard_normal(4).astype(np.float32)
    oh = -(-9 // stride) if padding == "SAME" else (9 - (3 - 1) * dil - 1) // stride + 1
    ow = -(-8 // stride) if padding == "SAME" else (8 - (3 - 1) * dil - 1) // stride + 1
    model, ins, outs = single_op("CONV_2D", [("x", [1, 9, 8, 3], "float32"), ("w", w), ("b", b)],
                                 [("y", [1, oh, ow, 4], "float32")],
                                 dict(padding=padding, stride_h=stride, stride_w=stride, dilation_h=dil,
                                      dilation_w=dil))
    want = _litert(model, {ins[0]: x})[outs[0]]
    got = run_kernel("Conv", [x, w, b], {"layout": "NHWC", "weight_layout": "OHWI",
                                         "auto_pad": "SAME_UPPER" if padding == "SAME" else "VALID",
                                         "strides": [stride, stride], "dilations": [dil, dil]})[0]
    assert_close(got, want)


@pytest.mark.parametrize("padding,stride,mult", [("SAME", 1, 1), ("SAME", 2, 2), ("VALID", 1, 2)])
def test_depthwise_vs_litert(padding, stride, mult):
    pytest.importorskip("ai_edge_litert")
    from tests.tflite_builder import single_op

    r = rng(7)
    c = 3
    x = r.standard_normal((1, 8, 7, c)).astype(np.float32)
    w = r.standard_normal((1, 3, 3, c * mult)).astype(np.float32)
    b = r.standard_normal(c * mult).astype(np.float32)
    oh = -(-8 // stride) if padding == "SAME" else (8 - 3) // stride + 1
    ow = -(-7 // stride) if padding == "SAME" else (7 - 3) // stride + 1
    model, ins, outs = single_op("DEPTHWISE_CONV_2D", [("x", [1, 8, 7, c], "float32"), ("w", w), ("b", b)],
                                 [("y", [1, oh, ow, c * mult], "float32")],
                                 dict(padding=padding, stride_h=stride, stride_w=stride, depth_multiplier=mult))
    want = _litert(model, {ins[0]: x})[outs[0]]
    got = run_kernel("DepthwiseConv", [x, w, b], {"layout": "NHWC", "weight_layout": "1HWO", "group": c,
                                                  "depth_multiplier": mult, "strides": [stride, stride],
                                                  "auto_pad": "SAME_UPPER" if padding == "SAME" else "VALID"})[0]
    assert_close(got, want)


@pytest.mark.parametrize("padding,stride,in_hw,out_hw,k", [
    ("SAME", 2, (4, 5), (8, 10), 3), ("SAME", 2, (4, 5), (7, 9), 3), ("VALID", 2, (4, 5), (9, 11), 3),
    ("VALID", 1, (4, 4), (6, 6), 3), ("SAME", 1, (5, 4), (5, 4), 3), ("SAME", 3, (3, 3), (9, 8), 2),
    ("VALID", 2, (3, 3), (8, 8), 3),
])
def test_transpose_conv_vs_litert(padding, stride, in_hw, out_hw, k):
    pytest.importorskip("ai_edge_litert")
    from tests.tflite_builder import single_op

    r = rng(8)
    ci, co = 3, 2
    x = r.standard_normal((1,) + in_hw + (ci,)).astype(np.float32)
    w = r.standard_normal((co, k, k, ci)).astype(np.float32)
    b = r.standard_normal(co).astype(np.float32)
    oshape = np.array((1,) + out_hw + (co,), dtype=np.int32)
    model, ins, outs = single_op("TRANSPOSE_CONV", [("oshape", oshape), ("w", w),
                                                    ("x", list(x.shape), "float32"), ("b", b)],
                                 [("y", list(oshape), "float32")],
                                 dict(padding=padding, stride_h=stride, stride_w=stride), version=3)
    want = _litert(model, {ins[0]: x})[outs[0]]
    got = run_kernel("ConvTranspose", [x, w, b], {"layout": "NHWC", "weight_layout": "OHWI",
                                                  "strides": [stride, stride], "output_shape": list(oshape),
                                                  "auto_pad": "SAME_UPPER" if padding == "SAME" else "VALID"})[0]
    assert_close(got, want)


# ---- randomized geometry ---------------------------------------------------------------------------

from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _conv_geometry(draw):
    nsp = draw(st.integers(1, 2))
    g = draw(st.sampled_from([1, 1, 2, 3]))
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k = [draw(st.integers(1, 3)) for _ in range(nsp)]
    d = [draw(st.integers(1, 2)) for _ in range(nsp)]
    s = [draw(st.integers(1, 3)) for _ in range(nsp)]
    size = [draw(st.integers((kk - 1) * dd + 1, 9)) for kk, dd in zip(k, d)]
    auto = draw(st.sampled_from(["NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    attrs = {"group": g, "strides": s, "dilations": d, "kernel_shape": k}
    if auto == "NOTSET":
        attrs["pads"] = [draw(st.integers(0, kk - 1)) for kk in k + k]
    else:
        attrs["auto_pad"] = auto
    return (1, g * cg) + tuple(size), (g * mg, cg) + tuple(k), attrs


@settings(max_examples=40, deadline=None)
@given(_conv_geometry(), st.integers(0, 2**31 - 1))
def test_conv_random_geometry_vs_ort(geo, seed):
    xs, ws, attrs = geo
    r = rng(seed)
    x = r.standard_normal(xs).astype(np.float32)
    w = r.standard_normal(ws).astype(np.float32)
    # ORT rejects dilations with SAME_*; onnx.reference takes them.
    same_dil = attrs.get("auto_pad", "").startswith("SAME") and max(attrs["dilations"]) > 1
    oracle = onnx_reference if same_dil else onnx_runtime
    assert_close(run_kernel("Conv", [x, w], attrs)[0], oracle("Conv", [x, w], attrs)[0])


def test_conv_errors_name_the_node():
    from refinterp.errors import ModelError

    x = np.zeros((1, 3, 4, 4), np.float32)
    with pytest.raises(ModelError, match="'n0'"):
        run_kernel("Conv", [x, np.zeros((2, 2, 3, 3), np.float32)], {})
    with pytest.raises(ModelError, match="auto_pad"):
        run_kernel("Conv", [x, np.zeros((2, 3, 3, 3), np.float32)], {"auto_pad": "SAME"})


@st.composite
def _conv_transpose_geometry(draw):
    nsp = draw(st.integers(1, 2))
    g = draw(st.sampled_from([1, 1, 2]))
    cg, mg = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    k = [draw(st.integers(1, 3)) for _ in range(nsp)]
    d = [draw(st.integers(1, 2)) for _ in range(nsp)]
    s = [draw(st.integers(1, 3)) for _ in range(nsp)]
    op = [draw(st.integers(0, ss - 1)) for ss in s]  # ORT wants output_padding < stride
    size = [draw(st.integers(1, 6)) for _ in range(nsp)]
    pads = [draw(st.integers(0, kk - 1)) for kk in k + k]
    attrs = {"group": g, "strides": s, "dilations": d, "output_padding": op, "pads": pads}
    for i in range(nsp):  # keep the output non-empty
        assume((size[i] - 1) * s[i] + (k[i] - 1) * d[i] + 1 + op[i] - pads[i] - pads[i + nsp] > 0)
    return (1, g * cg) + tuple(size), (g * cg, mg) + tuple(k), attrs


@settings(max_examples=40, deadline=None)
@given(_conv_transpose_geometry(), st.integers(0, 2**31 - 1))
def test_conv_transpose_random_geometry_vs_ort(geo, seed):
    xs, ws, attrs = geo
    r = rng(seed)
    x = r.standard_normal(xs).astype(np.float32)
    w = r.standard_normal(ws).astype(np.float32)
    assert_close(run_kernel("ConvTranspose", [x, w], attrs)[0], onnx_runtime("ConvTranspose", [x, w], attrs)[0])
