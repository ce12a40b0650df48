"""ONNX backend node test cases (generated in memory by onnx's own case collectors) through
refinterp.onnx_backend under the float32 scheme.

Selection: every non-``_expanded`` case all of whose nodes are in ``OPS`` (the ``_expanded``
variants test the op's function body, i.e. other ops).  Cases whose tensors use a type refinterp
does not model (float8/float4/bfloat16/int2/string, sequence/optional) or that run an op in
training mode are listed as skipped, each with its reason.  Comparison follows onnx's runner: same
dtype and shape, integers/bools exactly, floats with the case's own rtol/atol.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, numpy_helper  # noqa: E402
from onnx.backend.test.case.node import collect_testcases  # noqa: E402

from refinterp.onnx_backend import Backend  # noqa: E402

OPS = set("""Conv ConvTranspose MatMul Gemm Add Sub Mul Div Relu LeakyRelu PRelu Sigmoid Tanh HardSigmoid
HardSwish Softmax MaxPool AveragePool GlobalAveragePool GlobalMaxPool Concat Reshape Transpose Flatten Squeeze
Unsqueeze Pad Resize DepthToSpace SpaceToDepth Slice Gather Clip BatchNormalization ReduceMean ReduceMax
ReduceSum QuantizeLinear DequantizeLinear Identity Split Gelu LayerNormalization Erf Sqrt Pow Exp Max Min Abs
Neg Cast Shape Constant Expand Where Tile Mean Elu Selu Softplus InstanceNormalization LRN ArgMax Reciprocal
Floor Ceil Round Sum If Loop Scan DFT STFT HannWindow HammingWindow BlackmanWindow MelWeightMatrix
ConstantOfShape Range NonZero EyeLike OneHot GatherElements GatherND ScatterElements ScatterND Trilu TopK
Compress ReverseSequence CumSum Hardmax MeanVarianceNormalization LSTM GRU RNN QLinearConv QLinearMatMul
ConvInteger MatMulInteger DynamicQuantizeLinear NonMaxSuppression Einsum RoiAlign GridSample Dropout""".split())

UNMODELLED_TYPES = {
    TensorProto.BFLOAT16: "bfloat16 tensors are not modelled",
    TensorProto.FLOAT8E4M3FN: "float8 tensors are not modelled",
    TensorProto.FLOAT8E4M3FNUZ: "float8 tensors are not modelled",
    TensorProto.FLOAT8E5M2: "float8 tensors are not modelled",
    TensorProto.FLOAT8E5M2FNUZ: "float8 tensors are not modelled",
    TensorProto.STRING: "string tensors are not modelled",
}
for _name, _why in (("FLOAT8E8M0", "float8 tensors are not modelled"),
                    ("FLOAT4E2M1", "float4 tensors are not modelled"),
                    ("INT2", "int2 tensors are not modelled"), ("UINT2", "int2 tensors are not modelled")):
    if hasattr(TensorProto, _name):
        UNMODELLED_TYPES[getattr(TensorProto, _name)] = _why


def _types_in(model) -> list[tuple[str, int | None]]:
    """(kind, elem_type) of every typed value: graph I/O, initializers, Cast/Q targets."""
    out: list[tuple[str, int | None]] = []
    g = model.graph
    for vi in list(g.input) + list(g.output) + list(g.value_info):
        kind = vi.type.WhichOneof("value")
        out.append((kind, vi.type.tensor_type.elem_type if kind == "tensor_type" else None))
    out += [("tensor_type", t.data_type) for t in g.initializer]
    for n in g.node:
        for a in n.attribute:
            if a.name in ("to", "output_dtype") and a.type == onnx.AttributeProto.INT:
                out.append(("tensor_type", a.i))
            if a.type == onnx.AttributeProto.TENSOR:
                out.append(("tensor_type", a.t.data_type))
    return out


def skip_reason(case) -> str | None:
    for kind, elem in _types_in(case.model):
        if kind == "sequence_type":
            return "sequence types are not modelled"
        if kind == "optional_type":
            return "optional types are not modelled"
        if elem in UNMODELLED_TYPES:
            return UNMODELLED_TYPES[elem]
    for n in case.model.graph.node:
        for a in n.attribute:
            if a.name == "training_mode" and a.i:
                return "training mode is not modelled (inference interpreter)"
    return None


def _selected() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    params = []
    for c in sorted(cases, key=lambda c: c.name):
        if c.name.endswith("_expanded") or "_expanded_" in c.name:
            continue
        if not all(n.op_type in OPS and n.domain in ("", "ai.onnx") for n in c.model.graph.node):
            continue
        why = skip_reason(c)
        marks = [pytest.mark.skip(reason=why)] if why else []
        params.append(pytest.param(c, id=c.name, marks=marks))
    return params


CASES = _selected()


def as_array(x) -> np.ndarray:
    """Case data may be TensorProtos (types NumPy lacks natively, e.g. int4); decode them."""
    if isinstance(x, TensorProto):
        return numpy_helper.to_array(x)
    x = np.asarray(x)
    if x.dtype == object and x.size == 1 and isinstance(x.reshape(-1)[0], TensorProto):
        return numpy_helper.to_array(x.reshape(-1)[0])
    return x


def assert_same(got: np.ndarray, ref: np.ndarray, rtol: float, atol: float, what: str) -> None:
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype}, expected {ref.dtype}"
    assert got.shape == ref.shape, f"{what}: shape {got.shape}, expected {ref.shape}"
    if ref.dtype.kind in "iub":
        np.testing.assert_array_equal(got, ref, err_msg=what)
    else:
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True, err_msg=what)


@pytest.mark.parametrize("case", CASES)
def test_node_case(case) -> None:
    rep = Backend.prepare(case.model, device="CPU")
    for k, (inputs, refs) in enumerate(case.data_sets):
        outs = rep.run([as_array(x) for x in inputs])
        assert len(outs) == len(refs)
        for name, got, ref in zip([o.name for o in case.model.graph.output], outs, refs):
            assert_same(got, as_array(ref), case.rtol, case.atol, f"{case.name} data set {k} output '{name}'")


def test_selection_is_not_empty_and_skips_are_explained() -> None:
    assert len(CASES) > 400
    for p in CASES:
        for m in p.marks:
            assert m.kwargs["reason"]
