"""``ort_const_fold``: ONNX Runtime's constant folding (onnxruntime/core/optimizer/constant_folding.cc,
ORT_ENABLE_BASIC and up), for the data-movement ops exporters put between a weight and its consumer.

A node of an op below whose inputs are all constants -- initializers, Constant outputs, values folded
before it, or, inside an If / Loop / Scan body, the enclosing graph's constants (ORT folds with outer
scope initializers too) -- and whose outputs are not graph outputs is evaluated once and removed; its
outputs become constants.  That matters beyond speed: ORT prepacks constant weights, so a weight an
exporter transposed, sliced and re-concatenated (PyTorch's LSTM gate reordering, a Transpose before a
MatMul) runs the prepacked kernel order on ORT, and refinterp's kernels choose that order only when
they see a constant.  Only exact data movement is folded here (the values cannot depend on whose
kernel computes them); arithmetic on constants is left to run as it is.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..ir import Graph, Node, TensorInfo
from ..kernels.registry import Delegate, PrepareContext, SettingsView, get

FOLDABLE = frozenset({"Identity", "Unsqueeze", "Squeeze", "Reshape", "Transpose", "Flatten", "Concat", "Slice",
                      "Gather", "Split"})


def _evaluate(node: Node, infos: list[TensorInfo | None], outs: list[TensorInfo]) -> list[np.ndarray] | None:
    k = get(node.op, "float")
    if k is None:
        return None
    try:
        plan = k.prepare(node, PrepareContext(node, infos, outs, SettingsView({})))
        while isinstance(plan, Delegate):
            k, plan = plan.kernel, plan.plan
        y = k.run(plan, *[None if i is None else i.const for i in infos])
    except Exception:  # an input the kernel refuses: leave the node to fail (or not) at run time
        return None
    ys = list(y) if isinstance(y, (tuple, list)) else [y]
    return [np.asarray(v) for v in ys] if len(ys) >= len([o for o in node.outputs if o]) else None


def _fold(graph: Graph, outer: dict[str, TensorInfo]) -> Graph:
    tensors = dict(graph.tensors)
    known = dict(outer)
    known.update({n: t for n, t in tensors.items() if t.const is not None})
    outputs = set(graph.outputs)
    nodes: list[Node] = []
    changed = False
    for n in graph.nodes:
        sub = {k: v for k, v in n.attrs.items() if isinstance(v, Graph)}
        if sub:
            new_attrs = dict(n.attrs)
            for k, g in sub.items():
                g2 = _fold(g, known)
                if g2 is not g:
                    new_attrs[k] = g2
            if any(new_attrs[k] is not g for k, g in sub.items()):
                n, changed = dataclasses.replace(n, attrs=new_attrs), True
        ins = [i for i in n.inputs if i]
        if n.op in FOLDABLE and ins and all(i in known for i in ins) and not any(o in outputs for o in n.outputs):
            infos = [known.get(i) if i else None for i in n.inputs]
            outs = [tensors.get(o) or TensorInfo(o, None, "float32") for o in n.outputs if o]
            vals = _evaluate(n, infos, outs)
            if vals is not None:
                for o, v in zip([o for o in n.outputs if o], vals):
                    t = tensors.get(o)
                    info = TensorInfo(o, tuple(int(d) for d in v.shape), str(v.dtype), const=v) if t is None else \
                        dataclasses.replace(t, shape=tuple(int(d) for d in v.shape), dtype=str(v.dtype), const=v)
                    tensors[o] = known[o] = info
                changed = True
                continue
        nodes.append(n)
    return graph.replace(nodes=nodes, tensors=tensors) if changed else graph


def ort_const_fold(graph: Graph) -> Graph:
    return _fold(graph, {})
