"""TFLite integer ADD / SUB / MUL / SQUARED_DIFFERENCE / MAXIMUM / MINIMUM vs LiteRT BUILTIN_REF and
tflite-micro, every tensor, 0 differing elements.

8-bit cases pair every code with every code (256 x 256 via a 4-D broadcast) for a sweep of scale
ratios (incl. extreme ones) and zero points, with and without fused activations; int16 cases use
the general-scale and the power-of-two paths.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance._qcases import Case, Suite, assert_case, binary, codes, rand  # noqa: E402

# (s1, z1, s2, z2, so, zo)
Q8 = [
    (0.05, 0, 0.05, 0, 0.1, 0),
    (0.02, -128, 0.07, 127, 0.09, -3),
    (0.0123, 17, 0.5, -30, 0.3, 50),
    (1e-3, 5, 1e-3, -5, 2e-3, 0),            # tiny scales
    (0.8, -100, 0.01, 100, 0.05, 120),       # extreme input ratio, saturating output
    (0.0625, 0, 0.125, 0, 0.25, 0),          # powers of two: exact ties everywhere
]
ACTS = ["NONE", "RELU", "RELU6", "RELU_N1_TO_1"]


def _all_pairs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    c = codes(dtype)
    return c.reshape(1, 16, 16, 1), c.reshape(1, 1, 1, 256)  # broadcasts to [1,16,16,256]


def _cases() -> list[Case]:
    cs: list[Case] = []
    rng = np.random.default_rng(3)

    def add(cid, built, op, backends=("ref", "tflm")):
        cs.append(Case(cid, built[0], built[1], op, backends))

    a, b = _all_pairs("int8")
    for k, (s1, z1, s2, z2, so, zo) in enumerate(Q8):
        act = ACTS[k % 4]
        q = ((s1, z1), (s2, z2), (so, zo))
        add(f"add-int8-{k}-{act}", binary("ADD", "int8", *q, a, b, {"fused_activation": act}), "Add")
        add(f"sub-int8-{k}-{act}", binary("SUB", "int8", *q, a, b, {"fused_activation": act}), "Sub")
        qm = ((s1, z1), (s2, z2), (s1 * s2 * [40, 100, 60, 300, 10, 16][k], zo))
        add(f"mul-int8-{k}-{act}", binary("MUL", "int8", *qm, a, b, {"fused_activation": act}), "Mul")
        qd = ((s1, z1), (s2, z2), (max(s1, s2) ** 2 * [50, 120, 30, 80, 20, 64][k], zo))
        add(f"sqdiff-int8-{k}", binary("SQUARED_DIFFERENCE", "int8", *qd, a, b), "SquaredDifference")
    # uint8 (legacy asymmetric type; LiteRT only)
    ua, ub = _all_pairs("uint8")
    qu = ((0.03, 128), (0.011, 3), (0.04, 120))
    add("add-uint8", binary("ADD", "uint8", *qu, ua, ub, {"fused_activation": "RELU"}), "Add", ("ref",))
    add("sub-uint8", binary("SUB", "uint8", *qu, ua, ub), "Sub", ("ref",))
    add("mul-uint8", binary("MUL", "uint8", (0.03, 128), (0.011, 3), (0.003, 100), ua, ub), "Mul", ("ref",))
    # broadcast shapes (4-D, both sides broadcasting) with random data
    for k, (sa, sb) in enumerate([((2, 1, 5, 3), (1, 4, 1, 3)), ((1, 3, 4, 1), (2, 1, 1, 6)),
                                  ((3, 1, 1, 1), (1, 2, 2, 7))]):
        xa, xb = rand(rng, sa, "int8"), rand(rng, sb, "int8")
        q = ((0.03, 4), (0.04, -9), (0.05, 2))
        add(f"add-int8-bcast-{k}", binary("ADD", "int8", *q, xa, xb), "Add")
        add(f"sub-int8-bcast-{k}", binary("SUB", "int8", *q, xa, xb), "Sub")
        add(f"mul-int8-bcast-{k}", binary("MUL", "int8", (0.03, 4), (0.04, -9), (0.01, 2), xa, xb), "Mul")
        add(f"max-int8-bcast-{k}", binary("MAXIMUM", "int8", (0.03, 4), (0.03, 4), (0.03, 4), xa, xb), "Max")
        add(f"min-int8-bcast-{k}", binary("MINIMUM", "int8", (0.03, 4), (0.03, 4), (0.03, 4), xa, xb), "Min")
    # SUB with an output multiplier > 1 (GreaterThanOne path)
    add("sub-int8-outmult-gt1", binary("SUB", "int8", (0.5, 3), (0.4, -2), (1e-7 * 2 ** 20, 0), a, b), "Sub",
        ("ref",))
    # int16 general scales (zero points 0), pot_scale_int16 false and true-but-not-POT
    x16a = codes("int16", 512).reshape(1, -1, 1)
    x16b = codes("int16", 64).reshape(1, 1, -1)
    for k, (s1, s2, so) in enumerate([(1 / 3000, 1 / 5000, 1 / 2500), (3e-4, 7e-5, 4e-4)]):
        q = ((s1, 0), (s2, 0), (so, 0))
        pot = bool(k)
        add(f"add-int16-general-{k}", binary("ADD", "int16", *q, x16a, x16b,
                                             {"pot_scale_int16": pot, "fused_activation": ACTS[k]}), "Add")
        add(f"sub-int16-general-{k}", binary("SUB", "int16", *q, x16a, x16b, {"pot_scale_int16": pot}), "Sub")
        add(f"mul-int16-{k}", binary("MUL", "int16", (s1, 0), (s2, 0), (s1 * s2 * 3000, 0), x16a, x16b), "Mul")
    # int16 power-of-two path (no broadcast: the LiteRT POT path has none)
    pa, pb = rand(rng, (1, 4, 4, 64), "int16"), rand(rng, (1, 4, 4, 64), "int16")
    for k, (e1, e2, eo) in enumerate([(-12, -14, -12), (-15, -13, -13)]):
        q = ((2.0 ** e1, 0), (2.0 ** e2, 0), (2.0 ** eo, 0))
        add(f"add-int16-pot-{k}", binary("ADD", "int16", *q, pa, pb, {"pot_scale_int16": True}), "Add")
        add(f"sub-int16-pot-{k}", binary("SUB", "int16", *q, pa, pb, {"pot_scale_int16": True}), "Sub")
    add("max-int16", binary("MAXIMUM", "int16", (1e-3, 0), (1e-3, 0), (1e-3, 0), pa, pb), "Max")
    add("min-int16", binary("MINIMUM", "int16", (1e-3, 0), (1e-3, 0), (1e-3, 0), pa, pb), "Min")
    return cs


SUITE = Suite(_cases())


@pytest.mark.parametrize("case_id,backend", SUITE.params(), ids=[f"{c}[{b}]" for c, b in SUITE.params()])
def test_elementwise_matches_oracle(case_id, backend):
    assert_case(SUITE, case_id, backend, 3)
