"""MatMul of two activations under the ``qnn-htp-*`` schemes against Qualcomm's HTP emulation
(onnxruntime-qnn 2.7.0, QNN 2.51): B's columns re-quantized at run time (kernels/qnn_htp/matmul_act.py),
every QuantizeLinear output equal code for code, uint8 and int8, v68 and v73."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _model
from tests.conformance.test_qnn_htp_ops import MAIN, _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _mm_job(rng, act, a_shape, b_shape, za=None, zb=None, every_pair=False, transpose_b=False):
    """A (a_shape) @ B (b_shape), both through their own QuantizeLinear / DequantizeLinear; ``every_pair``:
    K = 1 with A a column of every code and B a row of every code (each output one pair of codes);
    ``transpose_b``: B arrives as its transpose through a Transpose (attention's K^T)."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    sa, sb = (float(F(rng.uniform(0.01, 0.1))) for _ in range(2))
    za = int(rng.integers(lo + 20, hi - 19)) if za is None else za
    zb = int(rng.integers(lo + 20, hi - 19)) if zb is None else zb
    zy = int(rng.integers(lo + 40, hi - 39))
    K = a_shape[-1]
    sy = float(F(sa * sb * np.sqrt(K) * 40 * rng.uniform(0.5, 2)))
    if every_pair:
        qa, qb = np.arange(lo, hi + 1)[:, None], np.arange(lo, hi + 1)[None, :]
    else:
        qa, qb = rng.integers(lo, hi + 1, a_shape), rng.integers(lo, hi + 1, b_shape)
        # some columns narrow, so columns kept as they are and re-quantized ones meet in one matrix
        qb[..., :4] = np.clip(zb + rng.integers(-100, 101, qb[..., :4].shape), lo, hi)
    feeds_b = np.swapaxes(qb, -1, -2) if transpose_b else qb
    i1, n1 = _qdq_in("a", sa, za, act)
    i2, n2 = _qdq_in("b", sb, zb, act)
    nodes, inits = n1 + n2, i1 + i2
    src = "b_d"
    if transpose_b:
        perm = list(range(feeds_b.ndim))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        nodes += [helper.make_node("Transpose", ["b_d"], ["bt"], perm=perm),  # a QDQ Transpose, same parameters
                  helper.make_node("QuantizeLinear", ["bt", "b_s", "b_z"], ["bt_q"]),
                  helper.make_node("DequantizeLinear", ["bt_q", "b_s", "b_z"], ["bt_d"])]
        src = "bt_d"
    nodes.append(helper.make_node("MatMul", ["a_d", src], ["m"]))
    io, no = _qdq_out("m", "y", sy, zy, act)
    m = _model(nodes + no, inits + io,
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(qa.shape)),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, list(feeds_b.shape))],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    return m, {"a": ((qa - za) * F(sa)).astype(F), "b": ((feeds_b - zb) * F(sb)).astype(F)}


@pytest.mark.parametrize("arch,act", [(a, act) for a in MAIN for act in ("uint8", "int8")])
def test_matmul_of_two_activations(tmp_path, arch, act):
    """Every pair of codes (K = 1) at zero points that put B's codes beyond int8 on either side and at the
    middle; random K from 2 to 100; batched 3-D / 4-D operands, broadcasts of either side, a 1-D operand,
    B through a Transpose (attention's Q K^T)."""
    rng = np.random.default_rng(zlib.crc32(repr(("mm_act", arch, act)).encode()))
    mid = 0 if act == "int8" else 128
    jobs = [_mm_job(rng, act, (256, 1), (1, 256), zb=zb, every_pair=True) for zb in (mid - 90, mid + 70, mid)]
    for K in (2, 8, 33, 100):
        jobs.append(_mm_job(rng, act, (40, K), (K, 36)))
    for a_shape, b_shape in (((2, 3, 16, 24), (2, 3, 24, 20)), ((4, 16, 24), (4, 24, 20)), ((2, 3, 16, 24), (24, 20)),
                             ((2, 3, 16, 24), (1, 3, 24, 20)), ((16, 24), (3, 24, 20)), ((24,), (2, 24, 20)),
                             ((5, 24), (24,))):
        jobs.append(_mm_job(rng, act, a_shape, b_shape))
    jobs.append(_mm_job(rng, act, (1, 4, 32, 16), (1, 4, 16, 32), transpose_b=True))
    _check_many(tmp_path, jobs, arch)


def test_matmul_of_two_activations_refusals(tmp_path):
    rng = np.random.default_rng(5)
    m, _ = _mm_job(rng, "uint16", (8, 16), (16, 8))
    assert "8-bit operands" in _refused(tmp_path, m, "qnn-htp-v73")


SY = float(F(0.034 * 0.0343 * np.sqrt(8) * 40))


def _matmul_of(a_src, b_src, nodes, inits, ins):
    io, no = _qdq_out("m", "y", SY, 131, np.uint8)
    return _model(nodes + [helper.make_node("MatMul", [a_src, b_src], ["m"])] + no, inits + io,
                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in ins],
                  [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])


def _add_then_matmul(rng, transpose: bool):
    """A (graph input) @ B, B = Add(u, v) through its QuantizeLinear (``transpose``: made [N, K] and handed on by
    a same-parameter Transpose, as attention's K^T), u + v reaching past both ends of B's uint8 range."""
    act, K, N = np.uint8, 8, 16
    i1, n1 = _qdq_in("a", 0.034, 139, act)
    iu, nu = _qdq_in("u", 0.03, 128, act)
    iv, nv = _qdq_in("v", 0.02, 128, act)
    ib, nb = _qdq_out("s", "b", 0.0343, 134, act)
    nodes, inits = n1 + nu + nv + [helper.make_node("Add", ["u_d", "v_d"], ["s"])] + nb, i1 + iu + iv + ib
    src, shape = "b_dq", [K, N]
    if transpose:
        nodes += [helper.make_node("Transpose", ["b_dq"], ["bt"], perm=[1, 0]),
                  helper.make_node("QuantizeLinear", ["bt", "b_s", "b_z"], ["bt_q"]),
                  helper.make_node("DequantizeLinear", ["bt_q", "b_s", "b_z"], ["bt_d"])]
        src, shape = "bt_d", [N, K]
    m = _matmul_of("a_d", src, nodes, inits, (("a", [16, K]), ("u", shape), ("v", shape)))
    return m, {"a": rng.uniform(-3, 3, (16, K)).astype(F), "u": rng.uniform(-3, 3, shape).astype(F),
               "v": rng.uniform(-3, 3, shape).astype(F)}


@pytest.mark.parametrize("transpose", [False, True])
def test_matmul_of_two_activations_after_a_compute_op_is_refused(tmp_path, transpose):
    """The rule is measured with operands from graph inputs.  With B made by an Add (through a Transpose or not)
    the HTP reads B otherwise than its stored codes (MEASURED.md): the emulator's result differs from the rule
    on those very codes -- a wrong answer refinterp gave before -- so the Session refuses the node."""
    import refinterp
    from tests.conformance.test_qnn_htp_ops import _htp_many

    rng = np.random.default_rng(11)
    m, feeds = _add_then_matmul(rng, transpose)
    msg = _refused(tmp_path, m, "qnn-htp-v73")
    assert "B is made by Add" in msg and "graph inputs only" in msg, msg
    got = _htp_many(tmp_path, [(m, feeds)], "73")[0]
    b = got["bt_q" if transpose else "b"].astype(np.int64)  # B as the MatMul reads it, [K, N]
    assert (b == 0).any() and (b == 255).any()  # B's codes saturate at both ends
    # the same codes from graph inputs: the rule refinterp applied before (measured exact there)
    i1, n1 = _qdq_in("a", 0.034, 139, np.uint8)
    i2, n2 = _qdq_in("b", 0.0343, 134, np.uint8)
    p = tmp_path / "codes.onnx"
    p.write_bytes(_matmul_of("a_d", "b_d", n1 + n2, i1 + i2, (("a", [16, 8]), ("b", [8, 16]))).SerializeToString())
    codes = {"a": ((got["a_q"].astype(np.int64) - 139) * F(0.034)).astype(F), "b": ((b - 134) * F(0.0343)).astype(F)}
    rule = refinterp.Session(refinterp.load(str(p)), "qnn-htp-v73").run(codes, capture=["y"])["y"]
    assert np.count_nonzero(rule != got["y"]) > 0
