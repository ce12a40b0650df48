"""``refinterp diff --explain``: which arithmetic did the device use?

Every node that can be re-run on the device's own inputs (all its non-constant inputs and an
output in the dump) is re-run under every built-in scheme (one Session per scheme, built once), and
the nodes that the best of those schemes does not reproduce are re-run again under each single-knob
change of it (``explain_candidates``; one re-prepared step per candidate, the Session untouched).

``best_scheme``: the built-in scheme under which the most tensors are exact, counted over the
tensors that every built-in scheme re-ran (graph passes such as QDQ fusion remove tensors from
some schemes' graphs; all are judged on the same evidence).  Ties are broken by (1) fewer
mismatching elements there, then more exact tensors and fewer mismatching elements over all the
tensors each scheme re-ran, (2) the scheme the diff ran under, (3) ``status: verified`` before
``documented``, (4) the fewest per-op settings in the resolved scheme (the explanation with the
fewest assumptions: ``tflite-reference`` before ``tflite-micro`` when the dump cannot tell them
apart), (5) the name.  The built-in schemes tied with the best on the evidence (1) — the
dump cannot tell them apart — are reported as ``equally_explained_by``.

A tensor is *explained* when some scheme or single-knob variant reproduces it exactly (every
element of every sample; float tensors: within the diff's float tolerance); the rest are candidate
device bugs, ranked by their local error under ``best_scheme``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import RefinterpError
from ..runtime import Session
from ..scheme_check import load_checked
from ..schemes import Scheme, list_schemes
from .explain_candidates import knob_candidates, with_node_override
from .explain_eval import Case, Runner, Score, build_cases


@dataclass
class SchemeRun:
    scheme: Scheme
    session: Session
    partial: bool  # the scheme's Session could not be built: nodes re-prepared one by one on the diff's
    cases: list[Case]
    scores: dict[str, Score | None] = field(default_factory=dict)  # tensor -> score (None: not applicable)
    note: str | None = None

    def exact_count(self) -> int:
        return sum(1 for s in self.scores.values() if s is not None and s.exact)

    def mismatches(self, elements: dict[str, int]) -> int:
        return sum(s.mismatches if s is not None else elements.get(t, 0) for t, s in self.scores.items())


@dataclass
class Explanation:
    schemes: dict[str, SchemeRun]
    builtin: list[str]
    best: str | None
    tie_break: str
    cases: list[Case]  # cases of the best scheme's session
    knobs: dict[str, list[tuple[str, dict[str, Any], Score]]]  # node -> (label, override, score) per candidate
    per_tensor: dict[str, dict[str, Any]]
    unexplained: list[dict[str, Any]]
    inputs: list[dict[str, Any]]
    notes: list[str]
    suggestion: dict[str, Any] | None = None  # filled by scheme_writer
    # built-in schemes tied with ``best`` on every evidence key (exact tensors and mismatching elements);
    # only the preference tie-breaks (diff scheme, status, per-op settings, name) chose ``best`` over them
    equally_explained_by: list[str] = field(default_factory=list)
    # name -> (atol, rtol): the diff's float tolerance, under which float tensors count as reproduced
    float_tol: Any = None

    def to_json(self) -> dict[str, Any]:
        elements = {t: s.elements for r in self.schemes.values() for t, s in r.scores.items() if s is not None}
        return {
            "best_scheme": self.best,
            "tie_break": self.tie_break,
            "equally_explained_by": list(self.equally_explained_by),
            "schemes": [{"name": n, "exact_tensors": r.exact_count(), "compared_tensors": len(r.scores),
                         "mismatching_elements": r.mismatches(elements), "built_in": n in self.builtin,
                         "partial": r.partial, "note": r.note} for n, r in self.schemes.items()],
            "explained": sum(1 for e in self.per_tensor.values() if e["explained"]),
            "re_run_tensors": len(self.per_tensor),
            "unexplained": self.unexplained,
            "inputs": self.inputs,
            "suggested_scheme": self.suggestion,
            "notes": self.notes,
        }


def _load_builtins(notes: list[str]) -> list[Scheme]:
    out = []
    for name, _ in list_schemes():
        try:
            out.append(load_checked(name))
        except RefinterpError as e:
            notes.append(f"scheme {name} skipped: {str(e).splitlines()[0][:160]}")
    return out


def _step_key(graph_key: int, step) -> str:
    """Two steps with the same kernel and settings on the same node compute the same thing."""
    return repr((graph_key, step.node.name, step.kernel.op, step.kernel.variant,
                 sorted((k, repr(v)) for k, v in step.settings.items())))


def _scheme_run(scheme: Scheme, differ, aligned, dev_qp, nsamples, cases_cache, score_cache) -> SchemeRun:
    base = differ.session
    partial, note = False, None
    if scheme.name == base.scheme.name and scheme.path == base.scheme.path:
        sess = base
    else:
        try:  # nodes the scheme does not model are stubs: their cases score as not reproduced
            sess = Session(differ.graph, scheme, unmodelled=True)
            if sess.unmodelled:
                note = (f"{len(sess.unmodelled)} node(s) not modelled: "
                        f"{'; '.join(str(r).splitlines()[0][:120] for r in list(sess.unmodelled.values())[:2])}")
        except RefinterpError as e:
            sess, partial = base, True
            note = f"whole-model session failed ({str(e).splitlines()[0][:160]}); nodes prepared one by one"
    # keyed by the graph object itself (kept alive by the cache), never by id(): a graph made by
    # one scheme's passes and then freed could hand its id to another scheme's graph
    hit = next((c for g, c in cases_cache.get("graphs", []) if g is sess.graph), None)
    if hit is None:
        hit = build_cases(sess, aligned, dev_qp, nsamples)
        cases_cache.setdefault("graphs", []).append((sess.graph, hit))
    key = id(sess.graph)  # unique while explain runs: cases_cache keeps every graph alive
    run = SchemeRun(scheme, sess, partial, hit, note=note)
    runner = Runner(sess, differ.policy.float_for)
    for case in run.cases:
        step = sess.steps[case.index]
        if partial:
            try:
                step = sess.prepare_node(case.index, scheme)
            except RefinterpError:
                for o in case.outs:
                    run.scores[o] = None
                continue
        sk = _step_key(key, step)
        if sk not in score_cache:
            score_cache[sk] = runner.run(case, step)
        sc = score_cache[sk]
        for o in case.outs:
            run.scores[o] = sc.get(o) if sc is not None else None
    return run


def _pick_best(runs: dict[str, SchemeRun], builtin: list[str], diff_scheme: str) -> tuple[str | None, list[str]]:
    """The best built-in scheme, and the other built-in schemes tied with it on the evidence (the dump
    cannot tell them apart; only the preference tie-breaks chose between them)."""
    elements = {t: s.elements for r in runs.values() for t, s in r.scores.items() if s is not None}
    cands = [n for n in builtin if n in runs]
    if not cands:
        return None, []
    # the same evidence for every scheme: tensors that every candidate re-ran (graph passes such as
    # QDQ fusion remove intermediate tensors from some schemes' graphs)
    common = set.intersection(*({t for t, s in runs[n].scores.items() if s is not None} for n in cands))

    def evidence(n: str):
        r = runs[n]
        on_common = sum(1 for t in common if r.scores[t].exact)
        mism = sum(r.scores[t].mismatches for t in common)
        return (-on_common, mism, -r.exact_count(), r.mismatches(elements))

    def key(n: str):
        r = runs[n]
        return evidence(n) + (n != diff_scheme, r.scheme.data.get("status") != "verified",
                              len(r.scheme.data.get("ops") or {}), n)

    best = min(cands, key=key)
    ev = evidence(best)
    return best, sorted(n for n in cands if n != best and evidence(n) == ev)


TIE_BREAK = ("most exact tensors among those every scheme re-ran, then fewest mismatching elements there; then "
             "most exact tensors overall; then fewest mismatching elements over all re-run tensors; then the "
             "scheme the diff ran under; then status verified (a scheme checked against its runtime before one "
             "that only follows source); then fewest per-op settings (the simplest explanation); then name")


def explain(differ, aligned, dev_qp, nsamples: int, input_checks: list[dict[str, Any]]) -> Explanation:
    notes: list[str] = []
    builtins = _load_builtins(notes)
    diff_scheme = differ.session.scheme
    all_schemes = list(builtins)
    if not any(s.name == diff_scheme.name for s in builtins):
        all_schemes.append(diff_scheme)
    cases_cache: dict[str, list] = {}
    score_cache: dict[str, Any] = {}  # schemes that resolve a node identically share its re-run
    runs = {s.name: _scheme_run(s, differ, aligned, dev_qp, nsamples, cases_cache, score_cache)
            for s in all_schemes}
    builtin_names = [s.name for s in builtins]
    best, tied = _pick_best(runs, builtin_names, diff_scheme.name)
    knobs: dict[str, list[tuple[str, dict[str, Any], Score]]] = {}
    cases: list[Case] = []
    if best is not None:
        br = runs[best]
        cases = br.cases
        runner = Runner(br.session, differ.policy.float_for)
        for case in cases:
            if all(br.scores.get(o) is not None and br.scores[o].exact for o in case.outs):
                continue
            tried = []
            for label, over in knob_candidates(br.session, case.index, br.scheme, builtins):
                try:
                    step = br.session.prepare_node(case.index, with_node_override(br.scheme, case.node, over))
                except RefinterpError:
                    continue
                sc = runner.run(case, step)
                if sc is not None:
                    tried.append((label, over, sc))
            knobs[case.node] = [(lbl, over, sc) for lbl, over, sc in tried]
    per_tensor = _per_tensor(runs, best, cases, knobs)
    for c in input_checks:  # the model input: the preprocessing hypotheses of inputs_check
        if c.get("sample", 0) == 0:
            expl = "the given input" if c["matches"] else c.get("explained_by")
            per_tensor.setdefault(c["input"], {
                "tensor": c["input"], "node": None, "op": "Input", "explained_by": expl,
                "explained": expl is not None, "schemes_exact": [], "variants_exact": [],
                "preprocessing": c.get("candidates", [])})
    unexplained = _unexplained(per_tensor, runs.get(best) if best else None)
    return Explanation(runs, builtin_names, best, TIE_BREAK, cases, knobs, per_tensor, unexplained,
                       [dict(c) for c in input_checks], notes, equally_explained_by=tied,
                       float_tol=differ.policy.float_for)


def _per_tensor(runs, best, cases, knobs) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    tensors = {o: c for c in cases for o in c.outs}
    for r in runs.values():  # tensors re-runnable only under another scheme's graph
        for c in r.cases:
            for o in c.outs:
                tensors.setdefault(o, c)
    for t, case in tensors.items():
        exact_schemes = [n for n, r in runs.items() if r.scores.get(t) is not None and r.scores[t].exact]
        variants = [(f"{best} + {lbl}", sc[t]) for lbl, _o, sc in knobs.get(case.node, []) if t in sc]
        exact_knobs = [lbl for lbl, s in variants if s.exact]
        best_sc = runs[best].scores.get(t) if best else None
        e: dict[str, Any] = {"tensor": t, "node": case.node, "op": case.op,
                             "exact_under_best": bool(best_sc is not None and best_sc.exact),
                             "best_scheme_local": best_sc.to_json() if best_sc is not None else None,
                             "schemes_exact": exact_schemes, "variants_exact": exact_knobs}
        if e["exact_under_best"]:
            e["explained_by"] = best
        elif exact_knobs:
            e["explained_by"] = exact_knobs[0]
        elif exact_schemes:
            e["explained_by"] = exact_schemes[0]
        else:
            e["explained_by"] = None
        e["explained"] = e["explained_by"] is not None
        if not e["explained"]:
            pool = ([(best, best_sc)] if best_sc is not None else []) + [
                (n, r.scores[t]) for n, r in runs.items() if n != best and r.scores.get(t) is not None] + variants
            if pool:
                lbl, sc = min(pool, key=lambda p: p[1].key())
                e["closest"] = {"variant": lbl, **sc.to_json()}
        out[t] = e
    return out


def _unexplained(per_tensor, best_run: SchemeRun | None) -> list[dict[str, Any]]:
    rows = []
    for t, e in per_tensor.items():
        if e["explained"]:
            continue
        sc = best_run.scores.get(t) if best_run is not None else None
        rows.append({"tensor": t, "node": e["node"], "op": e["op"],
                     "local_residual": sc.residual if sc is not None else float("inf"),
                     "local_exact_fraction": sc.exact_fraction if sc is not None else 0.0,
                     "residual_unit": ("lsb" if sc.lsb else "abs") if sc is not None else None,
                     "closest": e.get("closest")})
    rows.sort(key=lambda r: (-r["local_residual"], r["local_exact_fraction"], r["tensor"]))
    for i, r in enumerate(rows):
        r["rank"] = i + 1
    return rows
