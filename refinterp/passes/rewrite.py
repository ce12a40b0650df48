"""Helpers of the graph passes that rewrite node groups: new tensor names, new constants, and the
node list rebuilt around the replaced groups."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, TensorInfo


def unique_name(tensors: dict, base: str) -> str:
    """``base``, or ``base`` with underscores appended, not yet a key of ``tensors``."""
    name = base
    while name in tensors:
        name += "_"
    return name


def add_const(tensors: dict, base: str, value: np.ndarray) -> str:
    """Registers ``value`` as a constant tensor under a fresh name (``unique_name``); returns it."""
    name = unique_name(tensors, base)
    tensors[name] = TensorInfo(name=name, shape=tuple(np.shape(value)), dtype=str(np.asarray(value).dtype),
                               const=value)
    return name


def splice(graph: Graph, replace: dict[str, list[Node]], drop: set[str], **changes) -> Graph:
    """``graph`` with the nodes named in ``drop`` removed and each node named in ``replace`` swapped
    for its list of nodes, in place (the original order otherwise); ``changes``: other Graph fields
    (e.g. ``tensors``).  The graph itself when nothing is replaced or dropped."""
    if not replace and not drop:
        return graph
    nodes: list[Node] = []
    for n in graph.nodes:
        if n.name not in drop:
            nodes.extend(replace.get(n.name, [n]))
    return graph.replace(nodes=nodes, **changes)
