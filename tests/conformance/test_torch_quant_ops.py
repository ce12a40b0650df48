"""torch quantized element-wise ops, pools and quantize / dequantize (engines fbgemm, qnnpack, x86,
onednn) vs the matching refinterp schemes at 0 differing elements.  Sweeps mix random scales with
scale ratios 1/2, 1, 2 (exact .5 ties), odd and even zero points, and output scales small enough to
saturate."""
from __future__ import annotations

import numpy as np
import pytest

from _torch_quant import F32, SCHEME, one_node, qp, qtensor, run, tinfo

torch = pytest.importorskip("torch")
qF = pytest.importorskip("torch.ao.nn.quantized.functional")
ENGINES = [e for e in ("fbgemm", "qnnpack", "x86", "onednn") if e in torch.backends.quantized.supported_engines]
SHAPE = (2, 3, 8, 8)


def _params(rng, i):
    sa = F32(rng.uniform(0.01, 0.1))
    ratio = (0.5, 1.0, 2.0, 3.0, None)[i % 5]
    sc = F32(sa * ratio) if ratio else F32(rng.uniform(0.01, 0.1))
    if i % 7 == 6:
        sc = F32(sc * 0.1)  # saturation
    zs = [int(rng.integers(0, 128)) * 2 + (1 if i % 2 else 0) for _ in range(3)]
    return sa, sc, zs


def _u8(rng):
    return rng.integers(0, 256, SHAPE).astype(np.uint8)


def _count(got, ref):
    return int((np.asarray(got) != np.asarray(ref)).sum()), np.asarray(ref).size


def _binary(op, rng, i, engine):
    sa, sc, (za, zb, zc) = _params(rng, i)
    sb = sa if i % 3 else F32(rng.uniform(0.01, 0.1))
    if op == "mul" and i % 4 < 2:  # sa*sb/sc = 0.5 or 0.25: products land on exact ties
        sa, sb, sc = F32(2.0 ** -3), F32(2.0 ** -4), F32(2.0 ** -(6 - i % 4))
    a, b = _u8(rng), _u8(rng)
    A, B = qtensor(torch, a, sa, za), qtensor(torch, b, sb, zb)
    relu = op.endswith("_relu")
    if op.startswith("add"):
        zc = 0 if relu else zc
        ref = (torch.ops.quantized.add_relu if relu else torch.ops.quantized.add)(A, B, float(sc), zc)
    else:
        ref = torch.ops.quantized.mul(A, B, float(sc), zc)
    g = one_node("Add" if op.startswith("add") else "Mul",
                 [tinfo("a", SHAPE, "uint8", qp(sa, za)), tinfo("b", SHAPE, "uint8", qp(sb, zb))],
                 tinfo("y", SHAPE, "uint8", qp(sc, zc)))
    return _count(run(g, SCHEME[engine], {"a": a, "b": b}), ref.int_repr().numpy())


def _unary(op, rng, i, engine):
    sa, sc, (za, _, zc) = _params(rng, i)
    a = _u8(rng)
    A = qtensor(torch, a, sa, za)
    attrs = {}
    if op == "hardswish":
        ref = qF.hardswish(A, float(sc), zc)
        cop = "HardSwish"
    elif op == "sigmoid":
        ref, cop = torch.sigmoid(A), "Sigmoid"
    elif op == "leaky_relu":
        ref = qF.leaky_relu(A, 0.1, scale=float(sc), zero_point=zc)
        cop, attrs = "LeakyRelu", {"alpha": 0.1}
    else:
        ref = qF.elu(A, float(sc), zc, 1.0)
        cop, attrs = "Elu", {"alpha": 1.0}
    sc, zc = F32(ref.q_scale()), int(ref.q_zero_point())
    g = one_node(cop, [tinfo("a", SHAPE, "uint8", qp(sa, za))], tinfo("y", SHAPE, "uint8", qp(sc, zc)), **attrs)
    return _count(run(g, SCHEME[engine], {"a": a}), ref.int_repr().numpy())


def _cat(op, rng, i, engine):
    sa, sc, (za, zb, zc) = _params(rng, i)
    sb = F32(rng.uniform(0.01, 0.1)) if i % 2 else sc
    zb = zc if not i % 2 else zb
    a, b = _u8(rng), _u8(rng)
    ref = torch.ops.quantized.cat([qtensor(torch, a, sa, za), qtensor(torch, b, sb, zb)], 1, float(sc), zc)
    ref = ref.int_repr().numpy()
    g = one_node("Concat", [tinfo("a", SHAPE, "uint8", qp(sa, za)), tinfo("b", SHAPE, "uint8", qp(sb, zb))],
                 tinfo("y", ref.shape, "uint8", qp(sc, zc)), axis=1)
    return _count(run(g, SCHEME[engine], {"a": a, "b": b}), ref)


def _avgpool(op, rng, i, engine):
    sa, _, (za, _, _) = _params(rng, i)
    a = _u8(rng)
    A = qtensor(torch, a, sa, za)
    if op == "avg_pool2d":
        k, s, pad = (3, 1, 1) if i % 2 else (2, 2, 0)
        ref = torch.nn.functional.avg_pool2d(A, k, s, pad).int_repr().numpy()
        g = one_node("AveragePool", [tinfo("a", SHAPE, "uint8", qp(sa, za))],
                     tinfo("y", ref.shape, "uint8", qp(sa, za)), kernel_shape=[k, k], strides=[s, s],
                     pads=[pad] * 4, count_include_pad=1, layout="NCHW")
    else:
        shape = (4, 64) + ((5, 5), (6, 6), (4, 4), (3, 7))[i % 4]  # 1024 windows per case
        a = rng.integers(0, 256, shape).astype(np.uint8)
        ref = torch.nn.functional.adaptive_avg_pool2d(qtensor(torch, a, sa, za), 1).int_repr().numpy()
        g = one_node("GlobalAveragePool", [tinfo("a", shape, "uint8", qp(sa, za))],
                     tinfo("y", ref.shape, "uint8", qp(sa, za)), layout="NCHW")
    return _count(run(g, SCHEME[engine], {"a": a}), ref)


def _quantize(op, rng, i, engine):
    s = F32(rng.uniform(0.005, 0.1))
    signed = i % 4 == 3  # qint8 / int8 zero point
    z = int(rng.integers(0, 128)) * 2 + i % 2 - (128 if signed else 0)
    dt, tdt = ("int8", torch.qint8) if signed else ("uint8", torch.quint8)
    x = (rng.integers(-600, 600, SHAPE) * s * 0.5).astype(F32)  # every other value an exact tie
    x.reshape(-1)[:16] = (rng.standard_normal(16) * 50).astype(F32)  # saturation
    qt = torch.quantize_per_tensor(torch.from_numpy(x), float(s), z, tdt)
    zc = np.asarray(z, dt)
    g = one_node("QuantizeLinear", [tinfo("x", SHAPE, "float32"), tinfo("s", None, "float32", None, np.asarray(s)),
                                    tinfo("z", None, dt, None, zc)],
                 tinfo("y", SHAPE, dt))
    d1, n1 = _count(run(g, SCHEME[engine], {"x": x}), qt.int_repr().numpy())
    q = qt.int_repr().numpy()
    g = one_node("DequantizeLinear", [tinfo("q", SHAPE, dt), tinfo("s", None, "float32", None, np.asarray(s)),
                                      tinfo("z", None, dt, None, zc)],
                 tinfo("y", SHAPE, "float32"))
    got = run(g, SCHEME[engine], {"q": q}).view(np.uint32)
    d2, n2 = _count(got, qt.dequantize().numpy().view(np.uint32))
    return d1 + d2, n1 + n2


CASES = {"add": _binary, "add_relu": _binary, "mul": _binary, "hardswish": _unary, "sigmoid": _unary,
         "leaky_relu": _unary, "elu": _unary, "cat": _cat, "avg_pool2d": _avgpool,
         "adaptive_avg_pool2d": _avgpool, "quantize_dequantize": _quantize}
N_CASES = 20


def sweep(op: str, engine: str) -> tuple[int, int]:
    torch.backends.quantized.engine = engine
    rng = np.random.default_rng(sum(map(ord, op)))
    diff = total = 0
    for i in range(N_CASES):
        d, n = CASES[op](op, rng, i, engine)
        diff, total = diff + d, total + n
    return diff, total


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("op", list(CASES))
def test_op(op, engine):
    diff, total = sweep(op, engine)
    assert total > 0
    assert diff == 0, f"{op}[{engine}]: {diff} of {total} elements differ"
