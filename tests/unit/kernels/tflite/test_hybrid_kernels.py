"""Hand tables for the dynamic-range input quantizers and the float32 FMA (refinterp/kernels/hybrid_*.py).

Expected values are derived by hand from the C semantics quoted in the module docstrings.
"""
from __future__ import annotations

import numpy as np

from refinterp.kernels.tflite.hybrid.quantize import asymmetric_rows, symmetric_rows
from refinterp.kernels.tflite.hybrid.xnnpack import fma_f32, qd8_rows

F32 = np.float32
JUST_BELOW_HALF = F32(0.49999997)  # 0.5 - 2^-25


def test_symmetric_vector_block_vs_scalar_tail_rounding():
    # range 127 -> scale 1, inv 1; the first 8 values take trunc(p +- 0.5) in float32, the 9th std::round
    row = np.array([[127, 0.5, 1.5, -0.5, -2.5, JUST_BELOW_HALF, -JUST_BELOW_HALF, 3.5, JUST_BELOW_HALF]], F32)
    q, s = symmetric_rows(row)
    assert s.tolist() == [1.0]
    # 0.49999997 + 0.5 = 1 - 2^-25 is a float32 tie -> 1.0 (even) -> 1 in the block, 0 in the tail
    assert q.tolist() == [[127, 1, 2, -1, -3, 1, -1, 4, 0]]


def test_symmetric_zero_row_and_clamp():
    q, s = symmetric_rows(np.array([[0, 0, 0], [-3, 1, 2]], F32))
    assert q.tolist()[0] == [0, 0, 0] and s[0] == 1
    assert q[1, 0] == -127 and s[1] == F32(F32(3) / F32(127))


def test_asymmetric_zero_points():
    q, s, z = asymmetric_rows(np.array([[0, 0]], F32))
    assert (q.tolist(), s.tolist(), z.tolist()) == ([[0, 0]], [1.0], [0])
    # [-128, 127]: scale (255 / 255) = 1; |zp error| 256 (from min) vs 254 (from max) -> from max = 0
    q, s, z = asymmetric_rows(np.array([[-128, 2.5, 127]], F32))
    assert s.tolist() == [1.0] and z.tolist() == [0] and q.tolist() == [[-128, 3, 127]]
    # all positive: min capped at 0 -> zero point -128; 1 * (255 / 4) = 63.75 -> 64
    q, s, z = asymmetric_rows(np.array([[1, 4]], F32))
    assert z.tolist() == [-128] and s[0] == F32(4 / 255) and q.tolist() == [[-64, 127]]
    # all negative: max capped at 0 -> zero point 127
    q, s, z = asymmetric_rows(np.array([[-4, -1]], F32))
    assert z.tolist() == [127] and q.tolist() == [[-128, 63]]


def test_xnn_qd8_row():
    # [-1, 1]: m = 127.5, zero point rint_even(127 - 127.5) = 0, q = rint_even(-127.5, 127.5) = (-128, 128 -> 127)
    q, inv, z = qd8_rows(np.array([[-1, 1]], F32))
    assert z.tolist() == [0] and q.tolist() == [[-128, 127]] and inv[0] == F32(1) / F32(127.5)
    # all zero: m = 1, (-128 + 0) + (127 + 0) = -1 is not > 0 -> zero point 127 - 0 = 127, q = 127
    q, inv, z = qd8_rows(np.array([[0, 0]], F32))
    assert q.tolist() == [[127, 127]] and inv.tolist() == [1.0] and z.tolist() == [127]


def test_fma_f32_single_rounding():
    # a*b = 2^-24 - 2^-60; c = 1 + 2^-23.  Exact sum lies just below the half-way point between
    # 1 + 2^-23 and 1 + 2^-22, so FMA gives 1 + 2^-23; summing in float64 first lands on the half-way
    # point and rounds to even (1 + 2^-22).
    a = np.array([2.0 ** -12 * (1 + 2.0 ** -18)], F32)
    b = np.array([2.0 ** -12 * (1 - 2.0 ** -18)], F32)
    c = np.array([1 + 2.0 ** -23], F32)
    assert fma_f32(a, b, c)[0] == F32(1 + 2.0 ** -23)
    assert F32(a[0].astype(np.float64) * b[0].astype(np.float64) + c[0].astype(np.float64)) == F32(1 + 2.0 ** -22)
    assert fma_f32(F32(3), F32(0.5), F32(0.25))[()] == F32(1.75)


def test_scheme_hybrid_key_is_validated_and_selects(tmp_path):
    import pytest

    import refinterp
    from refinterp.errors import SchemeError
    from refinterp.schemes.loader import load_scheme

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nextends: tflite-reference\nops:\n  FullyConnected: {hybrid: {rounding: x}}\n")
    with pytest.raises(SchemeError, match="ops.FullyConnected.hybrid.rounding"):
        load_scheme(str(bad))
    # a node override with compute: float wins over the op's hybrid variants
    over = tmp_path / "over.yaml"
    over.write_text("name: over\nextends: tflite-reference\nnodes:\n  '*fc1*': {compute: float}\n")
    from pathlib import Path

    fixture = Path(__file__).resolve().parents[3] / "fixtures" / "tflite" / "small_cnn_dynamic_range.tflite"
    g = refinterp.load(fixture)
    sc = load_scheme(str(over))
    picks = {n.name: sc.for_node(n, g).variants for n in g.nodes if n.op in ("Conv", "FullyConnected")}
    assert [v for k, v in picks.items() if "fc1" in k] == [["float"]]
    assert sum(v == ["tflite_hybrid_ref"] for v in picks.values()) == 2


def test_node_variants_override_beats_op_hybrid(tmp_path):
    from pathlib import Path

    import refinterp
    from refinterp.schemes.loader import load_scheme

    over = tmp_path / "over.yaml"
    over.write_text("name: over\nextends: tflite-reference\nnodes:\n  '*conv2*': {variants: [float]}\n")
    fixture = Path(__file__).resolve().parents[3] / "fixtures" / "tflite" / "small_cnn_dynamic_range.tflite"
    g = refinterp.load(fixture)
    sc = load_scheme(str(over))
    picks = {n.name: sc.for_node(n, g).variants for n in g.nodes if n.op == "Conv"}
    assert [v for k, v in picks.items() if "conv2" in k] == [["float"]]
    assert [v for k, v in picks.items() if "pw3" in k] == [["tflite_hybrid_ref"]]
