"""Execution order of an ONNX graph's nodes.

The ONNX IR asks for nodes in topological order, but exporters and graph editors do write graphs
that are not (ONNX Runtime sorts them itself and runs them; so does refinterp).  The order kept is
the file's own wherever it is valid: a node runs as soon as its inputs exist, earliest file position
first, so a sorted graph keeps its order exactly.  A node's dependencies include the outer-scope
names its If / Loop / Scan bodies read.
"""
from __future__ import annotations

import heapq

import onnx

from ..errors import ModelError


def _body_reads(n: onnx.NodeProto) -> set[str]:
    """Names a node's subgraphs read that they do not define themselves (outer-scope captures)."""
    out: set[str] = set()
    for a in n.attribute:
        graphs = list(a.graphs) + ([a.g] if a.HasField("g") else [])
        for g in graphs:
            defined = {v.name for v in g.input} | {t.name for t in g.initializer}
            defined |= {o for m in g.node for o in m.output if o}
            for m in g.node:
                out.update(i for i in m.input if i and i not in defined)
                out.update(r for r in _body_reads(m) if r not in defined)
            out.update(o.name for o in g.output if o.name not in defined)
    return out


def topological_order(gp: onnx.GraphProto, available: set[str], names: list[str], where: str) -> list[int]:
    """Node indices of ``gp`` in a valid execution order (module docstring).  ``available``: names
    that exist before any node runs.  A cycle is refused naming one node on it; an input nothing
    produces is left for the caller to report."""
    producer: dict[str, int] = {}
    for idx, n in enumerate(gp.node):
        for o in n.output:
            if o and o not in available:
                producer.setdefault(o, idx)
    waiting = [0] * len(gp.node)
    users: list[list[int]] = [[] for _ in gp.node]
    needs: list[set[int]] = []
    for idx, n in enumerate(gp.node):
        deps = {producer[i] for i in set(n.input) | _body_reads(n) if i in producer}
        needs.append(deps)
        waiting[idx] = len(deps)
        for d in deps:
            users[d].append(idx)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        idx = heapq.heappop(ready)
        order.append(idx)
        for u in users[idx]:
            waiting[u] -= 1
            if waiting[u] == 0:
                heapq.heappush(ready, u)
    if len(order) < len(gp.node):
        left = set(range(len(gp.node))) - set(order)
        seen: list[int] = []
        idx = min(left)
        while idx not in seen:  # every node left waits on another node left: walking back meets a cycle
            seen.append(idx)
            idx = min(needs[idx] & left)
        cycle = seen[seen.index(idx):]
        path = " -> ".join(f"'{names[i]}'" for i in reversed(cycle + [idx]))
        raise ModelError(f"the graph has a cycle: {path} (each node needs the previous one's output)", where)
    return order
