"""refinterp/quant/htp_norm.py (the HTP's LayerNormalization arithmetic) and the run-time refusal of
undecided rows; the rule itself is verified against the emulator in
tests/conformance/test_qnn_htp_norm.py."""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from refinterp.quant import htp_norm

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.errors import UnsupportedOpError  # noqa: E402

F = np.float32


def test_rsqrt_is_the_bit_trick_with_two_newton_steps():
    v = np.geomspace(1e-6, 1e9, 20001).astype(F)
    r = htp_norm.rsqrt(v).astype(np.float64)
    err = r * np.sqrt(v.astype(np.float64)) - 1
    assert -5e-6 < err.min() and err.max() < 1e-6  # two Newton steps from the 0x5f3759df seed: at most -4.7e-6
    assert np.count_nonzero(err < -1e-6) > 1000  # ... and not the correctly rounded one


@pytest.mark.parametrize("n", [49, 64, 100, 197, 768])
def test_mean_is_the_exact_product_with_the_float32_reciprocal(n):
    rng = np.random.default_rng(n)
    q = rng.integers(0, 256, (300, n))
    q[0] = 25  # a constant row (S divisible by n): below 64 S / n when f32(1 / n) is below 1 / n
    inv = Fraction(float(F(1) / F(n)))
    want = [int(np.floor(Fraction(int(s) * 64) * inv)) for s in q.sum(axis=1)]
    assert htp_norm.mean64(q).tolist() == want
    if inv < Fraction(1, n):
        assert want[0] == 64 * int(q[0, 0]) - 1  # one 1/64 step under the exact mean


def test_multiplier_keeps_16_bits_with_a_shift():
    m, k, other = htp_norm.multiplier(np.array([1.001, 3.001, 0.501, 2.0 ** -17], np.float64), 1.0, 1.0)
    assert k.tolist() == [1, 2, 0, 0] and m.tolist() == [32800, 49168, 32833, 0]  # floor(r 2^16 / 2^k) < 2^16
    assert (other == m).all()  # none within the guard of a step
    m, k, other = htp_norm.multiplier(np.array([1000.0000001 / 2 ** 16, 1.0], np.float64), 1.0, 1.0)
    assert m.tolist() == [1000, 32768] and other.tolist() == [999, 32767]  # on or just above a step: undecided


def test_beta_is_rounded_half_away_from_zero():
    assert htp_norm.beta_codes(np.array([-5, -3, -1, 1, 3, 5]), 0.5, 1.0).tolist() == [-3, -2, -1, 1, 2, 3]


def _ln_model(tmp_path, rows: np.ndarray, s_x=0.05, s_g=0.01, s_y=0.05):
    n, length = rows.shape
    init = lambda v, name, dt: numpy_helper.from_array(np.asarray(v, dt), name)  # noqa: E731
    inits = [init(s_x, "s", F), init(128, "z", np.uint8), init(s_y, "ys", F), init(128, "yz", np.uint8),
             init(np.arange(length) % 200 + 30, "g", np.uint8), init(s_g, "gs", F), init(20, "gz", np.uint8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
             helper.make_node("DequantizeLinear", ["g", "gs", "gz"], ["gd"]),
             helper.make_node("LayerNormalization", ["xd", "gd"], ["ln"], axis=-1),
             helper.make_node("QuantizeLinear", ["ln", "ys", "yz"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [n, length])],
                          [helper.make_tensor_value_info("y", TensorProto.UINT8, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    p = tmp_path / "ln.onnx"
    p.write_bytes(m.SerializeToString())
    return refinterp.Session(refinterp.load(str(p)), "qnn-htp-v73"), ((rows - 128) * F(s_x)).astype(F)


def test_undecided_rows_are_refused_when_run(tmp_path):
    """A row whose multiplier lies within GUARD of a step, with codes that depend on the side: the Session
    refuses it naming the node and the row; the other rows run."""
    rng = np.random.default_rng(3)
    q = rng.integers(0, 256, (20000, 64))
    g = (np.arange(64) % 200 + 30 - 20).astype(np.int64)
    _, undecided = htp_norm.layer_norm(q, 0, float(F(0.05)), float(F(1e-5)), g, float(F(0.01)), float(F(0.05)))
    assert 0 < undecided.sum() < 40  # about one row in 2,000
    bad, good = q[undecided][:1], q[~undecided][:7]
    sess, x = _ln_model(tmp_path, np.concatenate([good, bad]))
    with pytest.raises(UnsupportedOpError, match=r"LayerNormalization.*row 7 \(of 8\)"):
        sess.run({"x": x})
    sess, x = _ln_model(tmp_path, good)
    assert sess.run({"x": x})["y"].shape == (7, 64)
