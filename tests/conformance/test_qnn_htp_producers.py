"""Units whose HTP result depends on the op that made their input codes, against Qualcomm's HTP emulation
(onnxruntime-qnn 2.7.0, the oracle subprocess of test_qnn_htp_ops.py): the every-code tests feed graph inputs on
the input's grid, where an op the HTP folds into its producer looks like the op on codes.  Relu / Clip units
(graph inputs only), the table and float32-path ops after a Conv and on off-grid inputs, and Mul / Div by a
constant after 8 producers -- every QuantizeLinear output code for code.  (TopK: test_qnn_htp_select.py;
data movement: test_qnn_htp_requant_moves.py.)"""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import _check_many, _conv_model, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "int8"), ("73", "int8")])
def test_relu_clip_on_graph_inputs_only(tmp_path, arch, act):
    """A Relu / Clip unit on a graph input's codes from off-grid float inputs (6 parameter sets each: Relu
    ranges, the input's own parameters, others) equals the emulator; after a compute op the HTP folds it
    into the producer (measured: 25-1,484 codes off): refused, naming the producer."""
    lo = int(np.iinfo(act).min)
    rng = np.random.default_rng(97 + int(arch) + lo)
    nodes, inits, inputs, feeds = [], [], [], {}
    for op in ("Relu", "Clip"):
        for k in range(6):
            name = f"{op}{k}"
            xs = float(F(rng.uniform(0.01, 0.05)))
            xz = lo + int(rng.integers(60, 200))
            ys, yz = float(F(xs * rng.uniform(0.4, 1.6))), [lo, lo, lo + int(rng.integers(1, 200)), xz, lo, lo + 128][k]
            ys, yz = (xs, yz) if k == 4 else (xs, xz) if k == 5 else (ys, yz)
            i1, n1 = _qdq_in(f"x{name}", xs, xz, act)
            io, no = _qdq_out(f"f{name}", f"y{name}", ys, yz, act)
            bounds = [_init(F(-0.5), f"lo{name}", np.float32), _init(F(2.5), f"hi{name}", np.float32)] if op == "Clip" else []
            nodes += n1 + [helper.make_node(op, [f"x{name}_d"] + [b.name for b in bounds], [f"f{name}"])] + no
            inits += i1 + io + bounds
            inputs.append(helper.make_tensor_value_info(f"x{name}", TensorProto.FLOAT, [1, 8, 16, 16]))
            feeds[f"x{name}"] = rng.uniform(-200 * xs, 200 * xs, (1, 8, 16, 16)).astype(F)
    _check_many(tmp_path, [(_model(nodes, inits, inputs, [helper.make_tensor_value_info("yRelu0_dq", TensorProto.FLOAT,
                                                                                        None)]), feeds)], arch)
    for op, bounds in (("Relu", []), ("Clip", [0.0, 6.0])):
        m = _conv_model((1, 4, 8, 8), rng.integers(-127, 128, (8, 4, 3, 3)), 0.004, None, 0.03, lo + 128, 0.05,
                        lo + 100, act, pads=[1, 1, 1, 1])
        io, no = _qdq_out("r", "z", 0.027, lo + 60, act)
        names = [f"c{i}" for i in range(len(bounds))]
        m.graph.node.extend([helper.make_node(op, ["y_dq"] + names, ["r"])] + no)
        m.graph.initializer.extend(io + [_init(F(b), n, np.float32) for b, n in zip(bounds, names)])
        assert f"{op} of codes made by Conv" in _refused(tmp_path, m, f"qnn-htp-v{arch}")


UNARY_AFTER = ["Sigmoid", "Tanh", "HardSwish", "Elu", "Gelu", "Softplus", "Exp", "Sqrt", "Abs", "Log", "Floor", "Ceil",
               "Round", "Sign", "Sin", "Cos", "Atan"]


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "int8"), ("73", "int8")])
def test_unary_ops_after_a_conv_and_on_off_grid_inputs(tmp_path, arch, act):
    """The every-code tests feed inputs on the input's grid, where an op folded into the producer looks
    like the op on codes; here each table / float32-path op reads a Conv's codes and an off-grid graph
    input's codes (LeakyRelu / HardSigmoid too on uint8), every QuantizeLinear output equal."""
    lo = int(np.iinfo(act).min)
    rng = np.random.default_rng(61 + int(arch) + lo)
    m = _conv_model((1, 4, 10, 10), rng.integers(-127, 128, (8, 4, 3, 3)), 0.004, None, 0.03, lo + 128, 0.04,
                    lo + 110, act, pads=[1, 1, 1, 1])
    i1, n1 = _qdq_in("g", 0.029, lo + 125, act)
    m.graph.node.extend(n1)
    m.graph.initializer.extend(i1)
    m.graph.input.append(helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 8, 10, 10]))
    ops = UNARY_AFTER + (["LeakyRelu", "HardSigmoid"] if act == "uint8" else [])
    for k, op in enumerate(ops):
        for src in ("y_dq", "g_d"):
            name = f"{op}_{src[0]}"
            ys = float(F(rng.uniform(0.01, 0.05)))
            io, no = _qdq_out(name, f"z{name}", ys, lo + int(rng.integers(20, 235)), act)
            m.graph.node.extend([helper.make_node(op, [src], [name])] + no)
            m.graph.initializer.extend(io)
    feeds = {"x": rng.uniform(-3.5, 3.5, (1, 4, 10, 10)).astype(F), "g": rng.uniform(-3.6, 3.6, (1, 8, 10, 10)).astype(F)}
    _check_many(tmp_path, [(m, feeds)], arch)


def _producers(rng, lo: int, act: str):
    """{kind: (nodes, inits, inputs, feeds, codes tensor, (scale, zero point))}: every producer the Mul /
    Div by a constant is measured after (kernels/qnn_htp/elementwise.py _SCALE_AFTER / _SINGLE_AFTER /
    _FLOAT_AFTER), each from its own off-grid float input."""
    out = {}
    for kind in ("input", "Add", "Conv", "MaxPool", "MatMul", "Sigmoid", "Tanh", "GlobalAveragePool"):
        i, n = _qdq_in(f"a{kind}", 0.03, lo + 128, act)
        inputs = [helper.make_tensor_value_info(f"a{kind}", TensorProto.FLOAT, [1, 8, 8, 16])]
        feeds = {f"a{kind}": rng.uniform(-3.5, 3.5, (1, 8, 8, 16)).astype(F)}
        ys, yz = {"Sigmoid": (1 / 256, lo), "Tanh": (1 / 128, lo + 128)}.get(kind, (0.05, lo + 100))
        if kind == "input":
            out[kind] = (n, i, inputs, feeds, f"a{kind}_d", (0.03, lo + 128))
            continue
        src = f"a{kind}_d"
        if kind == "Add":
            i2, n2 = _qdq_in("bAdd", 0.03, lo + 128, act)
            i, n = i + i2, n + n2
            inputs.append(helper.make_tensor_value_info("bAdd", TensorProto.FLOAT, [1, 8, 8, 16]))
            feeds["bAdd"] = rng.uniform(-3.5, 3.5, (1, 8, 8, 16)).astype(F)
            n.append(helper.make_node("Add", [src, "bAdd_d"], [f"p{kind}"]))
        elif kind in ("Conv", "MatMul"):
            w = rng.integers(-127, 128, (8, 8, 1, 1) if kind == "Conv" else (16, 16))
            i += [_init(w, f"w{kind}", np.int8), _init(0.004, f"ws{kind}", np.float32), _init(0, f"wz{kind}", np.int8)]
            n += [helper.make_node("DequantizeLinear", [f"w{kind}", f"ws{kind}", f"wz{kind}"], [f"wd{kind}"]),
                  helper.make_node(kind, [src, f"wd{kind}"], [f"p{kind}"])]
        elif kind == "MaxPool":
            n.append(helper.make_node(kind, [src], [f"p{kind}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]))
            ys, yz = 0.03, lo + 128
        else:
            n.append(helper.make_node(kind, [src], [f"p{kind}"]))
        io, no = _qdq_out(f"p{kind}", f"y{kind}", ys, yz, act)
        out[kind] = (n + no, i + io, inputs, feeds, f"y{kind}_dq", (ys, yz))
    return out


# same-parameter copies between a producer and a Mul / Div by a constant (kernels/qnn_htp/elementwise.py
# ``_kind_through_copies``): any chain behind a graph input or an Add; a copy to two dimensions behind the others
_THROUGH = {"input": ("R3", "T0231", "R3 T021 S2", "U0", "S1", "T0132"), "Add": ("R3 T021", "F", "S1 R3", "X1"),
            "Conv": ("F", "R2"), "MatMul": ("F", "R2"), "MaxPool": ("F",), "Sigmoid": ("R2",), "Tanh": ("F",),
            "GlobalAveragePool": ("F", "R2")}


def _copies(chain: str, src: str, tag: str, q: tuple, act: str):
    """(nodes, inits, outputs) of same-parameter copies of ``src`` (codes on ``q``): R<k> Reshape to rank k (the
    channels kept first), F Flatten, T<perm> Transpose, S<axis> Split in two halves, X1 Slice of the first half,
    U0 Unsqueeze; each copy re-quantized onto ``q``."""
    nodes, inits, cur = [], [], [src]
    for j, c in enumerate(chain.split()):
        name, ins, kw, n_out = f"{tag}{j}", [cur[0]], {}, 1
        if c[0] == "R":
            inits.append(_init([1, -1] if c == "R2" else [1, 8, -1], f"{name}_shape", np.int64))
            ins.append(f"{name}_shape")
        elif c[0] == "T":
            kw["perm"] = [int(v) for v in c[1:]]
        elif c[0] == "S":
            kw["axis"], n_out = int(c[1]), 2
        elif c[0] == "X":
            inits += [_init([0], f"{name}_st", np.int64), _init([4], f"{name}_en", np.int64),
                      _init([1], f"{name}_ax", np.int64)]
            ins += [f"{name}_st", f"{name}_en", f"{name}_ax"]
        elif c[0] == "U":
            inits.append(_init([0], f"{name}_u", np.int64))
            ins.append(f"{name}_u")
        op = {"R": "Reshape", "F": "Flatten", "T": "Transpose", "S": "Split", "X": "Slice", "U": "Unsqueeze"}[c[0]]
        outs = [f"{name}_{k}" for k in range(n_out)]
        if op == "Split":
            nodes.append(helper.make_node(op, ins, outs, num_outputs=2, **kw))
        else:
            nodes.append(helper.make_node(op, ins, outs, **kw))
        cur = []
        for o in outs:
            io, no = _qdq_out(o, f"{o}_q", *q, act)
            nodes, inits, cur = nodes + no, inits + io, cur + [f"{o}_q_dq"]
    return nodes, inits, cur


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("68", "int8"), ("73", "int8")])
def test_mul_div_constant_by_producer(tmp_path, arch, act):
    """The HTP's Mul / Div by a positive constant picks its kernel by the producer of the other operand:
    two roundings after a graph input, Add (and Sub, a two-tensor Mul, a uint8 MatMul), one rounding after
    Conv, MaxPool (and ConvTranspose, AveragePool, an int8 MatMul), the float32 path after Sigmoid, Tanh,
    GlobalAveragePool (and HardSwish): 6 constants after each, every QuantizeLinear output; after a Resize
    refused.  Behind same-parameter copies (``_THROUGH``, 3 constants each): two roundings through any chain
    after a graph input or an Add, and after a copy to two dimensions whatever the producer; a Reshape to three
    dimensions after a Conv refused (its kernel depends on the shape, measured)."""
    lo = int(np.iinfo(act).min)
    rng = np.random.default_rng(131 + int(arch) + lo)
    nodes, inits, inputs, feeds = [], [], [], {}
    for kind, (n, i, ins, fd, src, (ys, yz)) in _producers(rng, lo, act).items():
        nodes, inits, inputs = nodes + n, inits + i, inputs + ins
        feeds.update(fd)
        jobs = [(src, k) for k in range(6)]
        for c, chain in enumerate(_THROUGH[kind]):
            n, i, outs = _copies(chain, src, f"v{kind}{c}_", (ys, yz), act)
            nodes, inits = nodes + n, inits + i
            jobs += [(o, 10 + 10 * c + 3 * h + k) for h, o in enumerate(outs) for k in range(3)]
        for src, k in jobs:
            op, name = ("Mul", "Div")[k % 2], f"{kind}{k}"
            cq, cs = int(rng.integers(1, 255)), float(F(10 ** rng.uniform(-2.5, -1.3)))
            c = float(F(F(cq) * F(cs)))
            zs = float(F((ys * c if op == "Mul" else ys / c) / rng.uniform(0.8, 8.0)))
            io, no = _qdq_out(f"m{name}", f"z{name}", zs, lo + int(rng.integers(10, 245)), act)
            inits += io + [_init(cq + lo, f"cq{name}", act), _init(cs, f"cs{name}", np.float32), _init(lo, f"cz{name}", act)]
            nodes += [helper.make_node("DequantizeLinear", [f"cq{name}", f"cs{name}", f"cz{name}"], [f"cd{name}"]),
                      helper.make_node(op, [src, f"cd{name}"], [f"m{name}"])] + no
    m = _model(nodes, inits, inputs, [helper.make_tensor_value_info("zinput0_dq", TensorProto.FLOAT, None)])
    _check_many(tmp_path, [(m, feeds)], arch)
    i1, n1 = _qdq_in("x", 0.03, lo + 128, act)
    io, no = _qdq_out("r", "y", 0.03, lo + 128, act)
    i2, n2 = _qdq_out("m", "z", 0.05, lo + 100, act)
    m = _model(n1 + [helper.make_node("Resize", ["x_d", "", "sc"], ["r"], mode="nearest")] + no +
               [helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["cd"]), helper.make_node("Mul", ["y_dq", "cd"], ["m"])] + n2,
               i1 + io + i2 + [_init(np.array([1, 1, 2, 2], np.float32), "sc", np.float32), _init(lo + 200, "cq", act),
                               _init(0.01, "cs", np.float32), _init(lo, "cz", act)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
               [helper.make_tensor_value_info("z_dq", TensorProto.FLOAT, None)])
    assert "Mul by a constant of codes made by Resize" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    # a Reshape to three dimensions after a Conv: one rounding at 8 x 128, two at 16 x 8 (measured): refused
    m = _conv_model((1, 4, 8, 8), rng.integers(-127, 128, (8, 4, 1, 1)), 0.004, None, 0.03, lo + 128, 0.05, lo + 100, act)
    n2, i2, (moved,) = _copies("R3", "y_dq", "v", (0.05, lo + 100), act)
    io, no = _qdq_out("m", "z", 0.05, lo + 100, act)
    m.graph.node.extend(n2 + [helper.make_node("DequantizeLinear", ["cq", "cs", "cz"], ["cd"]),
                              helper.make_node("Mul", [moved, "cd"], ["m"])] + no)
    m.graph.initializer.extend(i2 + io + [_init(lo + 200, "cq", act), _init(0.01, "cs", np.float32), _init(lo, "cz", act)])
    assert "Mul by a constant of codes made by Reshape after Conv" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
