"""Float ONNX models built in code: refinterp (float32 scheme) against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import refinterp  # noqa: E402
from refinterp import Session  # noqa: E402
from refinterp.loaders.onnx import load_onnx_model  # noqa: E402
from tests.onnx_models import small_cnn, transformer_block  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


def _feeds(model, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        if vi.type.tensor_type.elem_type == onnx.TensorProto.INT64:
            feeds[vi.name] = rng.integers(0, 20, size=shape).astype(np.int64)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds)))


MODELS = {"small_cnn": small_cnn, "transformer_gelu_op": lambda: transformer_block("op"),
          "transformer_gelu_erf": lambda: transformer_block("erf")}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("seed", [0, 1])
def test_float_model_matches_onnxruntime(name: str, seed: int) -> None:
    model = MODELS[name]()
    onnx.checker.check_model(model, full_check=True)
    feeds = _feeds(model, seed)
    want = _ort(model, feeds)
    got = Session(load_onnx_model(model), scheme="float32").run(feeds)
    assert set(got) == set(want)
    for k, ref in want.items():
        assert got[k].dtype == ref.dtype and got[k].shape == ref.shape, k
        np.testing.assert_allclose(got[k], ref, rtol=RTOL, atol=ATOL, err_msg=f"{name}: output {k}")


@pytest.mark.parametrize("name", sorted(MODELS))
def test_capture_all_returns_every_intermediate(name: str) -> None:
    model = MODELS[name]()
    graph = load_onnx_model(model)
    feeds = _feeds(model, 0)
    got = Session(graph, scheme="float32").run(feeds, capture="all")
    produced = {o for n in model.graph.node for o in n.output}
    assert produced | set(feeds) == set(got)
    # every intermediate agrees with onnxruntime when exposed as an extra graph output
    exposed = onnx.ModelProto()
    exposed.CopyFrom(model)
    have = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(onnx.helper.make_empty_tensor_value_info(o) for o in sorted(produced - have))
    want = _ort(exposed, feeds)
    for k, ref in want.items():
        np.testing.assert_allclose(got[k], ref, rtol=RTOL, atol=ATOL, err_msg=f"{name}: tensor {k}")


def test_cnn_depthwise_conv_becomes_depthwise_node() -> None:
    graph = load_onnx_model(small_cnn())
    ops = [n.op for n in graph.nodes]
    assert ops.count("DepthwiseConv") == 1 and ops.count("Conv") == 2
    dw = next(n for n in graph.nodes if n.op == "DepthwiseConv")
    assert dw.attrs["group"] == 8 and dw.attrs["depth_multiplier"] == 1
    assert dw.attrs["weight_layout"] == "OIHW" and dw.attrs["layout"] == "NCHW"


@pytest.mark.parametrize("name", ["small_cnn", "transformer_gelu_erf"])
def test_onnxruntime_quantized_qoperator_model_loads(tmp_path, name: str) -> None:
    """A QOperator model written by onnxruntime's quantizer: every QLinear*/QGemm becomes a canonical
    op whose tensors carry QuantParams consistent with their shapes."""
    q = pytest.importorskip("onnxruntime.quantization")
    model = MODELS[name]()
    src, dst = tmp_path / "f.onnx", tmp_path / "q.onnx"
    src.write_bytes(model.SerializeToString())
    feeds = [_feeds(model, s) for s in range(3)]

    class Reader(q.CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(feeds)

        def get_next(self):
            return next(self.it, None)

    q.quantize_static(str(src), str(dst), Reader(), quant_format=q.QuantFormat.QOperator, per_channel=True,
                      activation_type=q.QuantType.QUInt8, weight_type=q.QuantType.QInt8)
    proto = onnx.load(str(dst))
    qops = [n for n in proto.graph.node if n.op_type.startswith("QLinear") or n.op_type == "QGemm"]
    assert qops
    graph = refinterp.load(dst)
    converted = [n for n in graph.nodes if n.source_op.split(".")[-1] in {n.op_type for n in qops}]
    assert len(converted) == len(qops)
    for n in converted:
        assert not n.op.startswith("QLinear") and n.op != "QGemm"
        for t in [graph.tensors[i] for i in n.inputs if i and graph.tensors[i].dtype in ("uint8", "int8")] + \
                 [graph.tensors[n.outputs[0]]]:
            assert t.quant is not None, (n.name, t.name)
            if not t.quant.per_tensor:
                assert t.shape is not None and t.shape[t.quant.axis] == t.quant.scale.size, (n.name, t.name)
        assert not any(i.endswith(("_scale", "_zero_point")) for i in n.inputs), n.inputs
    out = Session(graph, scheme="float32").run(feeds[0])
    assert set(out) == {o.name for o in proto.graph.output}
