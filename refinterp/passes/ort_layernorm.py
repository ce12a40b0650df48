"""ONNX Runtime's LayerNormFusion and SkipLayerNormFusion (onnxruntime/core/optimizer/
layer_norm_fusion.cc, skip_layer_norm_fusion.cc; level 1 from opset 17, else 2, and level 2): the
exporters' decomposed layer norm becomes one LayerNormalization, and a residual Add before a
LayerNormalization one com.microsoft.SkipLayerNormalization -- kernels that round differently from
the unfused graph (kernels/onnxruntime/float_layernorm.py).  Measured with onnxruntime 1.32.0
(tests/conformance/test_ort_float_layernorm.py).

``ort_layernorm_fusion``::

    x -> ReduceMean -> Sub(x, mean) -> Pow -> ReduceMean -> Add(., eps) -> Sqrt -> Div(d, sqrt) -> Mul -> Add

(or two Subs of x and the mean, one feeding Pow and one Div, as older PyTorch exported).  ORT's
conditions, kept as they are (its quirks included): the first ReduceMean feeds only the Sub(s) and
no graph output; every inner output has exactly its pattern consumers and is not a graph output;
the Pow's exponent is not checked; both ReduceMeans reduce the same single last axis (attribute or
constant input; a positive axis needs the rank); the scale is the Mul input of rank 1 and the bias
the final Add input of rank 1 (the last such input), of equal length; epsilon is the Add's *second*
input when it is a float32 constant, else 1e-5.  The LayerNormalization gets axis = the reduced axis
(negative).  Not reproduced: ORT's variants with Cast nodes (a leading Cast, a Cast before the Pow or
after the Div): such graphs stay unfused here.

``ort_simplified_layernorm_fusion`` (RMS norm; ORT runs it after LayerNormFusion, so a layer norm's
own Pow .. Div chain is taken by the first): see the function.

``ort_skip_layernorm_fusion``: a LayerNormalization whose input is Add1 = Add(a, b) of two 3-D
tensors of equal shape (the batch may be symbolic on both), Add1 feeding only the norm, becomes
SkipLayerNormalization(a, b, scale, bias) -- and when one operand of Add1 is itself Add2(c, C) with
a constant 1-D C of the last dimension's length, fed only into Add1, that Add is folded in as the
Skip's bias (first operand first, as ORT tries).  Epsilon is the norm's.  ORT does not check the
norm's axis (nor does this pass).
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from .rewrite import splice

_FLOATS = ("float32", "float16", "float64")


def _float(graph: Graph, name: str) -> bool:
    t = graph.tensors.get(name)
    return t is not None and t.dtype in _FLOATS and t.quant is None


def _edges(graph: Graph, consumers, name: str, n: int) -> bool:
    """ORT's CheckOutputEdges: exactly ``n`` consuming edges and not a graph output."""
    return len(consumers.get(name, [])) == n and name not in graph.outputs


def _first(nodes, op: str) -> Node | None:
    return next((m for m in nodes if m.op == op), None)


def _parent(producer, node: Node, op: str) -> Node | None:
    """ORT's FirstParentByType: the first input's producer of type ``op``."""
    return _first([producer[i] for i in node.inputs if i in producer], op)


def _axes(graph: Graph, node: Node) -> list[int] | None:
    if "axes" in node.attrs and node.attrs["axes"] is not None:
        return [int(a) for a in np.ravel(node.attrs["axes"])]
    if len(node.inputs) > 1 and node.inputs[1]:
        c = graph.const(node.inputs[1])
        return None if c is None else [int(a) for a in np.ravel(c)]
    return None


def _last_axes(axes: list[int] | None, rank: int | None) -> list[int] | None:
    """ORT's CheckAxesOnReduceMean: consecutive axes that end at the last one, made negative."""
    if not axes:
        return None
    a = sorted(axes)
    if a[-1] > 0:
        if rank is None:
            return None
        a = sorted(v - rank if v >= 0 else v for v in a)
    if any(a[i] != a[i - 1] + 1 for i in range(1, len(a))) or a[-1] != -1:
        return None
    return a


def _rank1(graph: Graph, names) -> str | None:
    out = None
    for name in names:
        t = graph.tensors.get(name)
        if t is not None and t.shape is not None and len(t.shape) == 1:
            out = name
    return out


def ort_layernorm_fusion(graph: Graph) -> Graph:
    consumers = graph.consumers()
    producer = graph.producer()
    fused: dict[str, list[Node]] = {}
    drop: set[str] = set()
    for rm in graph.nodes:
        if rm.op != "ReduceMean" or rm.name in drop or not rm.inputs or not _float(graph, rm.inputs[0]):
            continue
        x, mean = rm.inputs[0], rm.outputs[0]
        users = consumers.get(mean, [])
        if len(users) not in (1, 2) or mean in graph.outputs or any(u.op != "Sub" for u in users):
            continue
        subs = users
        if any(len(s.inputs) != 2 or next((i for i in s.inputs if i != mean), None) != x for s in subs):
            continue
        sub = subs[0]
        if not _edges(graph, consumers, sub.outputs[0], 2 if len(subs) == 1 else 1):
            continue
        div = _first(consumers.get(sub.outputs[0], []), "Div")
        if len(subs) == 2 and div is None:
            div = _first(consumers.get(subs[1].outputs[0], []), "Div")
        if div is None or not _edges(graph, consumers, div.outputs[0], 1):
            continue
        sqrt = _parent(producer, div, "Sqrt")
        if sqrt is None or not _edges(graph, consumers, sqrt.outputs[0], 1) or sqrt.inputs[0] not in producer:
            continue
        add2 = producer[sqrt.inputs[0]]
        if add2.op != "Add" or not _edges(graph, consumers, add2.outputs[0], 1):
            continue
        rm2 = _parent(producer, add2, "ReduceMean")
        if rm2 is None or not _edges(graph, consumers, rm2.outputs[0], 1) or rm2.inputs[0] not in producer:
            continue
        pw = producer[rm2.inputs[0]]
        if pw.op != "Pow" or not _edges(graph, consumers, pw.outputs[0], 1):
            continue
        if _parent(producer, pw, "Sub") not in subs:
            continue
        mul = consumers[div.outputs[0]][0]
        if mul.op != "Mul" or not _edges(graph, consumers, mul.outputs[0], 1):
            continue
        last = consumers[mul.outputs[0]][0]
        if last.op != "Add":
            continue
        rank = len(graph.tensors[x].shape) if graph.tensors[x].shape is not None else None
        a1, a2 = _last_axes(_axes(graph, rm), rank), _last_axes(_axes(graph, rm2), rank)
        if a1 is None or a1 != a2 or len(a1) != 1:
            continue
        scale, bias = _rank1(graph, mul.inputs), _rank1(graph, last.inputs)
        if scale is None or bias is None or graph.tensors[scale].shape != graph.tensors[bias].shape:
            continue
        chain = [rm, *subs, div, sqrt, add2, rm2, pw, mul, last]
        typed = [*subs, div, sqrt, add2, pw, mul, last]  # ORT checks every input's type (rm, rm2: the data)
        if any(n.name in drop for n in chain) or not _float(graph, rm2.inputs[0]) or \
                not all(_float(graph, i) for n in typed for i in n.inputs if i):
            continue
        ln = Node(name=rm.name + "_layernorm", op="LayerNormalization", inputs=[x, scale, bias],
                  outputs=[last.outputs[0]], attrs={"axis": a1[0], "epsilon": _epsilon(graph, add2), "stash_type": 1},
                  source_op="ReduceMean+Sub+Pow+ReduceMean+Add+Sqrt+Div+Mul+Add (LayerNormFusion)", index=last.index)
        fused[last.name] = [ln]
        drop.update(n.name for n in chain if n is not last)
    return splice(graph, fused, drop)


def ort_simplified_layernorm_fusion(graph: Graph) -> Graph:
    """ORT's SimplifiedLayerNormFusion (after LayerNormFusion): x -> Pow -> ReduceMean -> Add(., eps)
    -> Sqrt -> Div(x, sqrt) -> Mul(., scale) becomes SimplifiedLayerNormalization(x, scale).  ORT's
    conditions: each of Pow .. Div has one consumer and no graph output (the Mul need not); the Div's
    numerator is the Pow's base; the Pow exponent is not checked; a Cast between Div and Mul stops
    the fusion on the CPU; one reduced axis, the last; the scale is the Mul's last rank-1 input;
    epsilon as for LayerNormFusion."""
    consumers = graph.consumers()
    fused: dict[str, list[Node]] = {}
    drop: set[str] = set()
    for pw in graph.nodes:
        if pw.op != "Pow" or pw.name in drop or not all(_float(graph, i) for i in pw.inputs if i) or \
                not _edges(graph, consumers, pw.outputs[0], 1):
            continue
        x = pw.inputs[0]
        rm = _first(consumers.get(pw.outputs[0], []), "ReduceMean")
        if rm is None or not _edges(graph, consumers, rm.outputs[0], 1) or not _float(graph, rm.inputs[0]):
            continue
        add = _first(consumers.get(rm.outputs[0], []), "Add")
        if add is None or not _edges(graph, consumers, add.outputs[0], 1) or \
                not all(_float(graph, i) for i in add.inputs if i):
            continue
        sqrt = _first(consumers.get(add.outputs[0], []), "Sqrt")
        if sqrt is None or not _edges(graph, consumers, sqrt.outputs[0], 1):
            continue
        div = _first(consumers.get(sqrt.outputs[0], []), "Div")
        if div is None or not _edges(graph, consumers, div.outputs[0], 1) or div.inputs[0] != x or \
                not all(_float(graph, i) for i in div.inputs if i):
            continue
        mul = consumers[div.outputs[0]][0]
        if mul.op != "Mul" or not all(_float(graph, i) for i in mul.inputs if i):
            continue
        rank = len(graph.tensors[x].shape) if graph.tensors[x].shape is not None else None
        axes = _last_axes(_axes(graph, rm), rank)
        scale = _rank1(graph, mul.inputs)
        chain = [pw, rm, add, sqrt, div, mul]
        if axes is None or len(axes) != 1 or scale is None or any(n.name in drop for n in chain):
            continue
        node = Node(name=pw.name + "_rmsnorm", op="SimplifiedLayerNormalization", inputs=[x, scale],
                    outputs=[mul.outputs[0]], attrs={"axis": axes[0], "epsilon": _epsilon(graph, add), "stash_type": 1},
                    source_op="Pow+ReduceMean+Add+Sqrt+Div+Mul (SimplifiedLayerNormFusion)", index=mul.index)
        fused[mul.name] = [node]
        drop.update(n.name for n in chain if n is not mul)
    return splice(graph, fused, drop)


def _epsilon(graph: Graph, add: Node) -> float:
    """The Add's second input when it is a float32 constant, else 1e-5 (ORT's fusions)."""
    eps = graph.const(add.inputs[1]) if len(add.inputs) > 1 and add.inputs[1] else None
    ok = eps is not None and np.asarray(eps).dtype == np.float32 and np.size(eps)
    return float(np.asarray(eps).ravel()[0]) if ok else 1e-5


def _dims(graph: Graph, name: str):
    t = graph.tensors.get(name)
    return None if t is None or t.shape is None else tuple(t.shape)


def _first_add_ok(graph: Graph, consumers, add: Node) -> bool:
    """ORT's CheckFirstAdd: one consumer, two 3-D inputs of equal dims (dim 0 may be unknown on both)."""
    if len(add.inputs) != 2 or len(consumers.get(add.outputs[0], [])) != 1 or \
            not all(_float(graph, i) for i in add.inputs):
        return False
    s1, s2 = _dims(graph, add.inputs[0]), _dims(graph, add.inputs[1])
    if s1 is None or s2 is None or len(s1) != 3 or len(s2) != 3:
        return False
    return (s1[0] == s2[0]) and all(a is not None and a == b for a, b in zip(s1[1:], s2[1:]))


def _second_add_ok(graph: Graph, consumers, add: Node) -> bool:
    """ORT's CheckSecondAdd: one consumer, a 3-D first input and a constant 1-D second one of its
    last dimension's length."""
    if len(add.inputs) != 2 or len(consumers.get(add.outputs[0], [])) != 1 or graph.const(add.inputs[1]) is None \
            or not all(_float(graph, i) for i in add.inputs):
        return False
    s1, s2 = _dims(graph, add.inputs[0]), _dims(graph, add.inputs[1])
    return s1 is not None and s2 is not None and len(s1) == 3 and len(s2) == 1 and s1[2] is not None \
        and s1[2] == s2[0]


def ort_skip_layernorm_fusion(graph: Graph) -> Graph:
    consumers = graph.consumers()
    producer = graph.producer()
    fused: dict[str, list[Node]] = {}
    drop: set[str] = set()
    for ln in graph.nodes:
        if ln.op != "LayerNormalization" or ln.name in drop or not all(_float(graph, i) for i in ln.inputs if i):
            continue
        add1 = producer.get(ln.inputs[0])
        if add1 is None or add1.op != "Add" or add1.name in drop or add1.outputs[0] in graph.outputs or \
                not _first_add_ok(graph, consumers, add1):
            continue
        a, b, extra, add2 = add1.inputs[0], add1.inputs[1], [], None
        for k in (0, 1):  # ORT's format 1 (the first operand), then format 2
            cand = producer.get(add1.inputs[k])
            if cand is not None and cand.op == "Add" and cand.name not in drop and \
                    cand.outputs[0] not in graph.outputs and _second_add_ok(graph, consumers, cand):
                add2 = cand
                if k == 0:
                    a = cand.inputs[0]
                else:
                    b = cand.inputs[0]
                extra = [cand.inputs[1]]
                break
        beta = ln.inputs[2] if len(ln.inputs) > 2 else ""
        skip = Node(name=ln.name + "_skip", op="com.microsoft.SkipLayerNormalization",
                    inputs=[a, b, ln.inputs[1], beta] + extra, outputs=list(ln.outputs),
                    attrs={"epsilon": float(ln.attrs.get("epsilon", 1e-5))},
                    source_op="Add+LayerNormalization (SkipLayerNormFusion)", index=ln.index)
        fused[ln.name] = [skip]
        drop.update(n.name for n in (add1, add2) if n is not None)
    return splice(graph, fused, drop)
