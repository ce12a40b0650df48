"""Shared driver for the TFLite integer conformance tests: build cases, run the oracle batch and
refinterp, count differing elements.  Case generators live in the test files."""
from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import refinterp
from tests.conformance._int_oracle import Aborted, compare, run_batch

SCHEME_OF = {"ref": "tflite-reference", "tflm": "tflite-micro", "opt": "tflite-optimized",
             "xnnpack": "tflite-xnnpack"}


@dataclass
class Case:
    id: str
    op: str
    model: bytes
    feeds: dict[str, np.ndarray]
    tags: dict = field(default_factory=dict)


@dataclass
class Outcome:
    cases: int = 0
    tensors: int = 0
    elements: int = 0
    differing: int = 0
    aborted: list = field(default_factory=list)
    failures: list = field(default_factory=list)

    def line(self, what: str) -> str:
        return (f"{what}: {self.cases} cases, {self.tensors} tensors, {self.elements} elements, "
                f"{self.differing} differing, {len(self.aborted)} oracle aborts")

    def assert_exact(self, what: str) -> None:
        """Print the summary line; fail on any oracle abort or differing element."""
        print("\n" + self.line(what))
        assert not self.aborted, f"{what}: oracle aborted on: " + " || ".join(self.aborted)
        assert self.differing == 0, f"{what}: " + " || ".join(self.failures[:5])


def run_cases(cases: list[Case], backend: str, scheme: str | None = None, oracle=None) -> Outcome:
    """``scheme`` defaults to SCHEME_OF[backend]; ``oracle`` = precomputed run_batch results."""
    oracle = run_batch([(c.model, c.feeds) for c in cases], backend) if oracle is None else oracle
    out = Outcome()
    with tempfile.TemporaryDirectory(prefix="int_conf_") as tmp:
        for i, (c, res) in enumerate(zip(cases, oracle)):
            out.cases += 1
            if isinstance(res, Aborted):
                out.aborted.append(f"{c.id}: {res.message}")
                continue
            p = Path(tmp) / f"c{i}.tflite"
            p.write_bytes(c.model)
            sess = refinterp.Session(refinterp.load(p), scheme or SCHEME_OF[backend])
            ours = sess.run(c.feeds, capture="all")
            t, d, notes = compare(res, ours)
            out.tensors += t
            out.elements += sum(v.size for v in ours.values())
            out.differing += d
            if d or notes:
                out.failures.append(f"{c.id}: " + "; ".join(notes))
    return out


def rand_q(rng, shape, dtype: str, lo=None, hi=None) -> np.ndarray:
    info = np.iinfo(np.dtype(dtype))
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    return rng.integers(lo, hi + 1, size=shape).astype(dtype)
