"""``ort_gelu_fusion``: ONNX Runtime's GeluFusion (onnxruntime/core/optimizer/gelu_fusion.cc; level 1
from opset 20, where ONNX has Gelu, else level 2 into com.microsoft.Gelu -- the same kernel).

The exporters' erf form of GELU on float32 tensors::

    pattern 1:  Mul(Mul(x, 0.5), Add(Erf(Div(x, sqrt 2)), 1))
    pattern 2:  Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)

(operands of Add / Mul in either order) becomes one ``Gelu`` node (approximate "none"), which ORT
computes as (0.5 x) (erf(x / sqrt 2 as x * f32(1/sqrt 2)) + 1) (kernels/onnxruntime/float_erf.py):
the fused and the unfused graph round differently.  Conditions as ORT's: the divisor is a constant
scalar within rtol 1e-5 of sqrt 2 (or of 1.4142099618911743), the added and multiplied constants of
1 and 0.5 likewise; the Div, Erf and Add outputs (and pattern 1's x * 0.5, pattern 2's inner Mul)
each feed exactly one node and are not graph outputs.  Measured with onnxruntime 1.32.0
(tests/conformance/test_ort_float_activation.py).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from .rewrite import splice

_SQRT2 = (float(np.float32(1.4142099618911743)), float(np.float32(np.sqrt(2.0))))


def _scalar_const(graph: Graph, name: str, want: tuple[float, ...]) -> bool:
    t = graph.tensors.get(name) if name else None
    if t is None or t.const is None or t.dtype != "float32" or np.size(t.const) != 1 or np.ndim(t.const) > 1:
        return False
    v = float(np.asarray(t.const, np.float32).ravel()[0])
    return any(abs(v - w) <= 1e-8 + 1e-5 * abs(w) for w in want)


def _only_user(graph: Graph, consumers, name: str):
    users = consumers.get(name, [])
    if len(users) != 1 or name in graph.outputs:
        return None
    return users[0]


def _other(n: Node, name: str) -> str | None:
    if len(n.inputs) != 2 or n.inputs[0] == n.inputs[1] or name not in n.inputs:
        return None
    return n.inputs[1] if n.inputs[0] == name else n.inputs[0]


def _float(graph: Graph, name: str) -> bool:
    t = graph.tensors.get(name)
    return t is not None and t.dtype == "float32" and t.quant is None


def ort_gelu_fusion(graph: Graph) -> Graph:
    consumers = graph.consumers()
    producer = graph.producer()
    fused: dict[str, list[Node]] = {}   # name of the node the Gelu replaces -> [the Gelu]
    drop: set[str] = set()
    for div in graph.nodes:
        if div.op != "Div" or len(div.inputs) != 2 or div.name in drop or not _float(graph, div.inputs[0]):
            continue
        x = div.inputs[0]
        if not _scalar_const(graph, div.inputs[1], _SQRT2):
            continue
        erf = _only_user(graph, consumers, div.outputs[0])
        if erf is None or erf.op != "Erf":
            continue
        add = _only_user(graph, consumers, erf.outputs[0])
        if add is None or add.op != "Add" or not _scalar_const(graph, _other(add, erf.outputs[0]) or "", (1.0,)):
            continue
        mul = consumers.get(add.outputs[0], [])
        if len(mul) != 1 or add.outputs[0] in graph.outputs or mul[0].op != "Mul":
            continue
        mul = mul[0]
        other = _other(mul, add.outputs[0])
        if other is None:
            continue
        half = producer.get(other)
        if half is not None and half.op == "Mul":  # pattern 1: Mul(x, 0.5) feeds the last Mul
            if _only_user(graph, consumers, half.outputs[0]) is None or \
                    not _scalar_const(graph, _other(half, x) or "", (0.5,)):
                continue
            chain, last = [div, erf, add, half, mul], mul
        else:  # pattern 2: Mul(x, add) then Mul(., 0.5)
            if other != x:
                continue
            last = _only_user(graph, consumers, mul.outputs[0])
            if last is None or last.op != "Mul" or not _scalar_const(graph, _other(last, mul.outputs[0]) or "", (0.5,)):
                continue
            chain = [div, erf, add, mul, last]
        if any(n.name in drop for n in chain):
            continue
        gelu = Node(name=div.name + "_gelu", op="Gelu", inputs=[x], outputs=[last.outputs[0]],
                    attrs={"approximate": "none"}, source_op="Div+Erf+Add+Mul+Mul (GeluFusion)", index=div.index)
        fused[last.name] = [gelu]
        drop.update(n.name for n in chain if n is not last)
    return splice(graph, fused, drop)
