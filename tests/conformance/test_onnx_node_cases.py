"""ONNX backend node test cases (generated in memory by onnx's own case collectors) through
refinterp.onnx_backend under the float32 scheme.

Selection: every non-``_expanded`` case of the default domain whose operators refinterp implements,
i.e. none in ``NOT_SUPPORTED`` (the ``_expanded`` variants test the op's function body, i.e. other
ops).  Cases whose tensors use a type refinterp does not model (float8/float4/bfloat16/int2/string,
sequence/optional) are listed as skipped, each with its reason.  Comparison follows onnx's runner:
same dtype and shape, integers/bools exactly, floats with the case's own rtol/atol.
"""
from __future__ import annotations

import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, numpy_helper  # noqa: E402
from onnx.backend.test.case.node import collect_testcases  # noqa: E402

from refinterp.onnx_backend import Backend  # noqa: E402

# Operators refinterp does not implement: a case using one is not selected, and
# test_unsupported_ops_are_refused_at_session_creation checks each is refused before anything runs
# (that test fails once one becomes supported, so this list only shrinks).
NOT_SUPPORTED = set("""Bernoulli
ImageDecoder NegativeLogLikelihoodLoss OptionalGetElement OptionalHasElement
SoftmaxCrossEntropyLoss TfIdfVectorizer""".split())

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
    return None


def _selected() -> list:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    params = []
    for c in sorted(cases, key=lambda c: c.name):
        if c.name.endswith("_expanded") or "_expanded_" in c.name:
            continue
        if not all(n.op_type not in NOT_SUPPORTED and n.domain in ("", "ai.onnx") for n in c.model.graph.node):
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
    assert len(CASES) > 900
    for p in CASES:
        for m in p.marks:
            assert m.kwargs["reason"]


def _first_case_using(op: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(op)
    return next((c for c in sorted(cases, key=lambda c: c.name)
                 if any(n.op_type == op for n in c.model.graph.node) and not skip_reason(c)), None)


@pytest.mark.parametrize("op", sorted(NOT_SUPPORTED))
def test_unsupported_ops_are_refused_at_session_creation(op) -> None:
    from refinterp.errors import UnsupportedOpError

    case = _first_case_using(op)
    if case is None:
        pytest.skip(f"onnx {onnx.__version__} has no case for {op}")
    with pytest.raises(UnsupportedOpError) as e:
        Backend.prepare(case.model, device="CPU")
    msg = str(e.value)
    assert "\n" not in msg and op in msg
