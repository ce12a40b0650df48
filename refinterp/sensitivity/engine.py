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

from ..compare.convert import quantize_to, to_real
from ..compare.explain_candidates import with_node_override
from ..errors import InputError, RefinterpError
from ..runtime import Session
from ..settings import run_pools
from .metrics import METRICS, score, sqnr

FLOAT = {"compute": "float"}
# the node's own override per fallback mode; its consumers always get FLOAT
OWN = {"float": {"compute": "float", "float_output": True},
       "int16": {"compute": "float", "float_output": "int16"}}
MODES = {"float": ("float",), "int16": ("int16",), "both": ("float", "int16")}


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
    return to_real(np.asarray(v), info.quant if info is not None else None)


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


def _fallback(session: Session, idx: int, consumers: dict[str, list[int]], mode: str) -> dict[int, tuple[dict, Any]]:
    """Steps replaced to run node ``idx`` with fallback ``mode`` (its output float32, or on a 16-bit
    grid) and its consumers reading that output in float: {step index: (override, step)}."""
    st = session.steps[idx]
    own = OWN[mode]
    out = {idx: (own, session.prepare_node(idx, with_node_override(session.scheme, st.node.name, own)))}
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


class Evaluator:
    """Everything one process needs to score fallbacks: the plain run of each sample, the reference
    values, and each (node index, mode) fallback's steps, prepared on first use."""

    def __init__(self, session: Session, reference: Session, samples: list[dict[str, np.ndarray]], metric: str,
                 mode: str, output_map: dict[str, str] | None = None):
        if metric not in METRICS:
            raise InputError(f"unknown metric '{metric}' (one of: {', '.join(METRICS)})")
        if mode not in MODES:
            raise InputError(f"unknown mode '{mode}' (one of: {', '.join(MODES)})")
        if not samples:
            raise InputError("no input samples")
        self.session, self.metric, self.fn = session, metric, METRICS[metric]
        omap = output_map or {o: o for o in session.graph.outputs}
        self.ref_all = [reference.run(f, capture="all") for f in samples]
        self.want = [{o: np.asarray(r[omap[o]], np.float32) for o in session.graph.outputs} for r in self.ref_all]
        self.runner = _Runner(session, samples)
        self.samples = len(samples)
        self.consumers: dict[str, list[int]] = {}
        for idx, st in enumerate(session.steps):
            for name in st.node.inputs:
                if name:
                    self.consumers.setdefault(name, []).append(idx)
        self.keys = [(idx, m) for idx, st in enumerate(session.steps) if _is_quantized_step(session, st)
                     for m in MODES[mode]]
        self._plans: dict[tuple[int, str], dict[int, tuple[dict, Any]] | str] = {}

    def plan(self, key: tuple[int, str]) -> dict[int, tuple[dict, Any]] | str:
        """The fallback's replaced steps, or the reason it cannot be prepared."""
        if key not in self._plans:
            try:
                self._plans[key] = _fallback(self.session, key[0], self.consumers, key[1])
            except RefinterpError as e:
                self._plans[key] = str(e).splitlines()[0][:200]
        return self._plans[key]

    def measure(self, keys: list[tuple[int, str]]) -> float:
        """The metric with these fallbacks together (``[]``: the plain scheme)."""
        merged = _merge_fallbacks([self.plan(k) for k in keys])
        return float(self.fn(self.runner.run({i: step for i, (_o, step) in merged.items()}), self.want))

    def local(self, idx: int, key: tuple[int, str]) -> float | None:
        return _local_sqnr(self.session, self.session.steps[idx], self.plan(key)[idx][1], self.ref_all)

    def task(self, job: tuple[str, Any]):
        with run_pools():  # one BLAS limit around the task's many run_step calls
            return self._task(job)

    def _task(self, job: tuple[str, Any]):
        kind, arg = job
        if kind == "rank":
            p = self.plan(arg)
            if isinstance(p, str):
                return None, None, p
            return self.measure([arg]), self.local(arg[0], arg), None
        return self.measure(list(arg)), None, None


Mapper = Callable[[list[tuple[str, Any]]], list[tuple]]


def analyse(session: Session, reference: Session, samples: list[dict[str, np.ndarray]], *, metric: str = "cosine",
            budget: int = 3, mode: str = "float", output_map: dict[str, str] | None = None,
            progress: Callable[[str, int, int], None] | None = None, reference_label: str = "float32",
            mapper: Callable[[Evaluator], Mapper] | None = None) -> Sensitivity:
    """Rank the quantized nodes of ``session`` by the final-output gain of each fallback in ``mode``
    (float | int16 | both), against ``reference`` (outputs mapped by ``output_map``: session output ->
    reference output).  ``mapper(evaluator)`` returns a function running a list of evaluator tasks
    (default: in this process, in order); results never depend on it."""
    if budget < 0:
        raise InputError(f"--budget must be at least 0, got {budget}")
    ev = Evaluator(session, reference, samples, metric, mode, output_map)
    run_tasks = mapper(ev) if mapper else (lambda jobs: [ev.task(j) for j in jobs])
    base_value = ev.measure([])
    steps = session.steps
    if progress:
        progress("ranking", 0, len(ev.keys))
    ranking, skipped = [], []
    for key, (value, local, why) in zip(ev.keys, run_tasks([("rank", k) for k in ev.keys])):
        node = steps[key[0]].node
        if why is not None:
            skipped.append({"node": node.name, "fallback": key[1], "why": why})
            continue
        ranking.append({"node": node.name, "op": node.source_op or node.op, "index": key[0], "fallback": key[1],
                        "metric": value, "gain": score(metric, value) - score(metric, base_value),
                        "local_error": local})
    ranking.sort(key=lambda r: (-r["gain"], r["index"], r["fallback"]))
    selected, current = [], base_value
    picked: list[tuple[int, str]] = []
    for k in range(min(budget, len({r["index"] for r in ranking}))):
        if progress:
            progress("selecting", k, budget)
        trials = [r for r in ranking if all(r["index"] != i for i, _m in picked)]
        values = [v for v, _l, _w in run_tasks([("set", tuple(picked + [(r["index"], r["fallback"])]))
                                                  for r in trials])]
        best = None
        for r, value in zip(trials, values):
            if best is None or score(metric, value) > score(metric, best[1]):
                best = (r, value)
        if best is None or score(metric, best[1]) <= score(metric, current):
            break  # no remaining node improves the metric
        picked.append((best[0]["index"], best[0]["fallback"]))
        current = best[1]
        selected.append({"node": best[0]["node"], "op": best[0]["op"], "fallback": best[0]["fallback"],
                         "metric": current})
    merged = _merge_fallbacks([ev.plan(p) for p in picked])
    overrides = {steps[i].node.name: dict(over) for i, (over, _s) in sorted(merged.items())}
    for r in ranking:
        r.pop("index")
    return Sensitivity(session.scheme.name, reference_label, metric, ev.samples, base_value, ranking,
                       selected, current, skipped, overrides)


def reference_session(graph, against: str = "float32") -> tuple[Session, dict[str, str] | None, str]:
    """(reference Session, output map or None, label): the ``float32`` scheme on ``graph``, or a float
    model file run in float32 with its outputs matched to ``graph``'s by name, else by position."""
    if against == "float32":
        return Session(graph, "float32"), None, "float32"
    from ..loaders import load

    fgraph = load(against)
    if all(o in fgraph.outputs for o in graph.outputs):
        omap = {o: o for o in graph.outputs}
    elif len(fgraph.outputs) == len(graph.outputs):
        omap = dict(zip(graph.outputs, fgraph.outputs))
    else:
        raise InputError(f"{against}: its outputs {fgraph.outputs} match neither the names nor the "
                         f"number of the model's outputs {graph.outputs}")
    return Session(fgraph, "float32"), omap, str(against)


def fix_scheme(result: Sensitivity, extends: str) -> dict[str, Any]:
    """A scheme that ``extends`` the analysed one with the selected nodes in float."""
    return {"name": f"{result.scheme}-sensitivity", "extends": extends,
            "describes": f"{result.scheme} with {len(result.selected)} node(s) at higher precision "
                         f"(refinterp sensitivity, {result.metric} {result.baseline:.6g} -> {result.final:.6g})",
            "status": "documented",
            "nodes": {name: dict(over) for name, over in result.overrides.items()}}
