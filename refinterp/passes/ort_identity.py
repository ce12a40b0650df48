"""``ort_identity_elim``: ONNX Runtime's level-1 EliminateIdentity (onnxruntime/core/optimizer/
identity_elimination.cc) and, for inference, EliminateDropout: the node goes, its consumers read its
input.  No value changes, but the fusions and layout rewrites that follow see through it as ORT's do:
paddle2onnx puts an Identity after almost every Add, which otherwise ends an NCHWc chain and blocks
the Conv/Sum fusions ORT makes (ort_nchwc.py).

An Identity (or a Dropout whose mask output is unused and whose ratio / training_mode inputs are not
run-time training switches) is removed when its output is not a graph output; when it is, the
producer's output is renamed to it instead, provided that output has no other consumer and is not a
graph output itself (ORT's relaxed condition).  Names used inside If / Loop / Scan bodies are left
alone (an outer-scope reference would need renaming there too).

Then the one rewrite of ORT's level-1 transpose optimizer that applies whatever the cost
(onnx_transpose_optimization.cc HandleTranspose): a Transpose of a Transpose becomes one Transpose
of the composed permutation, or nothing when that is the identity; the inner one goes when nothing
else reads it.  (The optimizer's other moves -- pushing Transposes through element-wise, reduce and
shape ops by its cost model -- are not modelled.)
"""
from __future__ import annotations

import dataclasses

from ..ir import Graph, Node


def _subgraph_names(graph: Graph) -> set[str]:
    names: set[str] = set()
    for n in graph.nodes:
        for v in n.attrs.values():
            if isinstance(v, Graph):
                for m in v.nodes:
                    names.update(i for i in m.inputs if i)
                names |= _subgraph_names(v)
    return names


def _removable(n: Node) -> bool:
    if n.op == "Identity":
        return len(n.inputs) == 1 and bool(n.inputs[0]) and len([o for o in n.outputs if o]) == 1
    if n.op == "Dropout":  # inference: training_mode absent (ORT requires it to be absent or a constant false)
        return bool(n.inputs and n.inputs[0]) and len(n.inputs) < 3 and not any(n.outputs[1:]) \
            and bool(n.outputs and n.outputs[0])
    return False


def ort_identity_elim(graph: Graph) -> Graph:
    outer = _subgraph_names(graph)  # the rewrites below rename no tensor a body reads
    return _compose_transposes(_eliminate(graph, outer), outer)


def _perm(graph: Graph, n: Node) -> list[int] | None:
    perm = n.attr("perm")
    if perm is None:
        t = graph.tensors.get(n.inputs[0])
        return None if t is None or t.shape is None else list(range(len(t.shape)))[::-1]
    return [int(p) for p in perm]


def _compose_transposes(graph: Graph, outer: set[str]) -> Graph:
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    rename: dict[str, str] = {}
    replace: dict[str, Node] = {}
    removed: set[str] = set()
    for n in graph.nodes:
        if n.op != "Transpose" or not n.inputs or n.outputs[0] in outer or n.inputs[0] in outer:
            continue
        inner = producer.get(n.inputs[0])
        if inner is None or inner.op != "Transpose" or inner.name in removed:
            continue
        p1, p2 = _perm(graph, inner), _perm(graph, n)
        if p1 is None or p2 is None or len(p1) != len(p2):
            continue
        composed = [p1[i] for i in p2]
        if composed == list(range(len(composed))):
            if n.outputs[0] in graph.outputs:
                continue
            rename[n.outputs[0]] = inner.inputs[0]
            removed.add(n.name)
        else:
            replace[n.name] = dataclasses.replace(n, inputs=[inner.inputs[0]], attrs={**n.attrs, "perm": composed})
    if not rename and not replace:
        return graph
    nodes = []
    for n in graph.nodes:
        if n.name in removed:
            continue
        n = replace.get(n.name, n)
        ins = [rename.get(i, i) if i else i for i in n.inputs]
        nodes.append(dataclasses.replace(n, inputs=ins) if ins != n.inputs else n)
    used = {i for n in nodes for i in n.inputs if i} | set(graph.outputs) | outer
    nodes = [n for n in nodes if not (n.op == "Transpose" and n.outputs[0] not in used)]
    return graph.replace(nodes=nodes)


def _eliminate(graph: Graph, outer: set[str]) -> Graph:
    outputs = set(graph.outputs)
    producer = {o: n for n in graph.nodes for o in n.outputs if o}
    consumers = graph.consumers()
    rename: dict[str, str] = {}  # tensor -> the tensor its readers read instead
    out_rename: dict[str, str] = {}  # producer output -> the graph output name it takes
    drop: set[int] = set()
    for k, n in enumerate(graph.nodes):
        if not _removable(n):
            continue
        src, out = n.inputs[0], n.outputs[0]
        src = rename.get(src, src)
        if out in outer or src in outer:
            continue
        if out not in outputs:
            rename[out] = src
            drop.add(k)
        elif src in producer and src not in outputs and len(consumers.get(src, [])) == 1 \
                and src not in out_rename and src not in graph.inputs:
            out_rename[src] = out
            drop.add(k)
    if not drop:
        return graph
    nodes = []
    for k, n in enumerate(graph.nodes):
        if k in drop:
            continue
        ins = [rename.get(i, i) if i else i for i in n.inputs]
        outs = [out_rename.get(o, o) if o else o for o in n.outputs]
        if ins != n.inputs or outs != n.outputs:
            n = dataclasses.replace(n, inputs=ins, outputs=outs)
        nodes.append(n)
    return graph.replace(nodes=nodes)
