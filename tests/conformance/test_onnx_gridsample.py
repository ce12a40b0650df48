"""ONNX GridSample against ONNX Runtime (scheme onnxruntime-cpu) on random grids reaching past
the borders: every mode x padding mode x align_corners, within 1e-4 (float32; bicubic sums 16
taps).  ORT differs from the spec (onnx.reference, the node cases, scheme float32) for bicubic with
border padding: it clamps the taps, not the coordinate; the two schemes follow their own.  AffineGrid
(GridSample's spatial-transformer partner), Col2Im (torch's fold) and DeformConv against ORT too."""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.errors import InputError  # noqa: E402
from tests.onnx_models import ort_and_refinterp, single_node_model  # noqa: E402


@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("pad", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_gridsample_matches_onnxruntime(tmp_path, mode, pad, align):
    rng = np.random.default_rng(len(mode) * 7 + len(pad) + align)
    x = rng.normal(0, 1, (2, 3, 7, 9)).astype(np.float32)
    grid = rng.uniform(-1.4, 1.4, (2, 5, 6, 2)).astype(np.float32)
    node = helper.make_node("GridSample", ["x", "grid"], ["y"], mode=mode, padding_mode=pad, align_corners=align)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                            helper.make_tensor_value_info("grid", TensorProto.FLOAT, grid.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 9
    feeds = {"x": x, "grid": grid}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    g = refinterp.load(str(p))
    got = refinterp.Session(g, "onnxruntime-cpu").run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    if mode == "cubic" and pad == "border":  # the spec's answer is another one here
        spec = refinterp.Session(g, "float32").run(feeds)["y"]
        assert np.abs(spec - want).max() > 1e-2


F = TensorProto.FLOAT


@pytest.mark.parametrize("size,align", [((2, 3, 5, 7), 0), ((2, 3, 5, 7), 1), ((1, 2, 3, 4, 5), 0)])
def test_affine_grid_matches_onnxruntime(tmp_path, size, align):
    """AffineGrid (the spatial-transformer pairing with GridSample), float32 within 1e-6."""
    rng = np.random.default_rng(sum(size) + align)
    nsp = len(size) - 2
    feeds = {"theta": rng.normal(0, 1, (size[0], nsp, nsp + 1)).astype(np.float32),
             "size": np.array(size, np.int64)}
    model = single_node_model(helper.make_node("AffineGrid", ["theta", "size"], ["grid"], align_corners=align),
                              feeds, {"grid": F}, opset=20, ir_version=9)
    want, got, _ = ort_and_refinterp(model, feeds, tmp_path)
    assert got["grid"].shape == want["grid"].shape
    np.testing.assert_allclose(got["grid"], want["grid"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("img,blk,attrs", [([6, 7], [2, 3], {}),
                                           ([8, 8], [3, 3], {"strides": [2, 2], "pads": [1, 1, 1, 1]}),
                                           ([9, 6], [2, 2], {"dilations": [2, 1], "strides": [1, 2]})])
def test_col2im_matches_onnxruntime(tmp_path, img, blk, attrs):
    """Col2Im (torch's fold): overlapping blocks summed, padding cropped; equal to ORT here."""
    from onnx import numpy_helper

    rng = np.random.default_rng(sum(img) + sum(blk))
    pads, st, dl = attrs.get("pads", [0] * 4), attrs.get("strides", [1, 1]), attrs.get("dilations", [1, 1])
    grid = [(img[d] + pads[d] + pads[d + 2] - dl[d] * (blk[d] - 1) - 1) // st[d] + 1 for d in range(2)]
    feeds = {"x": rng.normal(0, 1, (2, 3 * blk[0] * blk[1], grid[0] * grid[1])).astype(np.float32)}
    inits = [numpy_helper.from_array(np.array(img, np.int64), "img"),
             numpy_helper.from_array(np.array(blk, np.int64), "blk")]
    model = single_node_model(helper.make_node("Col2Im", ["x", "img", "blk"], ["y"], **attrs), feeds, {"y": F},
                              opset=18, ir_version=8, inits=inits)
    want, got, _ = ort_and_refinterp(model, feeds, tmp_path)
    assert got["y"].shape == want["y"].shape
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("group,og,with_mask,stride", [(1, 1, False, 1), (2, 2, True, 2), (1, 2, True, 1)])
def test_deform_conv_matches_onnxruntime(tmp_path, group, og, with_mask, stride):
    """DeformConv (DCN v1 / v2): random offsets reaching outside the image, groups, offset groups,
    modulation mask, stride and padding; float32 within 1e-5."""
    rng = np.random.default_rng(group * 10 + og + stride)
    n, ic, oc, h, w, k = 2, 4, 6, 7, 8, 3
    oh, ow = (h + 2 - k) // stride + 1, (w + 2 - k) // stride + 1
    feeds = {"x": rng.normal(0, 1, (n, ic, h, w)).astype(np.float32),
             "w": rng.normal(0, 1, (oc, ic // group, k, k)).astype(np.float32),
             "offset": rng.normal(0, 2, (n, og * k * k * 2, oh, ow)).astype(np.float32),
             "b": rng.normal(0, 1, oc).astype(np.float32)}
    if with_mask:
        feeds["mask"] = rng.uniform(0, 1, (n, og * k * k, oh, ow)).astype(np.float32)
    node = helper.make_node("DeformConv", list(feeds), ["y"], group=group, offset_group=og, pads=[1, 1, 1, 1],
                            strides=[stride, stride], kernel_shape=[k, k])
    want, got, _ = ort_and_refinterp(single_node_model(node, feeds, {"y": F}, opset=19, ir_version=9), feeds, tmp_path)
    assert got["y"].shape == want["y"].shape
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("with_shape", [False, True])
def test_max_unpool_after_max_pool_matches_onnxruntime(tmp_path, with_shape):
    """MaxPool (with indices) then MaxUnpool back to the odd pre-pool size, as SegNet-style decoders
    do.  Without output_shape every scheme equals ORT; with it, onnxruntime-cpu (ORT scatters into
    output_shape) equals ORT exactly, while float32 follows ONNX's reference (the inferred tensor in a
    corner, onnx's node case), where these indices do not fit: refused with a pointer to the ORT
    scheme."""
    # without output_shape the pre-pool size must be the inferred one (even); with it, odd
    x = np.random.default_rng(7).normal(0, 1, (2, 3, 7, 9) if with_shape else (2, 3, 8, 10)).astype(np.float32)
    nodes = [helper.make_node("MaxPool", ["x"], ["p", "i"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("MaxUnpool", ["p", "i"] + (["shape"] if with_shape else []), ["y"],
                              kernel_shape=[2, 2], strides=[2, 2])]
    inits = [helper.make_tensor("shape", TensorProto.INT64, [4], list(x.shape))] if with_shape else []
    model = single_node_model(nodes, {"x": x}, {"y": F}, opset=12, ir_version=7, inits=inits)
    want, got, g = ort_and_refinterp(model, {"x": x}, tmp_path, scheme="onnxruntime-cpu")
    np.testing.assert_array_equal(got["y"], want["y"])
    if not with_shape:
        np.testing.assert_array_equal(refinterp.Session(g, "float32").run({"x": x})["y"], want["y"])
        return
    with pytest.raises(InputError, match="ONNX Runtime scatters into output_shape"):
        refinterp.Session(g, "float32").run({"x": x})
