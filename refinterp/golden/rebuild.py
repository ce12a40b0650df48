"""Rebuild a one-node IR Graph from a golden case, so refinterp's own kernels can re-run it."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, TensorInfo
from .case import Case, from_jsonable, spec_quant


def _tensor_name(spec: dict, role: str) -> str:
    return spec.get("name") or f"{role}{spec['key']}"


def case_graph(case: Case) -> Graph:
    """Inputs marked ``const`` in case.json become constants (kernels fold weights at prepare time);
    the others become graph inputs fed from ``tensors.npz``."""
    m = case.meta
    tensors: dict[str, TensorInfo] = {}
    node_inputs: list[str] = []
    graph_inputs: list[str] = []
    for s in m["inputs"]:
        if not s.get("present", True):
            node_inputs.append("")
            continue
        name = _tensor_name(s, "input")
        v = case.arrays[f"input.{s['key']}"]
        if name not in tensors:
            tensors[name] = TensorInfo(name, tuple(v.shape), str(v.dtype), spec_quant(s),
                                       const=v if s.get("const") else None, layout=None)
            if not s.get("const"):
                graph_inputs.append(name)
        node_inputs.append(name)
    outs: list[str] = []
    for s in m["outputs"]:
        name = _tensor_name(s, "output")
        if name in tensors:  # an output that aliases an input name: keep both distinct
            name = f"{name}:out{s['key']}"
        tensors[name] = TensorInfo(name, tuple(s["shape"]), s["dtype"], spec_quant(s))
        outs.append(name)
    attrs = from_jsonable(m.get("attrs") or {})
    node = Node(m.get("node") or case.name, m["op"], node_inputs, outs, attrs, m.get("source_op", ""), 0)
    return Graph(case.name, m.get("model_format", "tflite"), tensors, [node], graph_inputs, outs,
                 path=str(case.path) if case.path else None)


def feeds_of(case: Case, graph: Graph) -> dict[str, np.ndarray]:
    by_name = {}
    for s in case.meta["inputs"]:
        if s.get("present", True) and not s.get("const"):
            by_name[_tensor_name(s, "input")] = case.arrays[f"input.{s['key']}"]
    return {n: by_name[n] for n in graph.inputs}
