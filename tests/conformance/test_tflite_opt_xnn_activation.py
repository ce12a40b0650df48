"""LOGISTIC / TANH / HARD_SWISH / RELU / RELU6 / RELU_N1_TO_1 / LEAKY_RELU / GELU / RSQRT under
tflite-optimized and tflite-xnnpack vs LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES and the default
resolver with XNNPACK: every tensor, 0 differing elements, and (xnnpack) the same delegation
decision as XNNPACK on every node.

Cases: the reference suite (all 256 codes of every 8-bit op over six scale / zero-point pairs incl.
tiny and large scales, uint8, int16 sweeps incl. power-of-two LOGISTIC/TANH scales that take the
optimized fixed-point path), plus LEAKY_RELU at XNNPACK's limits (positive scale outside
[2^-8, 2^7], |negative scale| < 2^-8 or beyond 128, negative alpha, uint8), which decide whether
XNNPACK's 8-bit multipliers or the built-in kernel run.
"""
from __future__ import annotations

import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance import test_tflite_int_activation as ref  # noqa: E402
from tests.conformance._opt_xnn_qcases import BACKENDS, OptXnnSuite, assert_reference_differs, with_backends  # noqa: E402
from tests.conformance._qcases import Case, assert_case, codes, unary  # noqa: E402


def _limit_cases() -> list[Case]:
    x8 = codes("int8").reshape(2, 128)
    cs = []

    def add(cid, built, op):
        cs.append(Case(cid, built[0], built[1], op, BACKENDS))

    # (sx, zx, so, zo, alpha): positive scale sx/so and negative scale alpha*sx/so at the limits
    for k, (sx, zx, so, zo, alpha) in enumerate([
            (0.5, 3, 0.5 / 130, 0, 0.1),        # positive scale 130 > 2^7: refused
            (0.5, 3, 0.5 / 127, 0, 0.1),        # 127: accepted
            (1e-3, -7, 0.3, 10, 0.5),           # positive scale < 2^-8: refused
            (0.05, 10, 0.05, -10, 0.003),       # |negative scale| < 2^-8: refused
            (0.05, 10, 0.05, -10, 0.0040),      # just above 2^-8: accepted
            (0.2, 0, 0.002, 0, -1.5),           # negative scale -150: refused
            (0.2, 0, 0.002, 0, -1.2),           # -120: accepted
            (0.07, -128, 0.035, 127, 2.5),      # alpha > 1
            (0.0625, 0, 0.125, 0, 0.25)]):      # powers of two: exact .5 ties in the 8-bit multiply
        add(f"leakyrelu-int8-limit-{k}", unary("LEAKY_RELU", "int8", (sx, zx), (so, zo), x8,
                                               options={"alpha": alpha}), "LeakyRelu")
    add("leakyrelu-uint8", unary("LEAKY_RELU", "uint8", (0.03, 128), (0.02, 100), codes("uint8").reshape(2, 128),
                                 options={"alpha": 0.3}), "LeakyRelu")
    add("tanh-uint8", unary("TANH", "uint8", (0.04, 120), (1 / 128, 128), codes("uint8").reshape(2, 128)), "Tanh")
    x16 = codes("int16").reshape(1, -1)
    for k, s in enumerate([2.0 ** -13, 2.0 ** -12, 2.0 ** -10]):   # power-of-two int16 input scales
        add(f"logistic-int16-pot-{k}", unary("LOGISTIC", "int16", (s, 0), (1 / 32768, 0), x16), "Sigmoid")
        add(f"tanh-int16-pot-{k}", unary("TANH", "int16", (s, 0), (1 / 32768, 0), x16), "Tanh")
    return cs


SUITE = OptXnnSuite(with_backends(ref._cases()) + _limit_cases())
PARAMS = SUITE.params()


@pytest.mark.parametrize("case_id,backend", PARAMS, ids=[f"{c}[{b}]" for c, b in PARAMS])
def test_activation_matches_oracle(case_id, backend):
    assert_case(SUITE, case_id, backend, 2)


def test_reference_scheme_differs_from_xnnpack():
    """XNNPACK's 8-bit LeakyReLU multipliers differ from the reference kernel on these cases."""
    assert_reference_differs(SUITE, "xnnpack", {"LeakyRelu"})


def test_reference_scheme_differs_from_optimized():
    """The optimized int16 LOGISTIC / TANH (gemmlowp fixed point for power-of-two input scales)
    differ from the reference table kernels on these cases."""
    assert_reference_differs(SUITE, "opt", {"Sigmoid", "Tanh"})
