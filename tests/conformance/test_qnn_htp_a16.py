"""16-bit activations ("a16w8") under the ``qnn-htp-*`` schemes against Qualcomm's HTP emulation
(onnxruntime-qnn 2.7.0, QNN 2.51), beyond the convolution layers of test_qnn_htp_ops.py: Add / Sub of two
tensors, Mul of two tensors, data movement and pooling, and the v68 16-bit convolution over every input code; every
QuantizeLinear output equal code for code."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from refinterp.passes.qdq_htp import INPUT_FOLDS
from refinterp.quant import htp_curve16, htp_ops

from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import (MAIN, _check_many, _check_measured_or_refused, _conv_model,
                                                _ep_refuses, _htp_many, _qdq_in, _qdq_out, _refused)

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
A16 = [(a, act) for a in MAIN for act in ("uint16", "int16")]


@pytest.mark.parametrize("arch,act", A16)
def test_a16_sub(tmp_path, arch, act):
    """Sub of two 16-bit tensors (htp_ops.sub16_params): random code pairs at 8 scale / zero-point sets,
    output scales from 1/3 to 30 times the inputs' (p from 13 up to the cap at 16), zero points anywhere
    or near the middle; and a set whose offset does not fit 32 bits, refused (the emulator's outputs are
    then all the lowest code, asserted)."""
    info = np.iinfo(act)
    mid = 32768 if act == "uint16" else 0
    rng = np.random.default_rng(zlib.crc32(repr(("a16sub", act)).encode()))
    jobs, ps = [], set()
    for trial in range(8):
        s1 = float(F(10 ** rng.uniform(-4, -2)))
        s2 = float(F(s1 * 10 ** rng.uniform(-1, 1)))
        sy = float(F(max(s1, s2) * 10 ** rng.uniform(-0.5, 1.5)))
        if trial % 2:
            z1, z2, zy = (mid + int(rng.integers(-3000, 3000)) for _ in range(3))
        else:
            z1, z2, zy = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(3))
        m1, m2 = float(F(F(s1) / F(sy))), float(F(F(s2) / F(sy)))
        try:
            ps.add(htp_ops.sub16_params(m1, m2, z1, z2, zy, mid and -mid)[0])
        except ValueError:
            continue  # an offset beyond 32 bits: the refusal is tested below
        jobs.append(_two_input_job(rng, "Sub", act, (s1, z1), (s2, z2), (sy, zy), 1 << 14))
    assert len(jobs) >= 6 and 16 in ps and min(ps) < 16, ps
    _check_many(tmp_path, jobs, arch)
    # z'_y 2^16 - (z'_1 - z'_2) i with i = 29,491: K_0 = 2^31 + 934
    job = _two_input_job(rng, "Sub", act, (0.001, mid - 14098), (0.001, mid + 14000),
                         (float(F(F(0.001) / F(0.45))), mid + 20124), 1 << 10)
    assert "does not fit 32 bits" in _refused(tmp_path, job[0], f"qnn-htp-v{arch}")
    (got,) = _htp_many(tmp_path, [job], arch)
    assert np.all(got["y"] == info.min), "finding: the HTP computed this Sub; the refusal is stale"
    if act == "uint16":  # the offset on the raw codes, K_0 + 32768 (i_2 - i_1), crosses 2^31 from z_y = 50451 up
        near = [_two_input_job(rng, "Sub", act, (float(F(2.0 ** -10 * 0.0085)), 65022), (33181 * 2.0 ** -27, 61776),
                               (2.0 ** -10, zy), 1 << 12) for zy in (50450, 50451)]
        _check_many(tmp_path, near[:1], arch)
        assert "does not fit 32 bits" in _refused(tmp_path, near[1][0], f"qnn-htp-v{arch}")
        (got,) = _htp_many(tmp_path, near[1:], arch)
        assert np.all(got["y"] == 0), "finding: the HTP computed this Sub; the refusal is stale"


def _two_input_job(rng, op, act, a, b, y, n, n_b=None):
    """op(a, b) of a [1, n] and a [1, n_b] (default n) tensor with (scale, zero point) a, b, y; random codes."""
    info = np.iinfo(act)
    shape_b = [1, n if n_b is None else n_b]
    i1, n1 = _qdq_in("a", a[0], a[1], act)
    i2, n2 = _qdq_in("b", b[0], b[1], act)
    io, no = _qdq_out("s", "y", y[0], y[1], act)
    m = _model(n1 + n2 + [helper.make_node(op, ["a_d", "b_d"], ["s"])] + no, i1 + i2 + io,
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, n]),
                helper.make_tensor_value_info("b", TensorProto.FLOAT, shape_b)],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    qa = rng.integers(int(info.min), int(info.max) + 1, (1, n))
    qb = rng.integers(int(info.min), int(info.max) + 1, shape_b)
    return m, {"a": ((qa - a[1]) * F(a[0])).astype(F), "b": ((qb - b[1]) * F(b[0])).astype(F)}


def _after_producer(rng, act, producer, xs, xz):
    """x -> Q/DQ (xs, xz), then ``producer`` ("input": none; Add of x and x, a 4-channel 1x1 Conv, a 2x2 MaxPool,
    Sigmoid, Tanh) through its own Q/DQ: (initializers, nodes, the float tensor to read, its scale).  Sigmoid / Tanh
    are declared on random parameters, which the QNN EP replaces (htp_curve16.ENCODING)."""
    lo, hi = int(np.iinfo(act).min), int(np.iinfo(act).max)
    inits, nodes = _qdq_in("x", xs, xz, act)
    if producer == "input":
        return inits, nodes, "x_d", xs
    if producer == "Conv":
        inits += [_init(rng.integers(-127, 128, (4, 4, 1, 1)).astype(np.int8), "w", np.int8),
                  _init(0.01, "ws", np.float32), _init(0, "wz", np.int8)]
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"]),
                  helper.make_node("Conv", ["x_d", "wd"], ["p"])]
        s_src, declared = float(F(xs * 0.3)), None
    elif producer == "Add":
        nodes.append(helper.make_node("Add", ["x_d", "x_d"], ["p"]))
        s_src, declared = float(F(xs * rng.uniform(1.5, 3))), None
    elif producer == "MaxPool":
        nodes.append(helper.make_node("MaxPool", ["x_d"], ["p"], kernel_shape=[2, 2]))
        s_src, declared = xs, (xs, xz)
    else:
        nodes.append(helper.make_node(producer, ["x_d"], ["p"]))
        s_src = htp_curve16.ENCODING[producer, act][0]
        declared = (float(F(rng.uniform(1e-5, 1e-4))), None)
    sq, zq = declared or (s_src, None)
    i2, n2 = _qdq_out("p", "pq", sq, int(rng.integers(lo, hi + 1)) if zq is None else zq, act)
    return inits + i2, nodes + n2, "pq_dq", s_src


def _feeding_job(rng, act, producer, xs, xz, inits, nodes, ys, yz):
    """The model of ``nodes`` ending in a float "m", quantized onto (ys, yz); every code through a graph input,
    random codes after other producers."""
    lo, hi = int(np.iinfo(act).min), int(np.iinfo(act).max)
    io, no = _qdq_out("m", "y", ys, yz, act)
    shape = [1, 4, 128, 128] if producer == "input" else [1, 4, 16, 16]
    m = _model(nodes + no, inits + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    q = np.arange(lo, hi + 1).reshape(shape) if producer == "input" else rng.integers(lo, hi + 1, shape)
    return m, {"x": ((q - xz) * F(xs)).astype(F)}


@pytest.mark.parametrize("arch,act", A16)
def test_a16_mul(tmp_path, arch, act):
    """Mul of two 16-bit tensors (refinterp/quant/htp_mul16.py): multipliers M from 1e-8 to 0.12 (one in each
    decade, codes spread so that some outputs saturate and most do not), random zero points, zero points
    at the ends of the range and in the middle, a tie of M 2^34 (rounded to even: half up misses 2,402 codes
    there), a broadcast operand and x * x; and M >= 1/8, refused."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    rng = np.random.default_rng(zlib.crc32(repr(("a16mul", act)).encode()))
    jobs = []

    def job(z1, z2, zy, M, n_b=None, spread=None, square=False, tie=False):
        while True:
            s1, s2 = (float(F(rng.uniform(0.001, 0.01))) for _ in range(2))
            if square:
                s2 = s1
            sy = float(F(s1 * s2 / M))
            m_htp = float(F(F(F(s1) * F(s2)) / F(sy)))
            if not tie or (m_htp * 2.0 ** 34) % 2 == 0.5:  # a tie that half to even rounds down
                break
        spread = spread or int(min(40000, np.sqrt(30000 / M)))
        n = 1 << 14
        shape_b = [1, n if n_b is None else n_b]
        i1, n1 = _qdq_in("a", s1, z1, act)
        i2, n2 = _qdq_in("b", s2, z2, act)
        io, no = _qdq_out("s", "y", sy, zy, act)
        mul = helper.make_node("Mul", ["a_d", "a_d" if square else "b_d"], ["s"])
        m = _model(n1 + ([] if square else n2) + [mul] + no, i1 + ([] if square else i2) + io,
                   [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, n])]
                   + ([] if square else [helper.make_tensor_value_info("b", TensorProto.FLOAT, shape_b)]),
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        qa = np.clip(z1 + rng.integers(-spread, spread + 1, (1, n)), lo, hi)
        qb = np.clip(z2 + rng.integers(-spread, spread + 1, shape_b), lo, hi)
        feeds = {"a": ((qa - z1) * F(s1)).astype(F)}
        if not square:
            feeds["b"] = ((qb - z2) * F(s2)).astype(F)
        jobs.append((m, feeds))

    def z():
        return int(rng.integers(lo, hi + 1))

    for e in range(-8, 0):
        job(z(), z(), z(), 10 ** (e + rng.uniform(0, 1)) * (0.12 if e == -1 else 1))
    job(lo, hi, lo + 100, 2e-5)
    job(hi, hi, hi - 50, 3e-6)
    job(lo + 32768, lo + 32768, z(), 1 / 4000)
    job(lo + 10, lo + 20, z(), 4.65e-4, tie=True, spread=40000)  # M 2^34 on a tie, a large range bias
    job(z(), z(), z(), 5e-5, n_b=1)
    job(z(), z(), z(), 1e-4, square=True)
    _check_many(tmp_path, jobs, arch)
    job(z(), z(), z(), 0.2)
    assert "outside (0, 1/8)" in _refused(tmp_path, jobs[-1][0], f"qnn-htp-v{arch}")


@pytest.mark.parametrize("arch,act", A16)
def test_a16_mul_by_constant(tmp_path, arch, act):
    """A 16-bit Mul by a one-element constant runs the two-tensor kernel after a graph input's QuantizeLinear
    (every code, 4 constants), after an Add (4 constants) and after a 16-bit Sigmoid / Tanh (3 constants each, in
    the encoding the QNN EP imposes on their outputs); after a Conv it is refused (measured to differ).
    The two-tensor kernel itself does not depend on the producers: a Conv's or an Add's output times the graph
    input (2 each)."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    rng = np.random.default_rng(zlib.crc32(repr(("a16mulc", act)).encode()))

    def job(producer, two_tensor=False):
        xs = float(F(rng.uniform(1e-4, 1e-3)))
        xz, cz, qc, yz = (int(rng.integers(lo, hi + 1)) for _ in range(4))
        inits, nodes, src, s_src = _after_producer(rng, act, producer, xs, xz)
        cs = float(F(rng.uniform(1e-4, 1e-3)))
        if two_tensor:  # times the graph input's codes
            nodes.append(helper.make_node("Mul", [src, "x_d"], ["m"]))
            ys = float(F(s_src * xs / 10 ** rng.uniform(-6, -3)))
        else:
            inits += [_init(np.array([qc], act), "k", getattr(np, act)), _init(cs, "ks", np.float32),
                      _init(cz, "kz", getattr(np, act))]
            nodes += [helper.make_node("DequantizeLinear", ["k", "ks", "kz"], ["kd"]),
                      helper.make_node("Mul", [src, "kd"], ["m"])]
            ys = float(F(s_src * max(abs(qc - cz), 1) * cs / 10 ** rng.uniform(-6, -2)))
        return _feeding_job(rng, act, producer, xs, xz, inits, nodes, ys, yz)

    jobs = [job(p) for p in ("input", "Add") for _ in range(4)] + [job(p) for p in ("Sigmoid", "Tanh") for _ in range(3)]
    _check_many(tmp_path, jobs + [job(p, two_tensor=True) for p in ("Conv", "Add") for _ in range(2)], arch)
    assert "codes made by Conv" in _refused(tmp_path, job("Conv")[0], f"qnn-htp-v{arch}")


@pytest.mark.parametrize("arch,act", A16)
def test_a16_add(tmp_path, arch, act):
    """Add of two 16-bit tensors (htp_ops.add16_params): random code pairs at 6 scale / zero-point sets
    (ratios 0.1 .. 10, output scales above both, zero-point terms odd and even) and one broadcast; an Add and a
    Sub whose multiplier lies on a rounding tie."""
    info = np.iinfo(act)
    rng = np.random.default_rng(zlib.crc32(repr(("a16add", act)).encode()))
    jobs, odd = [], 0
    for trial in range(7):
        s1 = float(F(10 ** rng.uniform(-4, -2)))
        s2 = float(F(s1 * 10 ** rng.uniform(-1, 1)))
        sy = float(F(max(s1, s2) * 10 ** rng.uniform(0, 0.6)))
        z1, z2, zy = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(3))
        jobs.append(_two_input_job(rng, "Add", act, (s1, z1), (s2, z2), (sy, zy), 1 << 15,
                                   n_b=None if trial < 6 else 1))  # the last one broadcasts b
        m1, m2 = float(F(F(s1) / F(sy))), float(F(F(s2) / F(sy)))
        _, j1, j2, _ = htp_ops.add16_params(m1, m2, z1, z2, zy)
        odd += (z1 * j1 + z2 * j2) % 2
    assert 0 < odd < 7  # both parities of the zero-point term (the evened offset)
    # multipliers on a rounding tie, M_2 2^16 = 16590.5, go to even (half up: 900-8,966 of 32,768 off), Add and Sub
    mid = 32768 if act == "uint16" else 0
    for op in ("Add", "Sub"):
        z1, z2, zy = (mid + int(rng.integers(-2000, 2000)) for _ in range(3))
        jobs.append(_two_input_job(rng, op, act, (float(F(2.0 ** -10 * 0.0085)), z1), (33181 * 2.0 ** -27, z2),
                                   (2.0 ** -10, zy), 1 << 15))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch,act", A16)
def test_a16_add_and_sub_with_a_constant(tmp_path, arch, act):
    """A 16-bit Add with a one-element constant operand is the two-tensor kernel (htp_ops.add16_params), the
    constant on either side: after a graph input's QuantizeLinear over every code and after Conv, Add, MaxPool,
    Sigmoid and Tanh (random constants, scales and zero points).  A Sub with one is refused (measured 1-2 codes in
    65,536 off on some sets)."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    rng = np.random.default_rng(zlib.crc32(repr(("a16addc", act)).encode()))

    def job(producer, first, op="Add"):
        xs, xz = float(F(10 ** rng.uniform(-4, -3))), int(rng.integers(lo, hi + 1))
        inits, nodes, src, s_src = _after_producer(rng, act, producer, xs, xz)
        cq, cz = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
        cs = float(F(s_src * 10 ** rng.uniform(-1, 1) * 30000 / max(abs(cq - cz), 1)))
        inits += [_init(np.array(cq), "k", getattr(np, act)), _init(cs, "ks", np.float32),
                  _init(cz, "kz", getattr(np, act))]
        nodes += [helper.make_node("DequantizeLinear", ["k", "ks", "kz"], ["kd"]),
                  helper.make_node(op, ["kd", src] if first else [src, "kd"], ["m"])]
        return _feeding_job(rng, act, producer, xs, xz, inits, nodes,
                            float(F(max(s_src, cs) * 10 ** rng.uniform(0, 0.6))), int(rng.integers(lo, hi + 1)))

    jobs = [job(p, first) for p in ("input", "Conv", "Add", "MaxPool", "Sigmoid", "Tanh") for first in (False, True)]
    _check_many(tmp_path, jobs, arch)
    assert "one-element constant" in _refused(tmp_path, job("input", False, op="Sub")[0], f"qnn-htp-v{arch}")


@pytest.mark.parametrize("arch,act", A16)
def test_a16_requantizing_data_movement(tmp_path, arch, act):
    """Concat (an input on other parameters than the output), Reshape, Transpose, edge / reflect Pad and
    (uint16) DepthToSpace onto other parameters, fed by graph inputs (every code, on the input's grid): the
    HTP folds the requantization into the input's QuantizeLinear; Reshape runs as that fold (passes/qdq_htp.py
    ``_input_folds``) and equals the emulator on every code, the rest is refused naming the node (the
    65,536-entry copy table of kernels/qnn_htp/shape.py agrees with the fold on inputs already on the input's
    grid, as here, not on others: test_qnn_htp_requant_moves.py)."""
    rng = np.random.default_rng(zlib.crc32(repr(("a16move", act)).encode()))
    info = np.iinfo(act)
    q = np.arange(int(info.min), int(info.max) + 1)
    code = lambda: int(rng.integers(int(info.min), int(info.max) + 1))  # noqa: E731
    ops = ["Concat", "Reshape", "Transpose", "Pad-edge", "Pad-reflect"] + (["DepthToSpace"] if act == "uint16" else [])
    jobs = []
    for op in ops:
        s1, s2 = (float(F(10 ** rng.uniform(-4, -2))) for _ in range(2))
        z1, z2 = code(), code()
        ys = float(F(max(s1, s2) * 10 ** rng.uniform(-0.5, 0.5)))
        i1, n1 = _qdq_in("a", s1, z1, act)
        shape = [1, 4, 128, 128]
        ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, shape)]
        feeds = {"a": ((q - z1) * F(s1)).astype(F).reshape(shape)}
        if op == "Concat":
            i2, n2 = _qdq_in("b", s2, z2, act)
            i1, n1 = i1 + i2, n1 + n2 + [helper.make_node("Concat", ["a_d", "b_d"], ["r"], axis=1)]
            ins.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, shape))
            feeds["b"] = ((rng.permutation(q) - z2) * F(s2)).astype(F).reshape(shape)
        elif op == "Reshape":
            i1 = i1 + [_init(np.array([1, 256, 256]), "shp", np.int64)]
            n1.append(helper.make_node("Reshape", ["a_d", "shp"], ["r"]))
        elif op == "Transpose":
            n1.append(helper.make_node("Transpose", ["a_d"], ["r"], perm=[0, 3, 2, 1]))
        elif op.startswith("Pad"):
            i1.append(_init([0, 0, 1, 2, 0, 0, 2, 1], "pd", np.int64))
            n1.append(helper.make_node("Pad", ["a_d", "pd"], ["r"], mode=op[4:]))
        else:
            n1.append(helper.make_node("DepthToSpace", ["a_d"], ["r"], blocksize=2, mode="DCR"))
        io, no = _qdq_out("r", "y", ys, code(), act)
        jobs.append((_model(n1 + no, i1 + io, ins, [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)]),
                     feeds))
    _check_measured_or_refused(tmp_path, jobs, arch, {act: set(INPUT_FOLDS)})  # passes/qdq_htp.py _input_folds


def test_a16_data_movement_refusals(tmp_path):
    """A 16-bit MaxPool or Slice that requantizes rounds otherwise on the HTP (measured: 11-3,176 codes
    of 65,536 off the copy table): refused; an int16 DepthToSpace the QNN EP does not take (asserted)."""
    for op, extra in (("MaxPool", {"kernel_shape": [1, 1]}), ("Slice", None)):
        i1, n1 = _qdq_in("x", 0.001, 100, "uint16")
        args = ["x_d"]
        if extra is None:
            i1 += [_init(np.array([0]), "st", np.int64), _init(np.array([2]), "en", np.int64),
                   _init(np.array([3]), "ax", np.int64)]
            args += ["st", "en", "ax"]
        n1.append(helper.make_node(op, args, ["r"], **(extra or {})))
        io, no = _qdq_out("r", "y", 0.0013, 200, "uint16")
        m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        msg = _refused(tmp_path, m, "qnn-htp-v73")
        assert ("requantizing Slice is not characterised" if op == "Slice" else "16-bit MaxPool that requantizes") in msg, msg
    i1, n1 = _qdq_in("x", 0.001, 0, "int16")
    n1.append(helper.make_node("DepthToSpace", ["x_d"], ["r"], blocksize=2))
    io, no = _qdq_out("r", "y", 0.001, 0, "int16")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "int16 DepthToSpace" in _refused(tmp_path, m, "qnn-htp-v73")
    _ep_refuses(tmp_path, m, (1, 4, 6, 6), "Unsupported nodes in QNN EP")


@pytest.mark.parametrize("arch,act", A16)
def test_a16_maxpool_and_nearest_resize(tmp_path, arch, act):
    """MaxPool (unpadded, padded, strided) and (uint16) nearest Resize by 2 and 3 on unchanged parameters:
    the max / copy of the 16-bit codes."""
    rng = np.random.default_rng(zlib.crc32(repr(("a16pool", act)).encode()))
    info = np.iinfo(act)
    forms = [("MaxPool", {"kernel_shape": [3, 3]}), ("MaxPool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
             ("MaxPool", {"kernel_shape": [2, 2], "strides": [2, 2]})]
    if act == "uint16":
        forms += [("Resize", {"mode": "nearest", "scales": [1, 1, 2, 2]}),
                  ("Resize", {"mode": "nearest", "scales": [1, 1, 3, 3]})]
    jobs = []
    for op, attrs in forms:
        xs, xz = float(F(10 ** rng.uniform(-4, -2))), int(rng.integers(int(info.min), int(info.max) + 1))
        i1, n1 = _qdq_in("x", xs, xz, act)
        args = ["x_d"]
        if op == "Resize":
            i1.append(_init(np.array(attrs.pop("scales"), np.float32), "sc", np.float32))
            args += ["", "sc"]
        n1.append(helper.make_node(op, args, ["r"], **attrs))
        io, no = _qdq_out("r", "y", xs, xz, act)
        shape = [1, 8, 16, 16]
        m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        q = rng.integers(int(info.min), int(info.max) + 1, shape)
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def test_a16_pool_refusals(tmp_path):
    """An int16 Resize the QNN EP does not take (asserted); a 16-bit MaxPool onto other parameters is
    refused (measured to differ from the copy table)."""
    i1, n1 = _qdq_in("x", 0.001, 0, "int16")
    i1.append(_init(np.array([1, 1, 2, 2], np.float32), "sc", np.float32))
    n1.append(helper.make_node("Resize", ["x_d", "", "sc"], ["r"], mode="nearest"))
    io, no = _qdq_out("r", "y", 0.001, 0, "int16")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "int16 Resize" in _refused(tmp_path, m, "qnn-htp-v73")
    _ep_refuses(tmp_path, m, (1, 4, 6, 6), "Unsupported nodes in QNN EP")
    i1, n1 = _qdq_in("x", 0.001, 100, "uint16")
    n1.append(helper.make_node("MaxPool", ["x_d"], ["r"], kernel_shape=[2, 2]))
    io, no = _qdq_out("r", "y", 0.0013, 200, "uint16")
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 6, 6])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "16-bit MaxPool that requantizes" in _refused(tmp_path, m, "qnn-htp-v73")


@pytest.mark.parametrize("act", ["uint16", "int16"])
def test_a16_v68_convolution_every_input_code(tmp_path, act):
    """The v68 16-bit convolution (htp_ops.py, "v68 16-bit convolution"): every 16-bit input code through
    1x1 layers of 8 channels with random weights and biases to +-2^20 (each channel's folded offset shows
    in every output), multipliers 2e-5 .. 1.4 (below 2^-12 the 8-bit rule's pre-shift would drop bits),
    random zero points."""
    rng = np.random.default_rng(zlib.crc32(repr(("v68a16", act)).encode()))
    info = np.iinfo(act)
    q = np.arange(int(info.min), int(info.max) + 1)
    jobs = []
    for M in (2e-5, 1.7e-4, 0.0021, 0.019, 0.13, 1.37):
        xs, ws = 1e-4, 0.01
        ys = float(F(F(F(xs) * F(ws)) / F(M)))
        top = int(np.clip(30000 / (M * 256 * 128), 1, 127))
        w = (rng.integers(1, top + 1, 8) * rng.choice([-1, 1], 8)).astype(np.int8).reshape(8, 1, 1, 1)
        bias = rng.integers(-2 ** 20, 2 ** 20, 8).astype(np.int32)
        xz = int(rng.integers(int(info.min), int(info.max) + 1)) if act == "uint16" else 0
        yz = int(rng.integers(int(info.min), int(info.max) + 1))
        m = _conv_model((1, 1, 1, q.size), w, F(ws), bias, xs, xz, ys, yz, act)
        jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F).reshape(1, 1, 1, -1)}))
    assert _check_many(tmp_path, jobs, "68") == 6 * (8 + 1) * q.size  # 8 channels and the input codes


def test_a16_v68_folded_zero_point_half_in_float32(tmp_path):
    """The v68 16-bit folded output zero point adds its half in float32: at M = f32(0.0025) and these zero points
    f32(z_y / M) is 256 n - 1, where float32's spacing is 1, so f32(x + 1/2) rounds to even, 256 n (the half added in
    float64 put Z one below: 299-326 codes of 512 one below the emulator in a 3x3 layer); 32769 / 20000: not at a
    multiple of 256, either way."""
    rng = np.random.default_rng(17)
    xs, ws, ys = 0.05 / 256, 0.01, 0.2 / 256
    jobs = []
    for yz in (32768, 33520, 40000, 32769, 20000):
        w = rng.integers(-127, 128, (8, 8, 3, 3)).astype(np.int8)
        m = _conv_model((1, 8, 8, 8), w, F(ws), None, xs, 32768, ys, yz, "uint16", pads=[1, 1, 1, 1])
        jobs.append((m, {"x": (rng.standard_normal((1, 8, 8, 8)) * 2).astype(F)}))
        M = F(F(F(xs) * F(ws)) / F(ys))
        x = F(F(yz) / M)
        assert yz in (32769, 20000) or float(x) % 256 == 255  # 256 n - 1, as the docstring says
    _check_many(tmp_path, jobs, "68")
