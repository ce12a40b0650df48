"""Candidate arithmetic for one node: single-knob overrides of a base scheme, enumerated from the
scheme schema's declared value sets and from what the built-in schemes use.

A candidate is ``(label, override)`` where ``override`` is a valid scheme ``OP`` mapping (the value
of a ``nodes:`` / ``ops:`` entry), applied on top of the base scheme exactly as a scheme file would
apply it (``Scheme.for_node`` precedence and merge rules), so what is tested is what
``--write-scheme`` writes.

Knobs: ``requant.rounding`` (every form in ``quant.requant.Rounding``, the set ``schema.REQUANT``
accepts), ``requant.rounding64`` (int16 nodes), the vectorised channel-block tail rounding (where a
built-in scheme uses it), ``accumulator`` width x overflow (``schema.ACCUMULATOR``: 32/64 x
wrap/saturate; every candidate is checked against the schema by the unit tests), ``impl`` (the values the node's kernels declare in the registry,
plus every impl a built-in scheme names for the op), the kernel
``variants`` the built-in schemes name, ``compute: float``, and "the node as scheme S resolves it".
"""
from __future__ import annotations

import copy
from typing import Any, Iterable

from ..kernels.registry import get, registered
from ..quant.requant import Rounding
from ..schemes import Scheme, deep_merge

Candidate = tuple[str, dict[str, Any]]



def with_node_override(base: Scheme, node_name: str, override: dict[str, Any]) -> Scheme:
    """``base`` plus ``nodes: {node_name: override}`` (merged over an existing exact entry)."""
    data = copy.deepcopy(base.data)
    nodes = dict(data.get("nodes") or {})
    nodes[node_name] = deep_merge(nodes.get(node_name) or {}, override)
    data["nodes"] = nodes
    return Scheme(base.name, data, base.path, list(base.parents))


def with_op_override(base: Scheme, op: str, override: dict[str, Any]) -> Scheme:
    """``base`` plus ``ops: {op: override}`` merged as a child file's ``ops:`` entry would be."""
    data = copy.deepcopy(base.data)
    ops = dict(data.get("ops") or {})
    ops[op] = deep_merge(ops.get(op) or {}, override)
    data["ops"] = ops
    return Scheme(base.name, data, base.path, list(base.parents))


def declared_impls(session, index: int, base: Scheme) -> list[str]:
    """The ``impl`` names the kernels that may run the node declare (registry), in the order of the
    node's variant list under ``base``."""
    node = session.steps[index].node
    out: list[str] = []
    for v in base.for_node(node, session.graph).variants:
        k = get(node.op, v)
        out += [i for i in (k.impls if k else ()) if i not in out]
    return out


def _scheme_values(schemes: Iterable[Scheme], op: str) -> dict[str, list[Any]]:
    """Values the built-in schemes give to ``impl`` / ``variants`` / channel blocks for ``op``."""
    out: dict[str, list[Any]] = {"impl": [], "variants": [], "channel_block": []}

    def add(key: str, v: Any) -> None:
        if v is not None and v not in out[key]:
            out[key].append(v)

    for s in schemes:
        for v in s.variants:
            add("variants", v)
        st = s.op_settings(op)
        add("impl", st.get("impl"))
        for v in st.get("variants") or []:
            add("variants", v)
        add("channel_block", (st.get("requant") or {}).get("channel_block"))
        dl = st.get("delegate") or {}
        add("impl", dl.get("impl"))
        for v in dl.get("variants") or []:
            add("variants", v)
    return out


def knob_candidates(session, index: int, base: Scheme, schemes: list[Scheme]) -> list[Candidate]:
    """Every single-knob change of ``base`` for node ``index`` of ``session`` (deduplicated by
    the resulting node settings), followed by "as scheme S resolves this node"."""
    graph = session.graph
    node = session.steps[index].node
    choice = base.for_node(node, graph)
    cur = choice.settings
    req = cur.get("requant") or {}
    acc = cur.get("accumulator") or {}
    cands: list[Candidate] = []
    for r in Rounding:
        if r.value != req.get("rounding"):
            cands.append((f"requant.rounding={r.value}", {"requant": {"rounding": r.value}}))
    dtypes = {graph.tensors[t].dtype for t in list(node.inputs) + list(node.outputs) if t and t in graph.tensors}
    if "int16" in dtypes:
        for r in Rounding:
            if not r.is_float and r.value != req.get("rounding64"):
                cands.append((f"requant.rounding64={r.value}", {"requant": {"rounding64": r.value}}))
    seen_vals = _scheme_values(schemes, node.op)
    for n in seen_vals["channel_block"]:
        for r in Rounding:
            if not r.is_float:
                cands.append((f"requant.channel_block={n},block_rounding={r.value}",
                              {"requant": {"channel_block": n, "block_rounding": r.value}}))
    for bits in (32, 64):
        for ov in ("wrap", "saturate"):
            if (bits, ov) != (acc.get("bits"), acc.get("overflow")):
                cands.append((f"accumulator={bits}-bit {ov}", {"accumulator": {"bits": bits, "overflow": ov}}))
    impls = declared_impls(session, index, base)
    for v in impls + [i for i in seen_vals["impl"] if i not in impls]:
        if v != cur.get("impl"):
            cands.append((f"impl={v}", {"impl": v}))
    if cur.get("compute") != "float":
        cands.append(("compute=float", {"compute": "float"}))
    have = {v for (o, v) in registered() if o == node.op}
    current_variant = session.steps[index].kernel.variant if index < len(session.steps) else None
    for v in seen_vals["variants"]:
        if v in have and v != current_variant and v != "float":
            cands.append((f"variants=[{v}]", {"variants": [v]}))
    for s in schemes:
        if s.name == base.name:
            continue
        ch = s.for_node(node, graph)
        over = {k: v for k, v in ch.settings.items()}
        over["variants"] = list(ch.variants)
        cands.append((f"as {s.name}", over))
    return _dedupe(cands, base, node, graph)


def _dedupe(cands: list[Candidate], base: Scheme, node, graph) -> list[Candidate]:
    """Drop candidates whose resolved node choice equals the base's or an earlier candidate's."""
    def key(ch) -> str:
        return repr((ch.variants, sorted((k, repr(v)) for k, v in ch.settings.items())))

    seen = {key(base.for_node(node, graph))}
    out: list[Candidate] = []
    for label, over in cands:
        k = key(with_node_override(base, node.name, over).for_node(node, graph))
        if k not in seen:
            seen.add(k)
            out.append((label, over))
    return out
