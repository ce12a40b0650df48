"""Re-running one node on the device's own inputs and scoring the result against the device output.

A *case* is one node of a session's graph whose every non-constant input and at least one output
are in the dump; it holds, per sample, the device's input values converted to the model's stored
form and the device's output values in the same form.  Scores compare stored values: integer codes
for quantized tensors (residual in LSBs), real values for float tensors (residual = max |error|).
A tensor is reproduced ("exact") when every integer code is equal; float tensors, whose last bits
depend on summation order no scheme models, count as reproduced when every element is within the
diff's float tolerance (an element fails when it exceeds both atol and rtol * |device|).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import RefinterpError
from .convert import to_stored


@dataclass
class Case:
    index: int  # step index in the session the case was built for
    node: str
    op: str
    outs: list[str]  # compared outputs
    args: list[list[np.ndarray | None]]  # per sample, per node input (None: constant / absent)
    dev: dict[str, list[np.ndarray]]  # per compared output, per sample, stored form


@dataclass
class Score:
    mismatches: int
    elements: int
    residual: float  # max |Δ| in LSBs (quantized integer tensors) or in real units (float tensors)
    lsb: bool
    within_float_tol: bool = False  # float tensors: every element within the diff's float tolerance

    @property
    def exact(self) -> bool:
        return self.mismatches == 0 or self.within_float_tol

    @property
    def exact_fraction(self) -> float:
        return 1.0 - self.mismatches / self.elements if self.elements else 1.0

    def key(self) -> tuple[float, int]:
        """Sort key: closer first."""
        return (self.residual, self.mismatches)

    def to_json(self) -> dict[str, Any]:
        return {"exact": self.exact, "exact_fraction": self.exact_fraction, "mismatches": self.mismatches,
                "residual": self.residual, "residual_unit": "lsb" if self.lsb else "abs"}


def build_cases(session, aligned: dict[str, list[np.ndarray]], dev_qp: dict[str, Any],
                nsamples: int) -> list[Case]:
    g = session.graph
    out: list[Case] = []
    for idx, st in enumerate(session.steps):
        outs = [o for o in st.node.outputs if o in aligned and aligned[o] and o in g.tensors]
        if not outs:
            continue
        live = [n for n in st.node.inputs if n and n in aligned and not (n in g.tensors and
                                                                       g.tensors[n].const is not None)]
        ns = min([nsamples] + [len(aligned[n]) for n in outs + live])  # samples both sides hold
        per_sample: list[list[np.ndarray | None]] = []
        ok = True
        for si in range(ns):
            args: list[np.ndarray | None] = []
            for name in st.node.inputs:
                info = g.tensors.get(name) if name else None
                if not name or (info is not None and info.const is not None):
                    args.append(None)
                elif info is not None and name in aligned and si < len(aligned[name]):
                    args.append(to_stored(aligned[name][si], dev_qp.get(name), info))
                else:
                    ok = False
                    break
            if not ok:
                break
            per_sample.append(args)
        if not ok:
            continue
        dev = {o: [to_stored(aligned[o][si], dev_qp.get(o), g.tensors[o]) for si in range(ns)]
               for o in outs}
        out.append(Case(idx, st.node.name, st.node.op, outs, per_sample, dev))
    return out


def score(case: Case, outputs: list[dict[str, np.ndarray]], graph, tol=None) -> dict[str, Score]:
    """``outputs[si]``: the re-run's values by tensor name for sample ``si``; ``tol(name)`` ->
    (atol, rtol) for float tensors (None: bit equality only)."""
    res: dict[str, Score] = {}
    for o in case.outs:
        info = graph.tensors[o]
        lsb = info.quant is not None and np.dtype(info.dtype).kind in "iu"
        mism = elems = 0
        resid = 0.0
        atol, rtol = tol(o) if tol is not None else (None, None)
        in_tol = atol is not None
        for si, d in enumerate(case.dev[o]):
            v = outputs[si].get(o)
            if v is None or np.shape(v) != d.shape:
                mism += int(d.size) or 1
                elems += int(d.size) or 1
                resid = float("inf")
                in_tol = False
                continue
            v = np.asarray(v)
            if d.dtype.kind in "iub" and v.dtype.kind in "iub":
                diff = np.abs(v.astype(np.int64) - d.astype(np.int64))
                bad = diff != 0
            else:
                a, b = v.astype(np.float64), d.astype(np.float64)
                both_nan = np.isnan(a) & np.isnan(b)
                with np.errstate(all="ignore"):
                    diff = np.where(both_nan, 0.0, np.abs(a - b))
                bad = (diff != 0) & ~both_nan
                diff = np.nan_to_num(diff, nan=np.inf)
                if in_tol:
                    with np.errstate(all="ignore"):
                        in_tol = not bool(np.any((diff > atol) & (diff > rtol * np.abs(b))))
            mism += int(np.count_nonzero(bad))
            elems += int(d.size)
            if diff.size:
                resid = max(resid, float(diff.max()))
        res[o] = Score(mism, elems, resid, lsb, bool(in_tol and not lsb and info.dtype.startswith("float")))
    return res


@dataclass
class Runner:
    """Runs cases of one session, either with its own steps or with re-prepared ones."""
    session: Any
    tol: Any = None  # name -> (atol, rtol) for float tensors
    errors: dict[str, str] = field(default_factory=dict)

    def run(self, case: Case, step=None) -> dict[str, Score] | None:
        st = step if step is not None else self.session.steps[case.index]
        outs: list[dict[str, np.ndarray]] = []
        try:
            for args in case.args:
                vals = self.session.run_step(st, args)
                outs.append({o: v for o, v in zip(st.node.outputs, vals) if o and v is not None})
        except (RefinterpError, ValueError, IndexError, TypeError, ArithmeticError) as e:
            self.errors[case.node] = (str(e).splitlines() or [type(e).__name__])[0][:200]
            return None
        return score(case, outs, self.session.graph, self.tol)
