"""ADD / SUB / MUL / SQUARED_DIFFERENCE / MAXIMUM / MINIMUM under tflite-optimized and tflite-xnnpack
vs LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES and the default resolver with XNNPACK: every tensor,
0 differing elements, and (xnnpack) the same delegation decision as XNNPACK on every node.

Cases: the reference suite (every 8-bit code against every code through a 4-D broadcast for six
scale / zero-point triples incl. power-of-two ties and extreme ratios, fused activations, uint8,
4-D broadcasts, int16 general and power-of-two paths), plus XNNPACK's limits: ADD/SUB input/output
scale ratios at and beyond [2^-10, 2^8), MUL product/output ratios beyond [2^-16, 2^8) (those nodes
must run the built-in kernels).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance import test_tflite_int_elementwise as ref  # noqa: E402
from tests.conformance._opt_xnn_qcases import BACKENDS, OptXnnSuite, assert_reference_differs, with_backends  # noqa: E402
from tests.conformance._qcases import Case, assert_case, binary, rand  # noqa: E402


def _limit_cases() -> list[Case]:
    rng = np.random.default_rng(11)
    a, b = ref._all_pairs("int8")
    xa, xb = rand(rng, (2, 3, 4, 5), "int8"), rand(rng, (1, 3, 1, 5), "int8")
    cs = []

    def add(cid, built, op):
        cs.append(Case(cid, built[0], built[1], op, BACKENDS))

    # ADD / SUB: s_in / s_out ratio limits (float32): 256 refused, just below accepted, < 2^-10 refused
    for k, (s1, s2, so) in enumerate([(0.5, 0.01, 0.5 / 256), (0.5, 0.01, 0.5 / 255.9), (1e-4, 0.02, 0.2),
                                      (0.2 / 1024, 0.03, 0.2), (3.0, 2.0, 0.011)]):
        q = ((s1, 3), (s2, -7), (so, 1))
        add(f"add-int8-limit-{k}", binary("ADD", "int8", *q, xa, xb), "Add")
        add(f"sub-int8-limit-{k}", binary("SUB", "int8", *q, xa, xb, {"fused_activation": "RELU6"}), "Sub")
    # MUL: product / output ratio beyond [2^-16, 2^8)
    for k, (s1, s2, so) in enumerate([(0.5, 0.6, 0.001), (1e-3, 2e-3, 0.2), (0.05, 0.05, 0.0025 / 255.0),
                                      (0.02, 0.03, 0.02 * 0.03 * 65536 * 0.999)]):
        add(f"mul-int8-limit-{k}", binary("MUL", "int8", (s1, -4), (s2, 9), (so, -20), a, b), "Mul")
    # uint8 / int8 with every zero point sign and fused RELU_N1_TO_1 on MUL
    add("mul-uint8-relun1", binary("MUL", "uint8", (0.05, 200), (0.04, 10), (0.02, 128),
                                   *ref._all_pairs("uint8"), {"fused_activation": "RELU_N1_TO_1"}), "Mul")
    # uint8 MUL, product/output ratios > 1: saturated outputs; the scalar-broadcast NEON loop narrows
    # to int16 by wrapping (vmovn_s32), the elementwise one saturates (same shapes)
    ua, ub = ref._all_pairs("uint8")
    for ratio in (3.3, 32.0, 200.0):
        so = float(np.float32(np.float32(0.05 * 0.02) / np.float32(ratio)))
        add(f"mul-uint8-ratio{ratio:g}", binary("MUL", "uint8", (0.05, 128), (0.02, 120), (so, 131), ua, ub), "Mul")
        add(f"mul-uint8-ratio{ratio:g}-same-shape",
            binary("MUL", "uint8", (0.05, 128), (0.02, 120), (so, 131), *(np.broadcast_arrays(ua, ub))), "Mul")
    return cs


SUITE = OptXnnSuite(with_backends(ref._cases()) + _limit_cases())
PARAMS = SUITE.params()


@pytest.mark.parametrize("case_id,backend", PARAMS, ids=[f"{c}[{b}]" for c, b in PARAMS])
def test_elementwise_matches_oracle(case_id, backend):
    assert_case(SUITE, case_id, backend, 3)


def test_reference_scheme_differs_from_xnnpack():
    """XNNPACK's 20-bit ADD/SUB and float MUL differ from the reference kernels on these cases."""
    assert_reference_differs(SUITE, "xnnpack", {"Add", "Sub", "Mul"})
