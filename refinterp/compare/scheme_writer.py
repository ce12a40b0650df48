"""``refinterp diff --explain --write-scheme F``: a scheme YAML that ``extends:`` the best built-in
scheme with the overrides that reproduce the dump.

For each op whose nodes the best scheme does not all reproduce, the first single-knob candidate
(in ``explain_candidates`` order) that makes *every* re-run node of that op exact, including those
already exact, becomes an ``ops:`` override; otherwise each unreproduced node gets its own first
exact candidate under ``nodes:``.  Nodes that no candidate reproduces are left alone (reported as
unexplained).  The file is then loaded back with ``load_checked`` and every re-run node is run under
it: ``verified`` says whether every tensor the explanation reproduced is exact under the file.
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import yaml

from ..errors import RefinterpError
from ..runtime import Session
from ..scheme_check import load_checked
from .explain import Explanation
from .explain_candidates import with_op_override
from .explain_eval import Runner


def _exact(sc, outs) -> bool:
    return sc is not None and all(o in sc and sc[o].exact for o in outs)


def suggest(expl: Explanation) -> dict[str, Any]:
    """The override mappings ``{"ops": {...}, "nodes": {...}}`` and what each one fixes."""
    if expl.best is None:
        return {"ops": {}, "nodes": {}, "fixes": []}
    br = expl.schemes[expl.best]
    runner = Runner(br.session, expl.float_tol)
    failing: dict[str, list] = {}
    for case in expl.cases:
        if case.node in expl.knobs:
            failing.setdefault(case.op, []).append(case)
    ops: dict[str, Any] = {}
    nodes: dict[str, Any] = {}
    fixes: list[dict[str, Any]] = []
    for op, bad in failing.items():
        exact_sets = [[(lbl, over) for lbl, over, sc in expl.knobs[c.node] if _exact(sc, c.outs)] for c in bad]
        common = [lo for lo in exact_sets[0] if all(lo in s for s in exact_sets[1:])] if exact_sets else []
        chosen = None
        for lbl, over in common:
            trial = with_op_override(br.scheme, op, over)
            ok = True
            for c in expl.cases:
                if c.op != op:
                    continue
                try:
                    step = br.session.prepare_node(c.index, trial)
                except RefinterpError:
                    ok = False
                    break
                if not _exact(runner.run(c, step), c.outs):
                    ok = False
                    break
            if ok:
                chosen = (lbl, over)
                break
        if chosen is not None:
            ops[op] = chosen[1]
            fixes.append({"op": op, "variant": chosen[0], "nodes": [c.node for c in bad]})
            continue
        for c, exact in zip(bad, exact_sets):
            if exact:
                nodes[c.node] = exact[0][1]
                fixes.append({"node": c.node, "op": op, "variant": exact[0][0]})
    return {"ops": ops, "nodes": nodes, "fixes": fixes}


def scheme_yaml(expl: Explanation, name: str, sugg: dict[str, Any], dump_path: str | None) -> str:
    data: dict[str, Any] = {
        "name": name,
        "extends": expl.best,
        "describes": (f"suggested by refinterp diff --explain for {dump_path or 'a dump'}: {expl.best} "
                      f"with {len(sugg['ops'])} per-op and {len(sugg['nodes'])} per-node override(s)"),
    }
    if sugg["ops"]:
        data["ops"] = sugg["ops"]
    if sugg["nodes"]:
        data["nodes"] = sugg["nodes"]
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)


def verify(expl: Explanation, path: str | Path) -> dict[str, Any]:
    """Load the written file and re-run every case under it (nodes it does not model: stubs, their
    explained cases count as not reproduced; listed under ``unmodelled``)."""
    try:
        scheme = load_checked(str(path))
        sess = Session(expl.schemes[expl.best].session.graph, scheme, unmodelled=True)
    except RefinterpError as e:
        return {"verified": False, "error": str(e).splitlines()[0][:200], "not_reproduced": [], "unmodelled": []}
    runner = Runner(sess, expl.float_tol)
    missed = []
    for c in expl.cases:
        want = [o for o in c.outs if expl.per_tensor.get(o, {}).get("explained")]
        if want and not _exact(runner.run(c), want):
            missed.append(c.node)
    return {"verified": not missed, "not_reproduced": missed, "unmodelled": sorted(sess.unmodelled)}


def write_scheme(expl: Explanation, out: str | Path, dump_path: str | None = None) -> dict[str, Any]:
    """Write the suggested scheme to ``out``; returns the suggestion summary (also stored in ``expl``)."""
    from .report_files import write_text_atomic

    if expl.best is None:
        raise RefinterpError("--write-scheme: no built-in scheme could re-run any node of the dump")
    out = Path(out)
    sugg = suggest(expl)
    text = scheme_yaml(expl, out.stem if out.suffix in (".yaml", ".yml") else out.name, sugg, dump_path)
    if out.suffix not in (".yaml", ".yml"):  # load_scheme needs a .yaml path: verify a temporary copy
        with tempfile.TemporaryDirectory() as d:
            tmp = Path(d) / f"{out.name}.yaml"
            tmp.write_text(text)
            check = verify(expl, tmp)
    else:
        write_text_atomic(out, text)
        check = verify(expl, out)
    if out.suffix not in (".yaml", ".yml"):
        write_text_atomic(out, text)
    summary = {"path": str(out), "extends": expl.best, "ops": sorted(sugg["ops"]), "nodes": sorted(sugg["nodes"]),
               "fixes": sugg["fixes"], **check}
    expl.suggestion = summary
    return summary
