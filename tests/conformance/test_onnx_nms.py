"""ONNX NonMaxSuppression against ONNX Runtime on larger random cases than the node conformance
set: 2 batches x 3 classes x 200 boxes, scores on a coarse grid (many ties: equal scores go by
box index), both box encodings, with and without a score threshold.  Output indices must be equal."""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402


def _case(center: int, with_threshold: bool, seed: int):
    rng = np.random.default_rng(seed)
    n = 200
    if center:
        boxes = np.concatenate([rng.uniform(0, 1, (2, n, 2)), rng.uniform(0.05, 0.4, (2, n, 2))], -1)
    else:
        a, b = rng.uniform(0, 1, (2, n, 2)), rng.uniform(0, 1, (2, n, 2))
        boxes = np.concatenate([a, b], -1)  # either corner first
    feeds = {"boxes": boxes.astype(np.float32),
             "scores": rng.choice(np.linspace(0, 1, 21), (2, 3, n)).astype(np.float32)}
    inits = [helper.make_tensor("max_out", TensorProto.INT64, [1], [25]),
             helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.4])]
    ins = ["boxes", "scores", "max_out", "iou"]
    if with_threshold:
        inits.append(helper.make_tensor("thr", TensorProto.FLOAT, [1], [0.3]))
        ins.append("thr")
    node = helper.make_node("NonMaxSuppression", ins, ["sel"], center_point_box=center)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape)
                                            for k, v in feeds.items()],
                              [helper.make_tensor_value_info("sel", TensorProto.INT64, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)])
    model.ir_version = 7
    return model, feeds


@pytest.mark.parametrize("center", [0, 1])
@pytest.mark.parametrize("with_threshold", [False, True])
def test_nms_matches_onnxruntime(tmp_path, center, with_threshold):
    model, feeds = _case(center, with_threshold, seed=center * 2 + with_threshold)
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    got = refinterp.Session(refinterp.load(str(p)), "float32").run(feeds)["sel"]
    assert want.shape[0] > 60  # selections in every batch / class, suppressions among them
    np.testing.assert_array_equal(got, want)
