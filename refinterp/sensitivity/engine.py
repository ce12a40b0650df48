"""Per-node float fallback sensitivity.

"Node N in float" means what removing N's quantization does in a QDQ graph: N computes in float32
on its dequantized inputs and weights, its output activation is *not* quantized (``compute: float``
+ ``float_output``), and each consumer of that output reads the float value (``compute: float``;
a consumer still quantizes its own output).  So a coarse activation scale at N's output is bypassed,
and N's requantization rounding is gone.  The weights stay the model's quantized weights (a float
model's weights are not substituted).

For every quantized node (one that runs an integer kernel and writes quantized integer tensors) the
model is re-run with that fallback, and the final outputs are scored against a float reference.
Only the changed nodes and what depends on them are recomputed: the prefix comes from the plain run
of each sample, and each fallback's steps are prepared once.  A greedy pass then picks up to
``budget`` nodes, re-measuring every remaining candidate with the picks so far, since gains do not
add up.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from ..compare.convert import quantize_to
from ..compare.explain_candidates import with_node_override
from ..errors import InputError, RefinterpError
from ..ir import dequantize
from ..runtime import Session
from .metrics import METRICS, score, sqnr

FLOAT = {"compute": "float"}
FLOAT_OUT = {"compute": "float", "float_output": True}


@dataclass
class Sensitivity:
    scheme: str
    reference: str
    metric: str
    samples: int
    baseline: float
    ranking: list[dict[str, Any]]
    selected: list[dict[str, Any]]
    final: float
    skipped: list[dict[str, str]] = field(default_factory=list)
    overrides: dict[str, dict[str, Any]] = field(default_factory=dict)  # node -> scheme settings

    def to_json(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "reference": self.reference, "metric": self.metric,
                "samples": self.samples, "baseline": self.baseline, "ranking": self.ranking,
                "selected": self.selected, "final": self.final, "skipped": self.skipped,
                "overrides": self.overrides}


def _is_quantized_step(session: Session, st) -> bool:
    if st.kernel.variant in ("float", "state", "control"):
        return False
    for name in st.node.outputs:
        info = session.graph.tensors.get(name) if name else None
        if info is not None and info.quant is not None and np.dtype(info.dtype).kind in "iu":
            return True
    return False


def _real(session: Session, name: str, v: np.ndarray) -> np.ndarray:
    info = session.graph.tensors.get(name)
    v = np.asarray(v)
    if info is not None and info.quant is not None and v.dtype.kind in "iu":
        return dequantize(v, info.quant)
    return v.astype(np.float32) if v.dtype.kind in "iub" else v


class _Runner:
    """Suffix re-runs of ``session`` with some steps replaced, from each sample's plain run."""

    def __init__(self, session: Session, samples: list[dict[str, np.ndarray]]):
        self.s = session
        self.full = [session.run(f, capture="all") for f in samples]
        self.outputs = list(session.graph.outputs)

    def run(self, replaced: dict[int, Any]) -> list[dict[str, np.ndarray]]:
        if not replaced:
            return [{o: _real(self.s, o, v[o]) for o in self.outputs} for v in self.full]
        start = min(replaced)
        res = []
        for base in self.full:
            values = dict(base)
            dirty: set[str] = set()
            for idx in range(start, len(self.s.steps)):
                st = replaced.get(idx, self.s.steps[idx])
                if idx not in replaced and not any(i in dirty for i in st.node.inputs if i):
                    continue
                outs = self.s.run_step(st, [values.get(i) if i else None for i in st.node.inputs])
                for name, v in zip(st.node.outputs, outs):
                    if name:
                        values[name] = v
                        dirty.add(name)
            res.append({o: _real(self.s, o, values[o]) for o in self.outputs})
        return res


def _local_sqnr(session: Session, st, fstep, ref_vals: list[dict[str, np.ndarray]]) -> float | None:
    """The node's own error, without what it inherits: SQNR (dB) of its integer output against its
    float computation (float output), both fed the reference's values of its inputs quantized to the
    input tensors' params."""
    got, want = [], []
    for rv in ref_vals:
        args = []
        for name in st.node.inputs:
            info = session.graph.tensors.get(name) if name else None
            if not name or (info is not None and info.const is not None):
                args.append(None)
                continue
            if name not in rv:
                return None
            v = np.asarray(rv[name])
            if info is not None and info.quant is not None and np.dtype(info.dtype).kind in "iu":
                if v.dtype.kind in "iu":  # a graph input: the reference was fed the codes
                    v = v.astype(info.dtype)
                else:
                    v = quantize_to(v.astype(np.float64), info)
            args.append(v)
        outs = session.run_step(st, args)
        fouts = session.run_step(fstep, args)
        g, w = {}, {}
        for name, v, fv in zip(st.node.outputs, outs, fouts):
            if name and v is not None and fv is not None:
                g[name], w[name] = _real(session, name, v), np.asarray(fv, np.float32)
        if not w:
            return None
        got.append(g)
        want.append(w)
    return float(sqnr(got, want))


def _fallback(session: Session, idx: int, consumers: dict[str, list[int]]) -> dict[int, tuple[dict, Any]]:
    """Steps replaced to run node ``idx`` in float with a float output: {step index: (override, step)}."""
    st = session.steps[idx]
    out = {idx: (FLOAT_OUT, session.prepare_node(idx, with_node_override(session.scheme, st.node.name, FLOAT_OUT)))}
    for name in st.node.outputs:
        for c in consumers.get(name, []) if name else []:
            if c not in out:
                cst = session.steps[c]
                out[c] = (FLOAT, session.prepare_node(c, with_node_override(session.scheme, cst.node.name, FLOAT)))
    return out


def _merge_fallbacks(plans: list[dict[int, tuple[dict, Any]]]) -> dict[int, tuple[dict, Any]]:
    """Several fallbacks together: a node that is a pick keeps its float output over being a consumer."""
    merged: dict[int, tuple[dict, Any]] = {}
    for plan in plans:
        for i, (over, step) in plan.items():
            if i not in merged or over.get("float_output"):
                merged[i] = (over, step)
    return merged


def analyse(session: Session, reference: Session, samples: list[dict[str, np.ndarray]], *, metric: str = "cosine",
            budget: int = 3, output_map: dict[str, str] | None = None,
            progress: Callable[[str, int, int], None] | None = None, reference_label: str = "float32") -> Sensitivity:
    """Rank the quantized nodes of ``session`` by the final-output gain of running each in float,
    against ``reference`` (its outputs mapped by ``output_map``: session output -> reference output)."""
    if metric not in METRICS:
        raise InputError(f"unknown metric '{metric}' (one of: {', '.join(METRICS)})")
    if budget < 0:
        raise InputError(f"--budget must be at least 0, got {budget}")
    if not samples:
        raise InputError("no input samples")
    fn = METRICS[metric]
    omap = output_map or {o: o for o in session.graph.outputs}
    ref_all = [reference.run(f, capture="all") for f in samples]
    want = [{o: np.asarray(r[omap[o]], np.float32) for o in session.graph.outputs} for r in ref_all]
    runner = _Runner(session, samples)
    base_value = float(fn(runner.run({}), want))
    consumers: dict[str, list[int]] = {}
    for idx, st in enumerate(session.steps):
        for name in st.node.inputs:
            if name:
                consumers.setdefault(name, []).append(idx)
    cands, skipped = [], []
    for idx, st in enumerate(session.steps):
        if not _is_quantized_step(session, st):
            continue
        try:
            plan = _fallback(session, idx, consumers)
        except RefinterpError as e:
            skipped.append({"node": st.node.name, "why": str(e).splitlines()[0][:200]})
            continue
        cands.append((idx, st, plan))
    ranking = []
    for k, (idx, st, fstep) in enumerate(cands):
        if progress:
            progress("ranking", k, len(cands))
        value = float(fn(runner.run({i: step for i, (_o, step) in fstep.items()}), want))
        local = _local_sqnr(session, st, fstep[idx][1], ref_all)
        ranking.append({"node": st.node.name, "op": st.node.source_op or st.node.op, "index": idx,
                        "fallback": "float", "metric": value,
                        "gain": score(metric, value) - score(metric, base_value),
                        "local_error": local})
    ranking.sort(key=lambda r: (-r["gain"], r["index"]))
    plans = {idx: plan for idx, _st, plan in cands}
    selected, current = [], base_value
    picked: list[int] = []
    for k in range(min(budget, len(ranking))):
        if progress:
            progress("selecting", k, budget)
        best = None
        for r in ranking:
            if r["index"] in picked:
                continue
            trial = _merge_fallbacks([plans[i] for i in picked + [r["index"]]])
            value = float(fn(runner.run({i: step for i, (_o, step) in trial.items()}), want))
            if best is None or score(metric, value) > score(metric, best[1]):
                best = (r, value)
        if best is None or score(metric, best[1]) <= score(metric, current):
            break  # no remaining node improves the metric
        picked.append(best[0]["index"])
        current = best[1]
        selected.append({"node": best[0]["node"], "op": best[0]["op"], "fallback": "float", "metric": current})
    merged = _merge_fallbacks([plans[i] for i in picked])
    overrides = {session.steps[i].node.name: dict(over) for i, (over, _s) in sorted(merged.items())}
    for r in ranking:
        r.pop("index")
    return Sensitivity(session.scheme.name, reference_label, metric, len(samples), base_value, ranking,
                       selected, current, skipped, overrides)


def fix_scheme(result: Sensitivity, extends: str) -> dict[str, Any]:
    """A scheme that ``extends`` the analysed one with the selected nodes in float."""
    return {"name": f"{result.scheme}-sensitivity", "extends": extends,
            "describes": f"{result.scheme} with {len(result.selected)} node(s) in float "
                         f"(refinterp sensitivity, {result.metric} {result.baseline:.6g} -> {result.final:.6g})",
            "status": "documented",
            "nodes": {name: dict(over) for name, over in result.overrides.items()}}
