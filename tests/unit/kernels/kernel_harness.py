"""The kernel unit tests' one harness: call a kernel through the registry on a hand-made Node
(``run_kernel``; ``run_float`` for the float kernels with every input fed at run time), and run
the same op as a single-node ONNX model in onnx.reference or onnxruntime (the oracles)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from refinterp import kernels  # noqa: F401  (registers every kernel)
from refinterp.ir import Node, QuantParams, TensorInfo
from refinterp.kernels.registry import PrepareContext, lookup

RTOL, ATOL = 1e-4, 1e-5


def run_kernel(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *,
               variant: str = "float", n_out: int = 1, const: bool | Sequence[int] = True,
               out_dtype: str | None = None, out_quant: QuantParams | None = None,
               in_quant: Sequence[QuantParams | None] = (), in_dtypes: Sequence[str | None] = (),
               out_dtypes: Sequence[str] | None = None) -> list[np.ndarray]:
    """Prepare and run ``op`` via the registry.  ``const=True`` makes every input but the first a
    constant (resolved in prepare); ``const=False`` feeds all at run time; a list picks indices."""
    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_out)]
    node = Node("n0", op, names, outs, dict(attrs or {}))
    if const is True:
        const_idx = set(range(1, len(inputs)))
    elif const is False:
        const_idx = set()
    else:
        const_idx = set(const)
    infos: list[TensorInfo | None] = []
    for i, x in enumerate(inputs):
        if x is None:
            infos.append(None)
            continue
        q = in_quant[i] if i < len(in_quant) else None
        dt = in_dtypes[i] if i < len(in_dtypes) and in_dtypes[i] else str(np.asarray(x).dtype)
        infos.append(TensorInfo(names[i], tuple(np.shape(x)), dt, quant=q,
                                const=np.asarray(x) if i in const_idx else None))
    odt = list(out_dtypes) if out_dtypes else [out_dtype or ""] * n_out
    out_infos = [TensorInfo(o, None, odt[j], quant=out_quant) for j, o in enumerate(outs)]
    ctx = PrepareContext(node, infos, out_infos)
    k = lookup(op, [variant], node=node)
    plan = k.prepare(node, ctx)
    res = k.run(plan, *[None if x is None else np.asarray(x) for x in inputs])
    if not isinstance(res, (tuple, list)):
        res = (res,)
    return [np.asarray(r) for r in res]


def run_float(op: str, inputs: Sequence[np.ndarray | None], attrs: dict[str, Any] | None = None,
              n_outputs: int = 1, const: Sequence[int] = ()) -> tuple[np.ndarray, ...]:
    """The float kernel of ``op``; only the inputs listed in ``const`` are constants."""
    return tuple(run_kernel(op, inputs, attrs, n_out=n_outputs, const=list(const), out_dtype="float32"))


_ONNX_TYPES = {"float32": 1, "float64": 11, "float16": 10, "int64": 7, "int32": 6}


def _model(op, inputs, attrs, n_out, opset, domain, out_types=None):
    """A one-node model; outputs UNDEFINED (``out_types`` None) or typed (missing types: the first
    input's)."""
    import onnx
    from onnx import helper

    names = [f"in{i}" if x is not None else "" for i, x in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **(attrs or {}))
    g_in = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype),
                                          list(np.shape(x))) for n, x in zip(names, inputs) if x is not None]
    if out_types is None:
        g_out = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in outs]
    else:
        first = str(np.asarray(inputs[0]).dtype)
        types = list(out_types) + [first] * (n_out - len(out_types))
        g_out = [helper.make_tensor_value_info(o, _ONNX_TYPES[t], None) for o, t in zip(outs, types)]
    graph = helper.make_graph([node], "g", g_in, g_out)
    ops = [helper.make_opsetid(domain, opset or onnx.defs.onnx_opset_version())]
    model = helper.make_model(graph, opset_imports=ops)
    if out_types is not None:
        model.ir_version = 10
    feeds = {n: np.asarray(x) for n, x in zip(names, inputs) if x is not None}
    return model, feeds


def onnx_ref(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *,
             n_out: int = 1, opset: int | None = None, domain: str = "") -> list[np.ndarray]:
    """Outputs of onnx.reference.ReferenceEvaluator on a one-node model."""
    from onnx.reference import ReferenceEvaluator

    model, feeds = _model(op, inputs, attrs, n_out, opset, domain)
    with np.errstate(all="ignore"):  # the oracle's own inf/nan warnings are not findings
        return [np.asarray(r) for r in ReferenceEvaluator(model).run(None, feeds)]


def ort_ref(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *,
            n_out: int = 1, opset: int | None = None, domain: str = "") -> list[np.ndarray]:
    """Outputs of onnxruntime (CPU) on a one-node model; output types come from shape inference."""
    import onnx
    import pytest

    ort = pytest.importorskip("onnxruntime")
    model, feeds = _model(op, inputs, attrs, n_out, opset or 21, domain)
    model.ir_version = 10
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    model.graph.ClearField("output")
    model.graph.output.extend(inferred.graph.output)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return [np.asarray(r) for r in sess.run(None, feeds)]


def assert_same(got: np.ndarray, want: np.ndarray, *, rtol: float = RTOL, atol: float = ATOL,
                check_dtype: bool = True) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    if check_dtype:
        assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "iub" or got.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol,
                                   equal_nan=True)


def check_vs_onnx(op: str, inputs: Sequence[np.ndarray | None], attrs: dict | None = None, *,
                  n_out: int = 1, const: Any = True, opset: int | None = None, oracle: str = "ref",
                  **tol) -> None:
    fn = ort_ref if oracle == "ort" else onnx_ref
    want = fn(op, inputs, attrs, n_out=n_out, opset=opset)
    got = run_kernel(op, inputs, attrs, n_out=n_out, const=const)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w, **tol)


def onnx_reference(op, inputs, attrs=None, n_outputs=1, opset=21, out_types=()):
    """onnx.reference on a one-node model with typed outputs (opset 21 by default)."""
    from onnx.reference import ReferenceEvaluator

    model, feeds = _model(op, inputs, attrs, n_outputs, opset, "", out_types)
    return tuple(ReferenceEvaluator(model).run(None, feeds))


def onnx_runtime(op, inputs, attrs=None, n_outputs=1, opset=21, out_types=()):
    """onnxruntime (CPU, one thread, no graph optimization) on a one-node model with typed outputs."""
    import pytest

    ort = pytest.importorskip("onnxruntime")
    model, feeds = _model(op, inputs, attrs, n_outputs, opset, "", out_types)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return tuple(sess.run(None, feeds))


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    """Same shape and dtype, values within rtol/atol (float kernels against a float oracle)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)
