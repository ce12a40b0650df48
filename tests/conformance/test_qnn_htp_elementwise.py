"""Element-wise ops of the ``qnn-htp-v68`` / ``qnn-htp-v73`` schemes against Qualcomm's HTP emulation
(onnxruntime-qnn 2.7.0, the oracle subprocess of test_qnn_htp_ops.py): Mul (every pair of codes,
broadcasts, one-element constants), Add / Sub with a constant operand, the SiLU unit, Div by a constant
and the table activations beyond Sigmoid / Tanh / HardSwish -- every QuantizeLinear output code for code."""
from __future__ import annotations

import math

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import ARCH_ACT, _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


# -- Mul: every pair of codes; broadcasts and one-element constants ------------------------------------

@pytest.mark.parametrize("arch,act", ARCH_ACT)
def test_mul_every_pair(tmp_path, arch, act):
    """quant/htp_ops.py mul_params: small multipliers (r = 7, output zero points near the top, where the
    shift drops to keep the offset in 16 bits), multipliers within 1e-7 below / above a power of two,
    and M from 1/2 to 8 (the r <= 0 form)."""
    info = np.iinfo(act)
    rng = np.random.default_rng(17 + (act == "int8") + int(arch))
    a, b = np.meshgrid(np.arange(int(info.min), int(info.max) + 1), np.arange(int(info.min), int(info.max) + 1),
                       indexing="ij")
    jobs = []
    for trial, ms in enumerate(([1e-5, 3e-3, 7e-3, 0.02], [2 ** -6 * (1 - 3e-8), 0.25 * (1 - 1e-5), 0.5 * (1 + 2e-8),
                                                           1 - 2e-8], [0.6, 1.3, 2.5 * (1 + 1e-7), 7.9])):
        s1, s2 = (float(F(10 ** rng.uniform(-2.5, -0.5))) for _ in range(2))
        z1, z2 = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(2))
        i1, n1 = _qdq_in("a", s1, z1, act)
        i2, n2 = _qdq_in("b", s2, z2, act)
        nodes, inits = n1 + n2, i1 + i2
        for j, mj in enumerate(ms):
            z3 = int(info.max) - j if trial == 0 else int(rng.integers(int(info.min), int(info.max) + 1))
            io, no = _qdq_out(f"s{j}", f"y{j}", float(F(s1 * s2 / mj)), z3, act)
            nodes, inits = nodes + [helper.make_node("Mul", ["a_d", "b_d"], [f"s{j}"])] + no, inits + io
        m = _model(nodes, inits, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, a.size]),
                                  helper.make_tensor_value_info("b", TensorProto.FLOAT, [1, a.size])],
                   [helper.make_tensor_value_info("y0_dq", TensorProto.FLOAT, None)])
        jobs.append((m, {"a": ((a.ravel() - z1) * F(s1)).astype(F)[None], "b": ((b.ravel() - z2) * F(s2)).astype(F)[None]}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("73", "int8")])
def test_mul_broadcast_and_constants(tmp_path, arch, act):
    """A per-channel activation over H x W, a constant per-channel vector and x * x take the two-tensor
    rule; a one-element constant (scalar or [1, 1, 1, 1], either side) the one-multiplier kernel
    (htp_scale.scale_params), A from 1e-3 to 12 (negative constants and A >= 16: test_mul_div_constant_float_path);
    a zero constant is refused at session creation."""
    info = np.iinfo(act)
    rng = np.random.default_rng(29 + int(arch) + (act == "int8"))
    lo, hi = int(info.min), int(info.max) + 1
    jobs = []
    qa = rng.integers(lo, hi, (1, 16, 16, 16))
    for case, shape, target in (("channel", [1, 16, 1, 1], 0.05), ("vector", [1, 16, 1, 1], 0.3), ("square", None, 0.004),
                                ("scalar", [], 1e-3), ("one", [1, 1, 1, 1], 0.07), ("first", [], 0.9),
                                ("scalar", [], 12.0), ("one", [1, 1, 1, 1], 0.012)):
        s1, s2 = (float(F(10 ** rng.uniform(-2.5, -0.5))) for _ in range(2))
        z1, z2 = (int(rng.integers(lo, hi)) for _ in range(2))
        i1, n1 = _qdq_in("a", s1, z1, act)
        nodes, inits = list(n1), list(i1)
        ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, list(qa.shape))]
        feeds = {"a": ((qa - z1) * F(s1)).astype(F)}
        operands = ["a_d", "b_d"]
        if case == "square":
            s2, z2, operands, scale_b = s1, z1, ["a_d", "a_d"], 1.0
        elif case == "channel":
            i2, n2 = _qdq_in("b", s2, z2, act)
            nodes, inits = nodes + n2, inits + i2
            ins.append(helper.make_tensor_value_info("b", TensorProto.FLOAT, shape))
            feeds["b"] = ((rng.integers(lo, hi, shape) - z2) * F(s2)).astype(F)
            scale_b = 1.0
        else:
            qb = rng.integers(lo, hi, shape)
            if case != "vector":  # a positive constant: code above its zero point
                z2 = min(z2, hi - 20)
                qb = np.full(shape, int(rng.integers(z2 + 1, hi)))
            inits += [_init(qb.astype(act), "bq", act), _init(s2, "b_s", np.float32), _init(z2, "b_z", act)]
            nodes.append(helper.make_node("DequantizeLinear", ["bq", "b_s", "b_z"], ["b_d"]))
            scale_b = float(np.abs(qb - z2).max()) if case != "vector" else 1.0
            if case == "first":
                operands = ["b_d", "a_d"]
        io, no = _qdq_out("m", "y", float(F(s1 * s2 * scale_b / target)), int(rng.integers(lo, hi)), act)
        m = _model(nodes + [helper.make_node("Mul", operands, ["m"])] + no, inits + io, ins,
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        jobs.append((m, feeds))
    _check_many(tmp_path, jobs, arch)
    i1, n1 = _qdq_in("a", 0.02, 100, act if act == "uint8" else "int8")
    zb = 200 if act == "uint8" else 100
    i1 += [_init(np.array(zb, act), "bq", act), _init(0.01, "b_s", np.float32), _init(zb, "b_z", act)]
    n1.append(helper.make_node("DequantizeLinear", ["bq", "b_s", "b_z"], ["b_d"]))
    io, no = _qdq_out("m", "y", 0.02, 100 if act == "uint8" else 0, act)
    m = _model(n1 + [helper.make_node("Mul", ["a_d", "b_d"], ["m"])] + no, i1 + io,
               [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 8])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "zero constant is not characterised" in _refused(tmp_path, m, f"qnn-htp-v{arch}")


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "int8"), ("73", "int8")])
def test_mul_div_constant_float_path(tmp_path, arch, act):
    """Mul / Div by a negative one-element constant, and Mul by a constant whose multiplier is 16 or more
    (20 .. 300, either sign), take the HTP's float32 path (kernels/qnn_htp/elementwise.py), not the
    one-multiplier kernel: every code at 4 constants per form, one set with power-of-two scale ratios
    (exact ties)."""
    sh = 128 if act == "int8" else 0
    rng = np.random.default_rng(33 + int(arch) + (act == "int8"))
    q = (np.arange(256) - sh).reshape(1, 1, 16, 16)
    jobs = []
    for op in ("Mul", "Div", "MulBig", "MulTie"):
        for k in range(4):
            xs, xz = float(F(10 ** rng.uniform(-2, -1))), int(rng.integers(0, 256))
            cz = int(rng.integers(1, 255))  # uint8-domain codes; the constant cq - cz is negative ...
            cq = int(rng.integers(0, cz))
            if op == "MulBig" and k % 2:  # ... or, for half of the large multipliers, positive
                cq = int(rng.integers(cz + 1, 256))
            cs = float(F(10 ** rng.uniform(-3, -1)))
            cv = abs(float(F(F(cq - cz) * F(cs))))
            A = xs / cv if op == "Div" else xs * cv
            if op == "MulBig":
                ys = float(F(A / 10 ** rng.uniform(1.3, 2.5)))
            elif op == "MulTie":
                ys = float(F(A * 2.0 ** -int(rng.integers(0, 3))))
            else:
                ys = float(F(A * 10 ** rng.uniform(-0.5, 0.5)))
            i1, n1 = _qdq_in("x", xs, xz - sh, act)
            i1 += [_init(np.array([cq - sh]), "c", act), _init(cs, "cs", np.float32), _init(cz - sh, "cz", act)]
            n1 += [helper.make_node("DequantizeLinear", ["c", "cs", "cz"], ["cd"]),
                   helper.make_node("Div" if op == "Div" else "Mul", ["x_d", "cd"], ["u"])]
            io, no = _qdq_out("u", "y", ys, int(rng.integers(0, 256)) - sh, act)
            m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 16, 16])],
                       [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
            jobs.append((m, {"x": ((q + sh - xz) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def _const_add_model(op: str, const_first: bool, xs, xz, cq, cs, cz, ys, yz, act, channels: int):
    i1, n1 = _qdq_in("x", xs, xz, act)
    i1 += [_init(cq, "c", act), _init(cs, "cs", np.float32), _init(cz, "cz", act)]
    n1 += [helper.make_node("DequantizeLinear", ["c", "cs", "cz"], ["cd"]),
           helper.make_node(op, ["cd", "x_d"] if const_first else ["x_d", "cd"], ["r"])]
    io, no = _qdq_out("r", "y", ys, yz, act)
    return _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 16, 16])],
                  [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])


FORMS = [("Add", False), ("Sub", False), ("Sub", True), ("Add", True)]


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "int8"), ("73", "int8")])
def test_add_sub_constant_every_code(tmp_path, arch, act):
    """Add / Sub with a constant operand, every code of the other input: one-element constants take the
    HTP's float32 path (kernels/qnn_htp/elementwise.py; refinterp used the two-tensor rule before and was
    1-5 codes in 256 off), per-channel constant vectors the two-tensor rule.  Random scales, both operand
    orders, and scale ratios of exactly 1/4, 1/2, 3/4 and near 1/2 with a constant of 9.25 output steps
    (exact and near rounding ties)."""
    info = np.iinfo(act)
    rng = np.random.default_rng(21 + (act == "int8") + int(arch))
    C = 4
    q = np.arange(int(info.min), int(info.max) + 1).reshape(1, 1, 16, 16).repeat(C, axis=1)
    jobs = []
    for t in range(16):
        op, first = FORMS[t % 4]
        vec = t >= 12
        xs, cs = float(F(10 ** rng.uniform(-2.5, -1))), float(F(10 ** rng.uniform(-3, -1)))
        xz, cz, yz = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(3))
        cq = rng.integers(int(info.min), int(info.max) + 1, (1, C, 1, 1) if vec else (1,))
        ys = float(F((xs * 128 + float(np.abs(cq - cz).max()) * cs) / 128 * 10 ** rng.uniform(-0.1, 0.3)))
        if vec and op == "Sub":  # the two-tensor Sub's offset must fit 24 bits (refused otherwise)
            op = "Add"
        jobs.append((_const_add_model(op, first, xs, xz, cq, cs, cz, ys, yz, act, C), {"x": ((q - xz) * F(xs)).astype(F)}))
    ys, z = 0.01, (128 if act == "uint8" else 0)
    for A in (0.25, 0.5, 0.75, 0.5 * (1 + 2 ** -20), 0.5 * (1 - 2 ** -12)):
        for op, first in FORMS[:3]:
            xs = float(F(ys * A))
            jobs.append((_const_add_model(op, first, xs, z, np.array([37]), float(F(ys / 4)),
                                          0, ys, z, act, 1), {"x": ((q[:, :1] - z) * F(xs)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("73", "int8")])
def test_silu_unit_every_code(tmp_path, arch, act):
    """x * Sigmoid(x) (either operand order) is one table op on the HTP (passes/qdq_htp.py makes it Swish):
    every input code at 4 scale sets, the Sigmoid's own output compared too."""
    info = np.iinfo(act)
    rng = np.random.default_rng(41 + int(arch) + (act == "int8"))
    q = np.arange(int(info.min), int(info.max) + 1)
    jobs = []
    for k in range(4):
        sx, zx = float(F(10 ** rng.uniform(-2, -0.7))), int(rng.integers(int(info.min), int(info.max) + 1))
        i1, n1 = _qdq_in("x", sx, zx, act)
        io1, no1 = _qdq_out("sg", "s", float(F(1 / 255)), int(info.min), act)
        io2, no2 = _qdq_out("m", "y", float(F(10 ** rng.uniform(-2.3, -1))), int(rng.integers(int(info.min), int(info.max) + 1)), act)
        order = ["x_d", "s_dq"] if k % 2 else ["s_dq", "x_d"]
        nodes = n1 + [helper.make_node("Sigmoid", ["x_d"], ["sg"])] + no1 + [helper.make_node("Mul", order, ["m"])] + no2
        m = _model(nodes, i1 + io1 + io2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, q.size])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        jobs.append((m, {"x": ((q - zx) * F(sx)).astype(F)[None]}))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("73", "int8")])
def test_div_by_a_constant(tmp_path, arch, act):
    """Div by a positive one-element constant runs Mul's one-multiplier kernel (htp_scale.scale_params with
    A = s_a / (b s_y)): every code at 8 constants (scalar and [1, 1]); a Div by a tensor is refused (a
    negative divisor: test_mul_div_constant_float_path)."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max) + 1
    rng = np.random.default_rng(53 + int(arch) + (act == "int8"))
    qa = np.arange(lo, hi)[None]
    jobs = []
    for t, target in enumerate((0.002, 0.03, 0.2, 0.6, 1.0 / 6, 1.5, 4.0, 12.0)):
        s1, s2 = (float(F(10 ** rng.uniform(-2.5, -0.5))) for _ in range(2))
        z1, z2 = int(rng.integers(lo, hi)), int(rng.integers(lo, hi - 20))
        qb = int(rng.integers(z2 + 1, hi))
        i1, n1 = _qdq_in("a", s1, z1, act)
        inits = i1 + [_init(np.full([] if t % 2 else [1, 1], qb).astype(act), "bq", act), _init(s2, "b_s", np.float32),
                      _init(z2, "b_z", act)]
        io, no = _qdq_out("d", "y", float(F(s1 / ((qb - z2) * s2) / target)), int(rng.integers(lo, hi)), act)
        nodes = n1 + [helper.make_node("DequantizeLinear", ["bq", "b_s", "b_z"], ["b_d"]),
                      helper.make_node("Div", ["a_d", "b_d"], ["d"])] + no
        m = _model(nodes, inits + io, [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, qa.size])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        jobs.append((m, {"a": ((qa - z1) * F(s1)).astype(F)}))
    _check_many(tmp_path, jobs, arch)
    i1, n1 = _qdq_in("a", 0.02, 10, act)
    i2, n2 = _qdq_in("b", 0.03, 20, act)
    io, no = _qdq_out("d", "y", 0.05, 0, act)
    m = _model(n1 + n2 + [helper.make_node("Div", ["a_d", "b_d"], ["d"])] + no, i1 + i2 + io,
               [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 8]) for n in ("a", "b")],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "Div by a tensor is not characterised" in _refused(tmp_path, m, f"qnn-htp-v{arch}")


TABLE_OPS = {  # op -> (attributes, float64 function for choosing an output range)
    "Elu": ({"alpha": 0.7}, lambda x: np.where(x >= 0, x, 0.7 * np.expm1(np.minimum(x, 0)))),
    "Gelu": ({}, lambda x: x * 0.5 * (1 + np.tanh(0.8 * x))),
    "GeluTanh": ({"approximate": "tanh"}, lambda x: x * 0.5 * (1 + np.tanh(0.8 * x))),
    "Softplus": ({}, lambda x: np.logaddexp(0, x)),
    "Exp": ({}, np.exp),
    "Relu": ({}, lambda x: np.maximum(x, 0)),
    "LeakyRelu": ({"alpha": 0.1}, lambda x: np.where(x >= 0, x, 0.1 * x)),
    "HardSigmoid": ({"alpha": 0.25, "beta": 0.4}, lambda x: np.clip(0.25 * x + 0.4, 0, 1)),
}


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "int8"), ("73", "int8")])
def test_more_table_activations_every_code(tmp_path, arch, act):
    """Elu / Gelu (both forms) / Softplus / Exp / Relu / LeakyRelu: the table rule of
    kernels/qnn_htp/activation.py over every input code, and HardSigmoid its float32 path, 2 scale sets each
    (output range from the function's range); LeakyRelu / HardSigmoid on int8 are refused (the QNN EP does
    not take them)."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    rng = np.random.default_rng(61 + int(arch) + (act == "int8"))
    q = np.arange(lo, hi + 1)
    jobs = []
    for op, (attrs, fn) in TABLE_OPS.items():
        if act == "int8" and op in ("LeakyRelu", "HardSigmoid"):
            continue
        for trial in range(2):
            xs, xz = float(F(10 ** rng.uniform(-2, -1))), int(rng.integers(lo, hi + 1))
            with np.errstate(over="ignore"):
                v = fn((q - xz) * xs)
            v = v[np.isfinite(v)]
            vmin = min(float(v.min()), 0.0)
            ys = float(F((float(v.max()) - vmin) / 255 * rng.uniform(0.6, 1.05)))
            yz = int(np.clip(lo + round(-vmin / ys), lo, hi))
            i1, n1 = _qdq_in("x", xs, xz, act)
            n1.append(helper.make_node("Gelu" if op == "GeluTanh" else op, ["x_d"], ["f"], **attrs))
            io, no = _qdq_out("f", "y", ys, yz, act)
            m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, q.size])],
                       [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
            jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)[None]}))
    _check_many(tmp_path, jobs, arch)
    if act == "int8":
        i1, n1 = _qdq_in("x", 0.02, 0, act)
        io, no = _qdq_out("f", "y", 0.02, 0, act)
        m = _model(n1 + [helper.make_node("LeakyRelu", ["x_d"], ["f"], alpha=0.1)] + no, i1 + io,
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        assert "does not run LeakyRelu on int8" in _refused(tmp_path, m, f"qnn-htp-v{arch}")


@pytest.mark.parametrize("arch", ["68", "73"])
def test_gelu_entry_on_a_float32_tie_is_refused(tmp_path, arch):
    """A Gelu table entry 5e-8 below a rounding tie in float64 is the tie itself in float32, and the HTP
    rounds it up (found through a Gelu feeding a MatMul): the float64 table would be one code off, so such
    a table (an entry within 4 float32 ulps of a tie) is refused."""
    from tests.conformance.test_qnn_htp_ops import _htp_many

    i1, n1 = _qdq_in("x", 0.09217453002929688, 122, "uint8")
    io, no = _qdq_out("f", "y", 0.025748491287231445, 144, "uint8")
    m = _model(n1 + [helper.make_node("Gelu", ["x_d"], ["f"])] + no, i1 + io,
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "rounding tie" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    q = np.arange(256)
    got = _htp_many(tmp_path, [(m, {"x": ((q - 122) * F(0.09217453002929688)).astype(F)[None]})], arch)[0]["y"]
    x = (115 - 122) * float(F(0.09217453002929688))
    t = 0.5 * x * (1 + math.erf(x / math.sqrt(2))) / float(F(0.025748491287231445))
    assert -6.5 - 1e-7 < t < -6.5 and got[0, 115] == 144 - 6  # the float64 table: 144 - 7


FLOAT_PATH_OPS = {"Sqrt": np.sqrt, "Abs": np.abs, "Log": np.log, "Floor": np.floor}
# (op, float64 function, Clip bounds): the float32-path ops checked as branches of one model
MORE_FLOAT_PATH = [("Ceil", np.ceil, ()), ("Round", np.round, ()), ("Sign", np.sign, ()), ("Sin", np.sin, ()),
                   ("Cos", np.cos, ()), ("Atan", np.arctan, ()), ("Asin", np.arcsin, ()),
                   ("Clip", None, (-1.3, 2.1)), ("Clip", None, (0.0, 6.0)), ("Clip", None, (0.0,))]


def _more_float_path_model(rng, lo: int, hi: int):
    """One branch per op of MORE_FLOAT_PATH and scale set (3 each: random; a power-of-two ratio, putting
    Round / Ceil / Clip entries on exact ties (and, for the exact functions, a power-of-two input scale:
    Round's own ties); for the exact functions the output range exactly the function's, so a Clip could
    fold into the QuantizeLinear), every input code in each branch."""
    q = np.arange(lo, hi + 1)
    nodes, inits, inputs, feeds = [], [], [], {}
    for j, (op, fn, bounds) in enumerate(MORE_FLOAT_PATH):
        for trial in range(3):
            k = f"{j}_{trial}"
            exact = op in ("Ceil", "Round", "Sign", "Clip")
            # a power-of-two input scale puts Round's inputs on its own ties (n + 1/2)
            xs = 2.0 ** -int(rng.integers(2, 6)) if exact and trial == 1 else float(F(10 ** rng.uniform(-2, -0.5)))
            xz = int(rng.integers(lo + 40, hi - 40))
            x = ((q - xz) * F(xs)).astype(F)
            extra = [f"c{k}_{i}" for i in range(len(bounds))]
            inits += [_init(F(b), name, np.float32) for b, name in zip(bounds, extra)]
            with np.errstate(all="ignore"):
                v = np.clip(x, *(bounds + (None,))[:2]) if op == "Clip" else fn(x.astype(np.float64))
            v = v[np.isfinite(v)].astype(np.float64)
            vmin, vmax = min(float(v.min()), 0.0), max(float(v.max()), 0.0)
            fit = trial == 2 and exact
            ys = float(F(xs * 0.5)) if trial == 1 else float(F((vmax - vmin) / (hi - lo) *
                                                                 (1.0 if fit else rng.uniform(0.6, 1.05))))
            yz = int(np.clip(lo + round(-vmin / ys), lo, hi)) if fit else int(rng.integers(lo + 60, hi - 60))
            i1, n1 = _qdq_in(f"x{k}", xs, xz, "uint8" if lo == 0 else "int8")
            io, no = _qdq_out(f"f{k}", f"y{k}", ys, yz, "uint8" if lo == 0 else "int8")
            nodes += n1 + [helper.make_node(op, [f"x{k}_d"] + extra, [f"f{k}"])] + no
            inits += i1 + io
            inputs.append(helper.make_tensor_value_info(f"x{k}", TensorProto.FLOAT, [1, q.size]))
            feeds[f"x{k}"] = x[None]
    return _model(nodes, inits, inputs, [helper.make_tensor_value_info("y0_0_dq", TensorProto.FLOAT, None)]), feeds


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "int8"), ("73", "int8")])
def test_float_path_unary_every_code(tmp_path, arch, act):
    """Sqrt / Abs / Log / Floor: the HTP's float32 path (kernels/qnn_htp/activation.py) over every input
    code -- negative inputs of Sqrt (NaN: the largest code) and Log (the smallest) included -- at 3 scale
    sets per op, one with a power-of-two scale ratio (exact ties for Abs / Floor); Ceil / Round / Sign / Sin /
    Cos / Atan / Asin / Clip in one more model (_more_float_path_model); Neg is refused."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    rng = np.random.default_rng(71 + int(arch) + (act == "int8"))
    q = np.arange(lo, hi + 1)
    jobs = []
    for op, fn in FLOAT_PATH_OPS.items():
        for trial in range(3):
            xs = float(F(10 ** rng.uniform(-2, 0)))
            xz = int(rng.integers(lo, lo + 20)) if op in ("Sqrt", "Log") else int(rng.integers(lo, hi + 1))
            with np.errstate(all="ignore"):
                v = fn(((q - xz) * F(xs)).astype(F)).astype(np.float64)
            v = v[np.isfinite(v)]
            vmin = min(float(v.min()), 0.0)
            ys = float(F(xs * 0.5)) if trial == 2 and op in ("Abs", "Floor") else \
                float(F((float(v.max()) - vmin) / 255 * rng.uniform(0.8, 1.05)))
            yz = int(rng.integers(lo, hi + 1)) if trial == 2 else int(np.clip(lo + round(-vmin / ys), lo, hi))
            i1, n1 = _qdq_in("x", xs, xz, act)
            io, no = _qdq_out("f", "y", ys, yz, act)
            m = _model(n1 + [helper.make_node(op, ["x_d"], ["f"])] + no, i1 + io,
                       [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, q.size])],
                       [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
            jobs.append((m, {"x": ((q - xz) * F(xs)).astype(F)[None]}))
    jobs.append(_more_float_path_model(rng, lo, hi))
    _check_many(tmp_path, jobs, arch)
    i1, n1 = _qdq_in("x", 0.02, lo + 128, act)
    io, no = _qdq_out("f", "y", 0.02, lo + 128, act)
    m = _model(n1 + [helper.make_node("Neg", ["x_d"], ["f"])] + no, i1 + io,
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "Neg" in _refused(tmp_path, m, f"qnn-htp-v{arch}")


