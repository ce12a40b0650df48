"""ONNX's own node conformance cases for the quantization ops, run under the ``onnx-reference``
scheme (expected outputs are onnx's, integers compared exactly).  Cases using types refinterp does
not model (float8, int2, ...) are skipped with their reason, as in test_onnx_node_cases.py."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import numpy_helper  # noqa: E402
from onnx.backend.test.case.node import collect_testcases  # noqa: E402

from refinterp.onnx_backend import Backend  # noqa: E402

_UNMODELLED = {getattr(onnx.TensorProto, n): n.lower() for n in (
    "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "FLOAT4E2M1", "INT2", "UINT2",
    "BFLOAT16") if hasattr(onnx.TensorProto, n)}


def skip_reason(case) -> str | None:
    """Cases with a tensor type refinterp does not model (float8 / float4 / int2 / bfloat16)."""
    g = case.model.graph
    types = [vi.type.tensor_type.elem_type for vi in list(g.input) + list(g.output)]
    types += [t.data_type for t in g.initializer]
    types += [a.i for n in g.node for a in n.attribute if a.name == "output_dtype"]
    bad = sorted({_UNMODELLED[t] for t in types if t in _UNMODELLED})
    return f"{', '.join(bad)} tensors are not modelled" if bad else None


def as_array(x) -> np.ndarray:
    return numpy_helper.to_array(x) if isinstance(x, onnx.TensorProto) else np.asarray(x)


def assert_same(got, ref, what: str) -> None:
    got, ref = np.asarray(got), np.asarray(ref)
    assert got.dtype == ref.dtype and got.shape == ref.shape, \
        f"{what}: {got.dtype}{got.shape} vs {ref.dtype}{ref.shape}"
    if ref.dtype.kind in "iub":
        np.testing.assert_array_equal(got, ref, err_msg=what)
    else:  # float outputs (DequantizeLinear, DynamicQuantizeLinear scale) are exact in these cases
        np.testing.assert_array_equal(got.astype(np.float64), ref.astype(np.float64), err_msg=what)

QOPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger",
        "DynamicQuantizeLinear"}


def _selected() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    out = []
    for c in sorted(cases, key=lambda c: c.name):
        if "_expanded" in c.name or not any(n.op_type in QOPS for n in c.model.graph.node):
            continue
        why = skip_reason(c)
        out.append(pytest.param(c, id=c.name, marks=[pytest.mark.skip(reason=why)] if why else []))
    return out


CASES = _selected()


# QLinearConv / QLinearMatMul cases feed scales and zero points (and the bias) as graph inputs;
# refinterp reads quantization parameters from constants, so those inputs are folded into
# initializers with the data set's values (the data inputs stay graph inputs).
_DATA_POSITIONS = {"QLinearConv": (0, 3), "QLinearMatMul": (0, 3)}


def _fold_params(model, inputs):
    node = model.graph.node[0]
    keep = _DATA_POSITIONS.get(node.op_type)
    if keep is None or len(model.graph.node) != 1:
        return model, inputs
    fold = {name for i, name in enumerate(node.input) if name and i not in keep}
    m = onnx.ModelProto()
    m.CopyFrom(model)
    feeds = []
    kept = [vi for vi in m.graph.input if vi.name not in fold]
    for vi, x in zip(model.graph.input, inputs):
        if vi.name in fold:
            m.graph.initializer.append(numpy_helper.from_array(as_array(x), vi.name))
        else:
            feeds.append(x)
    del m.graph.input[:]
    m.graph.input.extend(kept)
    return m, feeds


@pytest.mark.parametrize("case", CASES)
def test_quant_node_case_onnx_reference(case) -> None:
    for k, (inputs, refs) in enumerate(case.data_sets):
        model, inputs = _fold_params(case.model, inputs)
        rep = Backend.prepare(model, device="CPU", scheme="onnx-reference")
        outs = rep.run([as_array(x) for x in inputs])
        for name, got, ref in zip([o.name for o in case.model.graph.output], outs, refs):
            assert_same(got, as_array(ref), f"{case.name} data set {k} output '{name}'")


def test_every_listed_op_has_cases() -> None:
    ops = {n.op_type for p in CASES for n in p.values[0].model.graph.node}
    assert QOPS <= ops
