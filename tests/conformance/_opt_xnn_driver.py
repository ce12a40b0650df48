"""Shared driver of the tflite-optimized / tflite-xnnpack conformance tests: one oracle child per
(group, backend), cached for the module, so the "can fail" checks reuse the oracle outputs."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import refinterp
from tests.conformance._int_cases import Case, Outcome, run_cases
from tests.conformance._int_oracle import DELEGATED_KEY, Aborted, run_batch

SCHEME = {"opt": "tflite-optimized", "xnnpack": "tflite-xnnpack"}
# Ops whose XNNPACK delegation refinterp decides (variant ``xnn``); MAX_POOL_2D / REDUCE_MAX are
# delegated too but give identical results either way, so they run the built-in kernel here.
DECIDED = {"Conv", "DepthwiseConv", "ConvTranspose", "FullyConnected", "BatchMatMul", "ReduceMean", "ReduceSum"}
NEVER_DELEGATED = {"AveragePool"}  # XNNPACK takes AVERAGE_POOL_2D for float only


class OracleCache:
    def __init__(self, groups: dict) -> None:
        self.groups = groups
        self._cases: dict[str, list[Case]] = {}
        self._res: dict[tuple[str, str], list] = {}

    def cases(self, group: str) -> list[Case]:
        if group not in self._cases:
            self._cases[group] = self.groups[group]()
        return self._cases[group]

    def oracle(self, group: str, backend: str) -> list:
        """Every group of the module runs in ONE oracle child per backend (imports dominate)."""
        if (group, backend) not in self._res:
            todo = [g for g in self.groups if (g, backend) not in self._res]
            flat = [(c.model, c.feeds) for g in todo for c in self.cases(g)]
            res = run_batch(flat, backend)
            k = 0
            for g in todo:
                n = len(self.cases(g))
                self._res[(g, backend)] = res[k:k + n]
                k += n
        return self._res[(group, backend)]

    def outcome(self, group: str, backend: str, scheme: str) -> Outcome:
        return run_cases(self.cases(group), backend, scheme, self.oracle(group, backend))


def delegation_mismatches(cases: list[Case], oracle: list) -> tuple[int, list[str]]:
    """Compare, node by node, XNNPACK's delegation (oracle flags) with the ``executed_by`` that
    refinterp's tflite-xnnpack plan records.  Returns (nodes checked, mismatch notes)."""
    checked, notes = 0, []
    with tempfile.TemporaryDirectory(prefix="xnn_deleg_") as tmp:
        for i, (c, res) in enumerate(zip(cases, oracle)):
            if isinstance(res, Aborted) or DELEGATED_KEY not in res:
                continue
            p = Path(tmp) / f"c{i}.tflite"
            p.write_bytes(c.model)
            sess = refinterp.Session(refinterp.load(p), "tflite-xnnpack")
            flags = np.asarray(res[DELEGATED_KEY])
            for j, st in enumerate(sess.steps):
                node = sess.graph.nodes[j]
                if node.op not in DECIDED | NEVER_DELEGATED:
                    continue
                ours = getattr(st.plan, "executed_by", "") == "xnnpack"
                checked += 1
                if bool(flags[j]) != ours:
                    notes.append(f"{c.id}: node {j} ({node.op}) XNNPACK delegated={bool(flags[j])}, refinterp "
                                 f"executed_by={getattr(st.plan, 'executed_by', '')!r}")
    return checked, notes


def check(cache: OracleCache, group: str, backend: str) -> Outcome:
    out = cache.outcome(group, backend, SCHEME[backend])
    out.assert_exact(f"{group} [{SCHEME[backend]}] vs {backend}")
    assert out.tensors >= 2 * out.cases
    if backend == "xnnpack":
        n, notes = delegation_mismatches(cache.cases(group), cache.oracle(group, backend))
        print(f"{group}: {n} delegation decisions checked, {len(notes)} wrong")
        assert not notes, " || ".join(notes[:5])
    return out
