"""Mutations of parsed JSON / YAML documents (manifests, case.json, scheme files, Polygraphy JSON): replace,
delete or duplicate a node of the tree, so the document still parses and reaches the reader's checks."""
from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st

POOL = (None, True, False, 0, 1, -1, 2, 255, 1 << 31, 1 << 40, -(1 << 63), (1 << 64), 1e308, -0.0, float("nan"),
        float("inf"), "", "x", "../../outside.bin", "/etc/hostname", "int4", "object", "O", "float128", "<i8",
        "V8", "S3", "int8", "float32", [], {}, [1 << 31, 1 << 31, 1 << 31], [-1, 3], [0], {"a": 1},
        {"__ndarray__": "eA=="}, {"array": "gASVAA=="}, [[[[[]]]]])
KINDS = ("replace", "delete", "duplicate", "wrap", "rename")

tree_mutation = st.tuples(st.sampled_from(KINDS), st.integers(0, 1 << 16), st.integers(0, len(POOL) - 1))
tree_mutations = st.lists(tree_mutation, min_size=1, max_size=4)


def _nodes(doc: Any, out: list, parent=None, key=None) -> list:
    out.append((parent, key, doc))
    if isinstance(doc, dict):
        for k, v in list(doc.items()):
            _nodes(v, out, doc, k)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            _nodes(v, out, doc, i)
    return out


def mutate_tree(doc: Any, muts: list[tuple]) -> Any:
    doc = copy.deepcopy(doc)
    for kind, i, v in muts:
        nodes = _nodes(doc, [])
        parent, key, node = nodes[i % len(nodes)]
        value = copy.deepcopy(POOL[v])
        if parent is None:  # the root
            doc = value if kind == "replace" else [doc] if kind == "wrap" else doc
            continue
        if kind == "replace":
            parent[key] = value
        elif kind == "delete":
            del parent[key]
        elif kind == "duplicate" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(node))
        elif kind == "wrap":
            parent[key] = [node]
        elif kind == "rename" and isinstance(parent, dict):
            parent[f"{key}_" if v % 2 else str(POOL[v])] = parent.pop(key)
    return doc
