"""``refinterp inspect MODEL [--scheme S]``: the graph, and with a scheme each node's resolved plan."""
from __future__ import annotations

import json

import numpy as np

from ..kernels.prepared import plan_fields


def register(sub) -> None:
    p = sub.add_parser("inspect", help="print a model's graph (and each node's plan under a scheme)")
    p.add_argument("model")
    p.add_argument("--scheme", help="resolve every node under this scheme and show its plan")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=run)


def _short(v, limit: int = 6):
    if isinstance(v, np.ndarray):
        flat = v.ravel()
        if flat.size <= limit:
            return flat.tolist()
        return flat[:limit].tolist() + [f"... ({flat.size} values)"]
    if isinstance(v, (np.integer, np.floating)):
        return v.item()
    if isinstance(v, (list, tuple)) and len(v) > limit:
        return list(v[:limit]) + [f"... ({len(v)} values)"]
    if hasattr(v, "name") and hasattr(v, "value") and not isinstance(v, (str, bytes)):  # enums
        return v.name
    return v


def _short_name(name: str, width: int = 40) -> str:
    """Converter names are long (';'-joined): keep both ends; --json holds the full names."""
    if len(name) <= width:
        return name
    head = width // 2 - 1
    return name[:head] + "…" + name[-(width - head - 1):]


def describe_plan(plan) -> dict:
    return {k: _short(v) for k, v in plan_fields(plan).items() if not callable(v)}


def _quant(info) -> str:
    q = info.quant if info is not None else None
    if q is None:
        return ""
    if q.scale.size == 1:
        return f"s={float(q.scale.ravel()[0]):.6g} zp={int(q.zero_point.ravel()[0])}"
    return f"per-axis[{q.axis}] x{q.scale.size}"


def run(args) -> int:
    from .. import Session, load

    g = load(args.model)
    # under a scheme: its graph (after its passes), every node's plan, and the nodes it does not model
    sess = Session(g, scheme=args.scheme, unmodelled=True) if args.scheme else None
    if sess is not None:
        g = sess.graph
    if args.json:
        doc = {"model": g.path, "format": g.format, "inputs": g.inputs, "outputs": g.outputs, "nodes": []}
        for i, n in enumerate(g.nodes):
            e = {"index": i, "name": n.name, "op": n.op, "source_op": n.source_op, "inputs": n.inputs,
                 "outputs": n.outputs, "attrs": {k: _short(v) for k, v in n.attrs.items()}}
            if sess:
                st = sess.steps[i]
                e["variant"] = st.kernel.variant
                e["plan"] = describe_plan(st.plan)
            doc["nodes"].append(e)
        if sess:
            doc["unmodelled"] = dict(sess.unmodelled)
        print(json.dumps(doc, indent=1, default=str))
        return 0
    from rich.console import Console
    from rich.table import Table

    con = Console()
    if not con.is_terminal:  # pipes and logs: no 80-column squeeze
        con = Console(width=180)
    con.print(f"[bold]{g.path}[/] ({g.format}) · {len(g.nodes)} nodes · {len(g.tensors)} tensors")
    for kind, names in (("input", g.inputs), ("output", g.outputs)):
        for name in names:
            t = g.tensors[name]
            con.print(f"  {kind} {name}: {t.dtype} {list(t.shape) if t.shape is not None else '?'} {_quant(t)}")
    t = Table(show_lines=bool(sess))
    for c in ("#", "node", "op", "source op", "output", "quant") + (("variant", "plan"),)[0] * bool(sess):
        t.add_column(c, overflow="fold", no_wrap=c in ("#", "node", "op", "source op", "variant"))
    for i, n in enumerate(g.nodes):
        out = g.tensors.get(n.outputs[0]) if n.outputs else None
        shape = list(out.shape) if out is not None and out.shape is not None else ""
        row = [str(i), _short_name(n.name), n.op, n.source_op, f"{out.dtype if out else ''}{shape}", _quant(out)]
        if sess:
            st = sess.steps[i]
            plan = describe_plan(st.plan)
            row += [st.kernel.variant, "\n".join(f"{k}: {v}" for k, v in plan.items())]
        t.add_row(*row)
    con.print(t)
    if sess is not None and sess.unmodelled:
        con.print(f"[yellow]{len(sess.unmodelled)} node(s) not modelled under {sess.scheme.name}:[/]")
        for name, why in sess.unmodelled.items():
            con.print(f"  {name}: {why}", markup=False, highlight=False)
    return 0
