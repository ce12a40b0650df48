"""``ort_overridable_initializers``: ONNX Runtime treats an initializer that the model also lists as a
graph input as a value the caller may override (Graph::CanOverrideInitializer: IR version 4 and up),
hence not as a constant: it does not fold, prepack, fuse or convert to NCHWc anything that reads it.
Older exporters (PyTorch's ``keep_initializers_as_inputs``, many model-zoo files) write every weight
this way, so ORT runs their Convs and MatMuls with run-time weights.

This pass (first in the ORT schemes) reroutes every reader of such an initializer through a
``refinterp.RuntimeInitializer`` node (the value unchanged), so that the passes and kernels after it see
a run-time value as ORT does.  IR 3 models keep their initializers constant, as in ORT.
"""
from __future__ import annotations

import dataclasses

from ..ir import Graph, Node, TensorInfo
from .rewrite import unique_name

OP = "refinterp.RuntimeInitializer"


def ort_overridable_initializers(graph: Graph) -> Graph:
    names = [n for n in graph.metadata.get("initializer_inputs", []) if n in graph.tensors]
    if int(graph.metadata.get("ir_version", 0) or 0) < 4 or not names:
        return graph
    tensors = dict(graph.tensors)
    alias: dict[str, str] = {}
    front: list[Node] = []
    for name in names:
        t = tensors[name]
        new = unique_name(tensors, name + "_runtime")
        tensors[new] = TensorInfo(name=new, shape=t.shape, dtype=t.dtype, quant=t.quant, layout=t.layout)
        alias[name] = new
        front.append(Node(name=new, op=OP, inputs=[name], outputs=[new], source_op="initializer as graph input"))
    nodes = front + [dataclasses.replace(n, inputs=[alias.get(i, i) if i else i for i in n.inputs])
                     if any(i in alias for i in n.inputs) else n for n in graph.nodes]
    return graph.replace(nodes=nodes, tensors=tensors)
