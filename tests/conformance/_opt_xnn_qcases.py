"""Shared runner of the element-wise / activation / misc conformance tests under tflite-optimized
("opt" oracle: LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES) and tflite-xnnpack ("xnnpack" oracle: the
default resolver with XNNPACK, experimental_preserve_all_tensors).

``OptXnnSuite`` is ``_qcases.Suite`` with those two backends.  For "xnnpack" it also checks, node
by node, that refinterp's delegation decision (the plan's ``executed_by``, present on every node
whose op has an ``xnn`` kernel) equals XNNPACK's (the oracle's DELEGATE flags), and it can run the
*reference* scheme on the same cases to show the oracle differs from it (so the tests can fail).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from tests.conformance._int_oracle import DELEGATED_KEY, Aborted, compare
from tests.conformance._qcases import Case, OracleAbort, Suite, run_ours

SCHEMES = {"opt": "tflite-optimized", "xnnpack": "tflite-xnnpack"}
BACKENDS = ("opt", "xnnpack")


def with_backends(cases: list[Case], backends=BACKENDS) -> list[Case]:
    """Re-target reference-suite cases to the opt / xnnpack oracles (dropping tflm-only gaps)."""
    return [Case(c.id, c.model, c.feeds, c.op, tuple(backends)) for c in cases]


def delegation(model: bytes) -> list[tuple[str, str]]:
    """(op, executed_by) per node of refinterp's tflite-xnnpack session ('' = no xnn kernel)."""
    import refinterp

    with tempfile.TemporaryDirectory(prefix="xnn_deleg_") as tmp:
        p = Path(tmp) / "m.tflite"
        p.write_bytes(model)
        sess = refinterp.Session(refinterp.load(str(p)), "tflite-xnnpack")
        out = []
        for st in sess.steps:
            plan = st.plan
            eb = plan.get("executed_by", "") if isinstance(plan, dict) else getattr(plan, "executed_by", "")
            out.append((st.node.op, eb))
        return out


class OptXnnSuite(Suite):
    def check(self, case_id: str, backend: str) -> tuple[int, int, list[str]]:
        c = self.cases[case_id]
        o = self.oracle(backend, case_id)
        if isinstance(o, Aborted):
            raise OracleAbort(o.message)
        ours = run_ours(c.model, c.feeds, SCHEMES[backend])
        tensors, diff, notes = compare(o, ours)
        if backend == "xnnpack" and DELEGATED_KEY in o:
            flags = np.asarray(o[DELEGATED_KEY])
            for j, (op, eb) in enumerate(delegation(c.model)):
                if eb and bool(flags[j]) != (eb == "xnnpack"):
                    diff += 1
                    notes.append(f"node {j} ({op}): XNNPACK delegated={bool(flags[j])}, refinterp {eb!r}")
        return tensors, diff, notes

    def reference_diff(self, case_id: str, backend: str) -> int:
        """Differing elements between the *reference* scheme and this backend's oracle."""
        c = self.cases[case_id]
        o = self.oracle(backend, case_id)
        if isinstance(o, Aborted):
            return 0
        return compare(o, run_ours(c.model, c.feeds, "tflite-reference"))[1]


def assert_reference_differs(suite: OptXnnSuite, backend: str, expected_ops: set[str]) -> None:
    """The oracle must differ from the reference scheme on some case of every op in
    ``expected_ops`` (the cases then really test the opt / xnn kernels)."""
    differing: set[str] = set()
    for c in suite.cases.values():
        if backend in c.backends and c.op in expected_ops - differing and suite.reference_diff(c.id, backend):
            differing.add(c.op)
    missing = expected_ops - differing
    assert not missing, f"{backend} oracle equals tflite-reference on every case of {sorted(missing)}"
