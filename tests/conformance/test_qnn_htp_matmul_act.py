"""MatMul of two activations under the ``qnn-htp-*`` schemes against Qualcomm's HTP emulation
(onnxruntime-qnn 2.7.0, QNN 2.51): B's columns re-quantized at run time (kernels/qnn_htp/matmul_act.py),
every QuantizeLinear output equal code for code, uint8 and int8, v68 and v73."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _init, _model
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
def test_b_made_by_an_add_near_the_middle_zero_point(tmp_path, transpose):
    """B made by an Add (through a Transpose or not) with its zero point 134, within 16 of uint8's middle: the
    HTP does not read B's stored codes -- the rule on those very codes (what refinterp gave before) differs from
    the emulator -- but the Add's result re-computed onto symmetric int8, which refinterp now models."""
    import refinterp
    from tests.conformance.test_qnn_htp_ops import _htp_many

    rng = np.random.default_rng(11)
    m, feeds = _add_then_matmul(rng, transpose)
    assert _check_many(tmp_path, [(m, feeds)], "73") > 0
    got = _htp_many(tmp_path, [(m, feeds)], "73")[0]
    b = got["bt_q" if transpose else "b"].astype(np.int64)  # B as stored, [K, N]
    assert (b == 0).any() and (b == 255).any()  # B's codes saturate at both ends
    i1, n1 = _qdq_in("a", 0.034, 139, np.uint8)
    i2, n2 = _qdq_in("b", 0.0343, 134, np.uint8)
    p = tmp_path / "codes.onnx"
    p.write_bytes(_matmul_of("a_d", "b_d", n1 + n2, i1 + i2, (("a", [16, 8]), ("b", [8, 16]))).SerializeToString())
    codes = {"a": ((got["a_q"].astype(np.int64) - 139) * F(0.034)).astype(F), "b": ((b - 134) * F(0.0343)).astype(F)}
    stored = refinterp.Session(refinterp.load(str(p)), "qnn-htp-v73").run(codes, capture=["y"])["y"]
    assert np.count_nonzero(stored != got["y"]) > 0


def _made_by(g: dict, kind: str, name: str, shape: list, s: float, z: int, act, rng) -> str:
    """An operand of ``shape`` made by ``kind`` through its QuantizeLinear (s, z); ``g`` collects nodes, initializers,
    graph inputs and feeds.  Kinds: input, Add, AddVec (a constant vector), Sub, Mul, MatMul (constant weights),
    Conv (1x1), Sigmoid, Tanh, Relu, Gelu, HardSwish, MaxPool, and T:<kind> (made transposed, then a Transpose)."""
    mid = 0 if act == "int8" else 128

    def inp(nm, sc, zz, shp):
        i, n = _qdq_in(nm, sc, zz, act)
        g["inits"] += i
        g["nodes"] += n
        g["ins"].append(helper.make_tensor_value_info(nm, TensorProto.FLOAT, shp))
        g["feeds"][nm] = rng.uniform(-4, 4, shp).astype(F)
        return nm + "_d"

    def const(nm, codes, sc, zz, dt):
        g["inits"] += [_init(codes, nm, dt), _init(sc, nm + "_s", F), _init(zz, nm + "_z", dt)]
        g["nodes"].append(helper.make_node("DequantizeLinear", [nm, nm + "_s", nm + "_z"], [nm + "_d"]))
        return nm + "_d"

    def op(o, ins, **kw):
        g["nodes"].append(helper.make_node(o, ins, [name + "_p"], **kw))
        return name + "_p"

    sr = lambda: float(F(rng.uniform(0.01, 0.05)))  # noqa: E731
    zr = lambda: int(rng.integers(mid - 98, mid + 98))  # noqa: E731
    if kind == "input":
        return inp(name, s, z, shape)
    if kind.startswith("T:"):
        perm = list(range(len(shape)))
        perm[-1], perm[-2] = perm[-2], perm[-1]
        t = _made_by(g, kind[2:], name + "t", [shape[i] for i in perm], s, z, act, rng)
        t = op("Transpose", [t], perm=perm)
    elif kind in ("Add", "Sub", "Mul"):
        t = op(kind, [inp(name + "u", sr(), zr(), shape), inp(name + "v", sr(), zr(), shape)])
    elif kind == "AddVec":
        c = const(name + "c", rng.integers(mid - 100, mid + 100, shape[-1:]), sr(), zr(), act)
        t = op("Add", [inp(name + "u", sr(), zr(), shape), c])
    elif kind == "MatMul":
        w = const(name + "w", rng.integers(-127, 128, (12, shape[-1])), 0.02, 0, np.int8)
        t = op("MatMul", [inp(name + "u", sr(), zr(), shape[:-1] + [12]), w])
    elif kind == "Conv":
        w = const(name + "w", rng.integers(-127, 128, (shape[1], 6, 1, 1)), 0.03, 0, np.int8)
        t = op("Conv", [inp(name + "u", sr(), zr(), shape[:1] + [6] + shape[2:]), w])
    elif kind == "MaxPool":
        t = op("MaxPool", [inp(name + "u", sr(), zr(), shape[:-1] + [2 * shape[-1]])], kernel_shape=[1, 2],
               strides=[1, 2])
    else:  # a one-input activation; a small output scale for Sigmoid / Tanh so the ends of B's range are reached
        t = op(kind, [inp(name + "u", 4 * sr(), zr(), shape)])
    io, no = _qdq_out(t, name + "_q", s, z, act)
    g["inits"] += io
    g["nodes"] += no
    return name + "_q_dq"


def _produced_job(rng, act, a_kind: str, b_kind: str, za: int, zb: int):
    """1 x 2 x 8 x 16 @ 1 x 2 x 16 x 8, A and B made by the given ops."""
    g = {"nodes": [], "inits": [], "ins": [], "feeds": {}}
    sa = float(F(rng.uniform(0.02, 0.06)))
    sb = {"Sigmoid": 1 / 200, "Tanh": 1 / 128}.get(b_kind, float(F(rng.uniform(0.02, 0.06))))
    a = _made_by(g, a_kind, "a", [1, 2, 8, 16], sa, za, act, rng)
    b = _made_by(g, b_kind, "b", [1, 2, 16, 8], sb, zb, act, rng)
    g["nodes"].append(helper.make_node("MatMul", [a, b], ["m"]))
    mid = 0 if act == "int8" else 128
    io, no = _qdq_out("m", "y", float(F(sa * sb * 4 * 40 * rng.uniform(0.5, 2))), int(rng.integers(mid - 90, mid + 90)),
                      act)
    return _model(g["nodes"] + no, g["inits"] + io, g["ins"],
                  [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)]), g["feeds"]


B_KINDS = ("Add", "AddVec", "Sub", "MatMul", "T:Add", "T:MatMul", "Mul", "Conv", "Sigmoid", "Tanh", "Relu", "Gelu",
           "HardSwish")
A_KINDS = ("Add", "Sub", "Mul", "MatMul", "Conv", "Sigmoid", "Relu", "Gelu", "T:Add")


@pytest.mark.parametrize("arch,act", [(a, act) for a in MAIN for act in ("uint8", "int8")])
def test_matmul_of_two_activations_after_compute_ops(tmp_path, arch, act):
    """B made by each producer measured, its zero point just inside the window around the middle of its type (the
    re-run onto symmetric int8 for Add / Sub / MatMul, the stored codes for the others), at either edge, just
    outside it and far from it; A made by each producer measured (read as stored).  Every code equal."""
    rng = np.random.default_rng(zlib.crc32(repr(("mm_made", arch, act)).encode()))
    mid = 0 if act == "int8" else 128
    jobs = []
    for kind in B_KINDS:
        for zb in (mid + 6, mid - 16 if kind in ("Add", "Mul") else mid + 16, mid + 17 if kind == "Add" else mid - 60):
            jobs.append(_produced_job(rng, act, "input", kind, mid, zb))
    for kind in A_KINDS:
        jobs.append(_produced_job(rng, act, kind, "input", mid + int(rng.choice([-60, 6, 70])), mid))
    _check_many(tmp_path, jobs, arch)


def test_matmul_of_two_activations_after_unmeasured_producers_is_refused(tmp_path):
    rng = np.random.default_rng(4)
    m, _ = _produced_job(rng, "uint8", "input", "MaxPool", 128, 60)
    assert "B is made by MaxPool" in _refused(tmp_path, m, "qnn-htp-v73")
    m, _ = _produced_job(rng, "uint8", "MaxPool", "input", 134, 128)
    assert "A is made by MaxPool" in _refused(tmp_path, m, "qnn-htp-v73")
