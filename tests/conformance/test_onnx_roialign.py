"""ONNX RoiAlign against ONNX Runtime: random rois (some partly outside the feature map, some
smaller than a cell), adaptive and fixed sampling grids, avg and max, both coordinate modes;
within 1e-5 (float32)."""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402


@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm", ["half_pixel", "output_half_pixel"])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roialign_matches_onnxruntime(tmp_path, mode, ctm, ratio):
    rng = np.random.default_rng(ratio + len(mode) + len(ctm))
    x = rng.normal(0, 1, (2, 3, 12, 10)).astype(np.float32)
    xy = rng.uniform(-4, 22, (9, 2))
    wh = rng.uniform(0.3, 14, (9, 2))
    rois = np.concatenate([xy, xy + wh], axis=1).astype(np.float32)
    idx = rng.integers(0, 2, 9).astype(np.int64)
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], mode=mode, output_height=3, output_width=4,
                            sampling_ratio=ratio, spatial_scale=0.5, coordinate_transformation_mode=ctm)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape),
                                            helper.make_tensor_value_info("rois", TensorProto.FLOAT, rois.shape),
                                            helper.make_tensor_value_info("idx", TensorProto.INT64, idx.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)])
    model.ir_version = 8
    feeds = {"x": x, "rois": rois, "idx": idx}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    got = refinterp.Session(refinterp.load(str(p)), "float32").run(feeds)["y"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
