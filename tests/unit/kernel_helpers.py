"""Shared helpers for the float-kernel unit tests: call a kernel through the registry with a
hand-made Node, and run the same op as a one-node ONNX model under onnx.reference / onnxruntime."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from refinterp import kernels  # noqa: F401  (registers every kernel)
from refinterp.ir import Node, TensorInfo
from refinterp.kernels.registry import PrepareContext, lookup

_ONNX_TYPES = {"float32": 1, "float64": 11, "float16": 10, "int64": 7, "int32": 6}


def run_kernel(op: str, inputs: Sequence[np.ndarray | None], attrs: dict[str, Any] | None = None,
               n_outputs: int = 1, const: Sequence[int] = ()) -> tuple[np.ndarray, ...]:
    """Prepare + run the float kernel of ``op``; inputs listed in ``const`` are given as constants."""
    names = [f"in{i}" if v is not None else "" for i, v in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_outputs)]
    node = Node("node0", op, names, outs, dict(attrs or {}))
    infos = [None if v is None else TensorInfo(n, tuple(np.shape(v)), str(np.asarray(v).dtype),
                                                const=np.asarray(v) if i in const else None)
             for i, (n, v) in enumerate(zip(names, inputs))]
    out_infos = [TensorInfo(o, None, "float32") for o in outs]
    k = lookup(op, ["float"], node=node)
    plan = k.prepare(node, PrepareContext(node, infos, out_infos, {}))
    res = k.run(plan, *[None if v is None else np.asarray(v) for v in inputs])
    return tuple(res) if isinstance(res, (tuple, list)) else (res,)


def onnx_model(op: str, inputs: Sequence[np.ndarray | None], attrs: dict[str, Any] | None = None,
               n_outputs: int = 1, opset: int = 21, domain: str = "", out_types: Sequence[str] = ()):
    from onnx import helper

    names = [f"in{i}" if v is not None else "" for i, v in enumerate(inputs)]
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op, names, outs, domain=domain, **(attrs or {}))
    g_in = [helper.make_tensor_value_info(n, _ONNX_TYPES[str(np.asarray(v).dtype)], np.shape(v))
            for n, v in zip(names, inputs) if v is not None]
    first = str(np.asarray(inputs[0]).dtype)
    types = list(out_types) + [first] * (n_outputs - len(out_types))
    g_out = [helper.make_tensor_value_info(o, _ONNX_TYPES[t], None) for o, t in zip(outs, types)]
    graph = helper.make_graph([node], "g", g_in, g_out)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(domain, opset)])
    model.ir_version = 10
    return model, {n: np.asarray(v) for n, v in zip(names, inputs) if v is not None}


def onnx_reference(op, inputs, attrs=None, n_outputs=1, opset=21, out_types=()):
    from onnx.reference import ReferenceEvaluator

    model, feeds = onnx_model(op, inputs, attrs, n_outputs, opset, out_types=out_types)
    return tuple(ReferenceEvaluator(model).run(None, feeds))


def onnx_runtime(op, inputs, attrs=None, n_outputs=1, opset=21, out_types=()):
    import onnxruntime as ort

    model, feeds = onnx_model(op, inputs, attrs, n_outputs, opset, out_types=out_types)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return tuple(sess.run(None, feeds))


def assert_close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4, atol: float = 1e-5) -> None:
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol)


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)
