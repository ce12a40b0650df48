"""int16 ADD / SUB with general scales and equal shapes under tflite-optimized / tflite-xnnpack.

LiteRT's optimized int16 ADD (``AddElementwiseInt16``, NEON code via NEON_2_SSE on x86) rounds each
input once (left shift folded into the input shift) where the reference rounds twice, for whole
blocks of 16 elements; the tail runs the reference formula.  The other int16 suites broadcast
(reference code), so this path was first seen on the int16x8 MobileNet fixture (1 element of
2048 at b3_add).  Shapes here have a tail (size % 16 != 0); scales include input/output ratios
that make the folded shift negative (a flooring right shift) and exact ties.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance._int_cases import Case, run_cases  # noqa: E402
from tests.conformance._int_oracle import Aborted, compare, run_batch  # noqa: E402
from tests.conformance._qcases import binary  # noqa: E402

# (s1, s2, so): the fixture's b3_add scales and a triple with more double-rounding ties (the
# optimized path differs from the reference on a few codes of input 1 there), a tiny s1 (folded
# shift < 0: a flooring right shift), an output scale finer than both inputs.
SCALES = [(2.370749e-05, 2.6526326e-05, 2.6526326e-05), (6.1e-05, 4.4e-05, 5.0e-05), (1e-6, 3.0e-4, 3.0e-4),
          (2e-05, 3e-05, 4.1e-05)]
ACTS = [None, None, "RELU", "RELU6"]


def _cases() -> list[Case]:
    rng = np.random.default_rng(21)
    codes = np.arange(-32768, 32768)
    # every int16 code twice, then a 5-element tail: 131077 = 8192 * 16 + 5
    a = np.concatenate([codes, codes[::-1], [7, -7, 100, -100, 3]]).astype(np.int16).reshape(1, -1, 1)
    cases = []
    for k, ((s1, s2, so), act) in enumerate(zip(SCALES, ACTS)):
        b = rng.integers(-32768, 32768, a.shape)
        opts = {"pot_scale_int16": False}
        if act:
            opts["fused_activation"] = act
        for op in ("ADD", "SUB"):
            for j, bb in enumerate((b, b // 4)):
                model, feeds = binary(op, "int16", (s1, 0), (s2, 0), (so, 0), a, bb.astype(np.int16), opts, version=3)
                cases.append(Case(f"{op.lower()}-int16-eq-{k}-{j}", op, model, feeds))
    return cases


CASES = _cases()


@pytest.fixture(scope="module")
def oracle():
    flat = [(c.model, c.feeds) for c in CASES]
    return {b: run_batch(flat, b) for b in ("ref", "opt", "xnnpack")}


@pytest.mark.parametrize("backend,scheme", [("opt", "tflite-optimized"), ("xnnpack", "tflite-xnnpack"),
                                            ("ref", "tflite-reference")])
def test_int16_add_sub_equal_shapes(oracle, backend, scheme):
    out = run_cases(CASES, backend, scheme, oracle[backend])
    print("\n" + out.line(f"int16 ADD/SUB equal shapes [{scheme}] vs {backend}"))
    assert not out.aborted, out.aborted
    assert out.differing == 0, " || ".join(out.failures[:4])


def test_optimized_add_differs_from_reference(oracle):
    """The optimized ADD path must really differ from the reference on these cases (else the
    test above could not catch a scheme that ignores it)."""
    diff = 0
    for c, r, o in zip(CASES, oracle["ref"], oracle["opt"]):
        assert not isinstance(r, Aborted) and not isinstance(o, Aborted)
        if c.op == "ADD":
            diff += compare(r, {k: v for k, v in o.items() if k == "y"})[1]
    assert diff > 0
