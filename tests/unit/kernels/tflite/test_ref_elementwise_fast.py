"""The fast ADD / SUB, SOFTMAX and MEAN / SUM paths equal (``array_equal``, same dtype) the NumPy
kernels they replace, under every kernel variant and rounding form they claim: LiteRT reference
(``tflite_ref``), optimized (``tflite_opt``) and XNNPACK (``xnn``).

The NumPy result comes from the registered kernel with its module's ``_FAST`` switched off (what
``REFINTERP_FAST_KERNELS=0`` does); the fast result from the fast entry point itself, which must
not decline a case it covers.  Inputs cover the whole dtype range (saturation), zero points at the
ends of the range, power-of-two scales (exact rounding ties), broadcasting and odd sizes.
"""
from __future__ import annotations

import numba
import dataclasses

import numpy as np
import pytest

from refinterp.ir import Node, QuantParams, TensorInfo
from refinterp.kernels.tflite.optimized import elementwise as opt_elementwise
from refinterp.kernels.tflite.optimized import misc as opt_misc
from refinterp.kernels.tflite.ref import elementwise as qelementwise
from refinterp.kernels.tflite.ref import reduce as qreduce
from refinterp.kernels.tflite.optimized import reduce as qreduce_fast
from refinterp.kernels.tflite.ref import softmax as qsoftmax
from refinterp.kernels.tflite.xnnpack import elementwise as xnn_elementwise
from refinterp.quant import fixedpoint_nb as ff
from refinterp.kernels.tflite.ref.elementwise_fast import fast_add_sub, fast_opt_add, fast_xnn_add
from refinterp.kernels.tflite.ref.reduce_fast import fast_reduce
from refinterp.kernels.tflite.ref.softmax_fast import fast_softmax
from refinterp.kernels.registry import PrepareContext, lookup
from refinterp.quant.fixedpoint import rdbp, srdhm
from refinterp.quant.requant import requantize

RNG = np.random.default_rng(88)
_MODULES = (qelementwise, opt_elementwise, xnn_elementwise, qsoftmax, opt_misc, qreduce, qreduce_fast)


def _numpy_run(monkeypatch, k, plan, *xs):
    """The registered kernel with every fast path of these modules disabled."""
    with monkeypatch.context() as m:
        for mod in _MODULES:
            m.setattr(mod, "_FAST", False)
        return k.run(plan, *xs)


def _x(shape, dt):
    """Random codes over the full range of ``dt`` with both extremes present."""
    info = np.iinfo(np.dtype(dt))
    x = RNG.integers(int(info.min), int(info.max) + 1, size=shape, dtype=np.int64)
    flat = x.reshape(-1)
    if flat.size >= 2:
        flat[0], flat[-1] = info.min, info.max
    return x.astype(dt)


def _q(name, shape, dt, s, z):
    return TensorInfo(name, shape, dt, quant=QuantParams(np.array([s], np.float32), np.array([z], np.int64)))


def _same(got, ref):
    assert got is not None
    assert got.dtype == ref.dtype and got.shape == ref.shape
    assert np.array_equal(got, ref)


# -- the scalar forms against the NumPy requantizers ----------------------------------------------

@numba.njit(cache=False)
def _apply_forms(v, M, left, right, total):  # pragma: no cover - compiled
    out = np.empty((5, v.size), np.int64)
    for i in range(v.size):
        out[0, i] = ff.mbqm_double(v[i], M, left, right)
        out[1, i] = ff.mbqm_upward(v[i], M, left, right)
        out[2, i] = ff.mbqm_single(v[i], M, total)
        out[3, i] = ff.srdhm_pos(v[i], M)
        out[4, i] = ff.rdbp(v[i], right)
    return out


@pytest.mark.parametrize("shift", [-31, -20, -1, 0, 1, 7, 30])
@pytest.mark.parametrize("M", [0, 1, 1 << 30, (1 << 31) - 1, 1518500250])
def test_scalar_forms_equal_numpy(M, shift):
    edges = np.array([-(1 << 31), -(1 << 31) + 1, -(1 << 30), -(1 << 30) - 1, -1, 0, 1, (1 << 30), (1 << 31) - 1])
    ties = np.arange(-40, 41, dtype=np.int64) << max(-shift - 1, 0)
    ties = ties[(ties >= -(1 << 31)) & (ties < (1 << 31))]  # every form takes int32-valued v
    v = np.concatenate([edges, ties, RNG.integers(-(1 << 31), 1 << 31, 3000)]).astype(np.int64)
    if shift > 0:  # the single form needs |v * M| < 2^62 only; double/upward wrap v << left
        v = v >> shift
    code, m, left, right = ff.forms(M, shift, "double")
    _, _, total, _ = ff.forms(M, shift, "single")
    got = _apply_forms(v, m, left, right, total)
    assert np.array_equal(got[0], requantize(v, M, shift, "double"))
    assert np.array_equal(got[1], requantize(v, M, shift, "upward"))
    assert np.array_equal(got[2], requantize(v, M, shift, "single"))
    assert np.array_equal(got[3], srdhm(v, M))
    assert np.array_equal(got[4], rdbp(v, right))


def test_forms_decline():
    assert ff.forms(1 << 31, 0, "double") is None
    assert ff.forms(-1, 0, "double") is None
    assert ff.forms(1 << 30, 0, "mbqm64") is None
    assert ff.forms(1 << 30, 0, "pot") is None


# -- ADD / SUB ---------------------------------------------------------------------------------------

ADD_CASES = [  # (dtype, s1, z1, s2, z2, so, zo, activation, shapes)
    ("int8", 0.02, -3, 0.05, 7, 0.06, -1, None, ((2, 5, 7, 3), (2, 5, 7, 3))),
    ("int8", 0.5, -128, 0.25, 127, 1.0, 127, None, ((9, 33), (9, 33))),  # power-of-two scales: ties
    ("int8", 0.25, 127, 0.25, -128, 0.125, -128, "RELU6", ((64, 3), (64, 3))),
    ("int8", 0.3, 127, 0.001, -128, 0.2, 5, "RELU", ((3, 1, 5), (1, 4, 5))),  # broadcast
    ("int8", 0.04, 0, 0.07, 3, 0.003, 2, None, ((6, 17), (1,))),  # small output scale: saturation
    ("int8", 0.03, -7, 0.02, 11, 0.05, 4, None, ((2, 130, 131), (2, 130, 131))),  # >= 32768: pair table
    ("int8", 0.5, -128, 0.125, 127, 0.25, 127, "RELU", ((64, 600), (600,))),  # pair table, broadcast
    ("uint8", 0.02, 128, 0.03, 100, 0.04, 120, None, ((6, 11), (6, 11))),
    ("uint8", 0.25, 255, 0.5, 0, 0.5, 0, None, ((3, 111, 100), (3, 111, 100))),
    ("uint8", 0.5, 0, 0.5, 255, 0.5, 255, "RELU", ((4, 37), (4, 37))),
    ("int16", 0.0003, 0, 0.0007, 0, 0.0009, 0, None, ((5, 13), (5, 13))),
    ("int16", 2.0 ** -10, 0, 2.0 ** -11, 0, 2.0 ** -9, 0, None, ((3, 70), (3, 70))),  # general, ties
    ("int16", 0.001, 0, 0.0004, 0, 0.00002, 0, "RELU", ((7, 9), (1, 9))),
]


def _add_plan(variant, op, case, rounding="double", pot=False, settings=None):
    dt, s1, z1, s2, z2, so, zo, act, (sha, shb) = case
    node = Node("n", op, ["a", "b"], ["y"], {"activation": act, "pot_scale_int16": pot})
    ctx = PrepareContext(node, [_q("a", sha, dt, s1, z1), _q("b", shb, dt, s2, z2)], [_q("y", None, dt, so, zo)],
                         {"requant": {"rounding": rounding}, **(settings or {})})
    k = lookup(op, [variant], node=node)
    return k, k.prepare(node, ctx)


@pytest.mark.parametrize("case", ADD_CASES, ids=lambda c: f"{c[0]}-{c[7]}-{c[8][0]}-{c[8][1]}")
@pytest.mark.parametrize("op", ["Add", "Sub"])
@pytest.mark.parametrize("rounding", ["double", "upward", "single"])
def test_ref_add_sub(case, op, rounding, monkeypatch):
    k, plan = _add_plan("tflite_ref", op, case, rounding)
    a, b = _x(case[8][0], case[0]), _x(case[8][1], case[0])
    ref = _numpy_run(monkeypatch, k, plan, a, b)
    _same(fast_add_sub(plan, a, b), ref)
    _same(k.run(plan, a, b), ref)


@pytest.mark.parametrize("shifts", [(2.0 ** -8, 2.0 ** -8, 2.0 ** -8), (2.0 ** -12, 2.0 ** -9, 2.0 ** -9),
                                    (2.0 ** -9, 2.0 ** -15, 2.0 ** -9)])
@pytest.mark.parametrize("op", ["Add", "Sub"])
@pytest.mark.parametrize("act", [None, "RELU"])
def test_ref_add_sub_pot_int16(shifts, op, act, monkeypatch):
    s1, s2, so = shifts
    case = ("int16", s1, 0, s2, 0, so, 0, act, ((4, 19), (4, 19)))
    k, plan = _add_plan("tflite_ref", op, case, pot=True)
    assert plan.pot
    a, b = _x((4, 19), "int16"), _x((4, 19), "int16")
    ref = _numpy_run(monkeypatch, k, plan, a, b)
    _same(fast_add_sub(plan, a, b), ref)


@pytest.mark.parametrize("case", [c for c in ADD_CASES if c[0] == "int16"] + [ADD_CASES[0]],
                         ids=lambda c: f"{c[0]}-{c[8][0]}-{c[8][1]}")
@pytest.mark.parametrize("size", [5, 16, 47, 160])
def test_opt_add_neon_int16(case, size, monkeypatch):
    case = case[:8] + (((size,), (size,)) if case[8][0] == case[8][1] else case[8],)
    k, plan = _add_plan("tflite_opt", "Add", case)
    a, b = _x(case[8][0], case[0]), _x(case[8][1], case[0])
    ref = _numpy_run(monkeypatch, k, plan, a, b)
    _same(fast_opt_add(plan, a, b), ref)
    _same(k.run(plan, a, b), ref)


XNN_CASES = [c for c in ADD_CASES if c[0] != "int16"]


@pytest.mark.parametrize("case", XNN_CASES, ids=lambda c: f"{c[0]}-{c[7]}-{c[8][0]}-{c[8][1]}")
@pytest.mark.parametrize("op", ["Add", "Sub"])
def test_xnn_add_sub(case, op, monkeypatch):
    k, plan = _add_plan("xnn", op, case)
    a, b = _x(case[8][0], case[0]), _x(case[8][1], case[0])
    ref = _numpy_run(monkeypatch, k, plan, a, b)
    if plan.delegated:
        _same(fast_xnn_add(plan.plan, a, b), ref)
    _same(k.run(plan, a, b), ref)


@pytest.mark.parametrize("dt,shape", [("int8", (5, 9)), ("int8", (200, 200)), ("uint8", (7, 5)), ("int16", (3, 21))])
@pytest.mark.parametrize("rounding", ["double", "upward", "single"])
def test_ref_sub_output_multiplier_above_one(dt, shape, rounding, monkeypatch):
    """SUB with a tiny output scale: the output rescale shifts left (QuantizeMultiplierGreaterThanOne)."""
    s = 0.1 if dt != "int16" else 0.003
    case = (dt, s, 0, s, 0, 1e-7 if dt != "int16" else 1e-7, 0, None, (shape, shape))
    k, plan = _add_plan("tflite_ref", "Sub", case, rounding)
    assert plan.eo > 0
    a, b = _x(shape, dt), _x(shape, dt)
    ref = _numpy_run(monkeypatch, k, plan, a, b)
    _same(fast_add_sub(plan, a, b), ref)


def test_add_declines_uncovered(monkeypatch):
    k, plan = _add_plan("tflite_ref", "Add", ADD_CASES[0])
    a, b = _x((2, 5, 7, 3), "int8"), _x((2, 5, 7, 3), "int8")
    assert fast_add_sub(plan, a.astype(np.int16), b) is None  # dtype differs from the plan's
    plan64 = dataclasses.replace(plan, rounding="mbqm64")
    assert fast_add_sub(plan64, a, b) is None


# -- SOFTMAX -----------------------------------------------------------------------------------------

SOFTMAX_CASES = [  # (in dtype, sx, zx, out dtype, so, zo, beta, shape)
    ("int8", 0.1, 3, "int8", 1 / 256, -128, 1.0, (1, 1000)),
    ("int8", 0.05, -128, "int8", 1 / 256, -128, 1.0, (3, 37)),
    ("int8", 0.5, 0, "int8", 1 / 256, -128, 1.0, (4, 64)),   # large sx*beta: many d < diff_min
    ("int8", 0.02, 0, "int8", 1 / 256, -128, 0.5, (2, 1)),
    ("uint8", 0.08, 128, "uint8", 1 / 256, 0, 1.0, (5, 10)),
    ("uint8", 0.25, 0, "uint8", 1 / 256, 0, 2.0, (1, 300)),
    ("int8", 0.1, 0, "int16", 1 / 32768, -32768, 1.0, (2, 50)),
]


def _softmax_plan(variant, case, rounding="double"):
    dt, sx, zx, odt, so, zo, beta, shape = case
    node = Node("n", "Softmax", ["x"], ["y"], {"beta": beta, "axis": -1})
    ctx = PrepareContext(node, [_q("x", shape, dt, sx, zx)], [_q("y", shape, odt, so, zo)],
                         {"requant": {"rounding": rounding}})
    k = lookup("Softmax", [variant], node=node)
    return k, k.prepare(node, ctx)


def _logits(shape, dt):
    x = _x(shape, dt)
    if x.shape[-1] > 4:  # rows with repeated maxima and a constant row
        x[..., 1] = x.max(axis=-1)
        x[0] = np.iinfo(np.dtype(dt)).min if x.shape[0] > 1 else x[0]
    return x


@pytest.mark.parametrize("case", SOFTMAX_CASES, ids=lambda c: f"{c[0]}-{c[3]}-{c[1]}-{c[7]}")
@pytest.mark.parametrize("variant,rounding", [("tflite_ref", "double"), ("tflite_ref", "upward"),
                                              ("tflite_opt", "double")])
def test_softmax_8bit(case, variant, rounding, monkeypatch):
    k, plan = _softmax_plan(variant, case, rounding)
    x = _logits(case[7], case[0])
    ref = _numpy_run(monkeypatch, k, plan, x)
    _same(fast_softmax(plan, x), ref)
    _same(k.run(plan, x), ref)


@pytest.mark.parametrize("sx,beta,shape", [(0.001, 1.0, (3, 40)), (0.0002, 1.0, (2, 1000)), (0.01, 0.7, (4, 9)),
                                           (3e-5, 1.0, (1, 1))])
@pytest.mark.parametrize("variant", ["tflite_ref", "tflite_opt"])
def test_softmax_int16(sx, beta, shape, variant, monkeypatch):
    case = ("int16", sx, 0, "int16", 1 / 32768, 0, beta, shape)
    k, plan = _softmax_plan(variant, case)
    x = _logits(shape, "int16")
    ref = _numpy_run(monkeypatch, k, plan, x)
    _same(fast_softmax(plan, x), ref)
    _same(k.run(plan, x), ref)


def test_reciprocal_equals_gemmlowp():
    from refinterp.kernels.tflite.ref.softmax_fast import _reciprocal
    from refinterp.quant import gemmlowp

    totals = np.concatenate([[1, 2, 3, 4095, 4096, 4097, (1 << 19), (1 << 30) - 1, 1 << 30, (1 << 31) - 1],
                             1 << np.arange(31), RNG.integers(1, 1 << 31, 1500)]).astype(np.int64)
    recip, over = gemmlowp.get_reciprocal(totals, 12)
    got = np.array([_reciprocal(int(t)) for t in totals], np.int64)
    assert np.array_equal(got[:, 0], recip) and np.array_equal(got[:, 1], over)


def test_softmax_declines_uncovered():
    _, plan = _softmax_plan("tflite_ref", SOFTMAX_CASES[0])
    assert fast_softmax(plan, _x((1, 4096), "int8")) is None  # the Q12 sum could pass 2^31
    assert fast_softmax(plan, _x((1, 10), "int16")) is None  # not the plan's input type
    _, plan = _softmax_plan("tflite_opt", SOFTMAX_CASES[0])
    bad = dataclasses.replace(plan, table=(plan.table * 2).astype(np.float32))
    assert fast_softmax(bad, _x((1, 8), "int8")) is None  # table entries > 1 (e * inv could overflow)


# -- MEAN / SUM --------------------------------------------------------------------------------------

def _reduce_plan(variant, op, dt, shape, axes, keep, sx, zx, so, zo, settings):
    node = Node("n", op, ["x", "axes"], ["y"], {"keepdims": int(keep)})
    axes_t = TensorInfo("axes", (len(axes),), "int32", const=np.array(axes, np.int32))
    ctx = PrepareContext(node, [_q("x", shape, dt, sx, zx), axes_t], [_q("y", None, dt, so, zo)], settings)
    k = lookup(op, [variant], node=node)
    return k, k.prepare(node, ctx)


REDUCE_SHAPES = [((1, 7, 7, 40), (1, 2)), ((2, 3, 5, 17), (1, 2)), ((2, 3, 5, 17), (-1,)),
                 ((4, 6, 9), (0, 1, 2)), ((3, 5, 11), (0,)), ((2, 3, 5, 17), (1, 2, 3))]
REDUCE_Q = [(0.02, 3, 0.01, -2), (0.5, -128, 0.003, 127), (0.1, 127, 0.5, -128)]


@pytest.mark.parametrize("shape,axes", REDUCE_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("q", REDUCE_Q, ids=lambda q: f"zx{q[1]}-zo{q[3]}")
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("variant,op,settings", [
    ("tflite_ref", "ReduceMean", {}),
    ("tflite_ref", "ReduceMean", {"requant": {"rounding": "upward"}}),
    ("tflite_ref", "ReduceMean", {"requant": {"rounding": "single"}}),
    ("tflite_ref", "ReduceSum", {}),
    ("tflite_ref", "ReduceSum", {"impl": "uint8_bytes"}),
    ("tflite_opt", "ReduceMean", {"impl": "spatial_fast",
                                  "requant": {"rounding": "double", "channel_block": 16, "block_rounding": "upward"}}),
    ("xnn", "ReduceMean", {"delegate": {"impl": "xnn_float"}}),
    ("xnn", "ReduceSum", {"delegate": {"impl": "xnn_float"}}),
], ids=lambda v: v if isinstance(v, str) else "-".join(f"{x}" for x in v.values()) if isinstance(v, dict) else None)
@pytest.mark.parametrize("dt", ["int8", "uint8"])
def test_reduce(shape, axes, q, keep, variant, op, settings, dt, monkeypatch):
    sx, zx, so, zo = q
    if dt == "uint8":
        zx, zo = zx + 128, zo + 128
    k, plan = _reduce_plan(variant, op, dt, shape, axes, keep, sx, zx, so, zo, settings)
    x = _x(shape, dt)
    ref = _numpy_run(monkeypatch, k, plan, x)
    inner = getattr(plan, "plan", plan)  # xnn refusals wrap the reference plan
    _same(fast_reduce(inner, x), ref)
    _same(k.run(plan, x), ref)


def test_reduce_int16_and_declines(monkeypatch):
    k, plan = _reduce_plan("tflite_ref", "ReduceMean", "int16", (2, 6, 6, 5), (1, 2), True, 0.001, 0, 0.0005, 0, {})
    x = _x((2, 6, 6, 5), "int16")
    _same(fast_reduce(plan, x), _numpy_run(monkeypatch, k, plan, x))
    k, plan = _reduce_plan("tflite_ref", "ReduceMean", "int8", (2, 6, 6, 5), (0, 2), True, 0.02, 1, 0.01, 0, {})
    assert fast_reduce(plan, _x((2, 6, 6, 5), "int8")) is None  # axes not one contiguous block
    k, plan = _reduce_plan("tflite_opt", "ReduceSum", "int8", (2, 6, 6, 5), (1, 2), True, 0.02, 1, 0.01, 0,
                           {"impl": "float_scale"})
    assert fast_reduce(plan, _x((2, 6, 6, 5), "int8")) is None  # float_scale SUM: NumPy path


# -- wiring: every ADD / SUB / SOFTMAX / MEAN node of small models takes a fast path --------------

_ENTRY_POINTS = {  # module attribute -> op group
    (qelementwise, "fast_add_sub"): "add", (opt_elementwise, "fast_opt_add"): "add",
    (xnn_elementwise, "fast_xnn_add"): "add", (qsoftmax, "fast_softmax"): "softmax",
    (opt_misc, "fast_softmax"): "softmax", (qreduce, "fast_reduce"): "reduce", (qreduce_fast, "fast_reduce"): "reduce",
}
_GROUP = {"Add": "add", "Sub": "add", "Softmax": "softmax", "ReduceMean": "reduce"}


@pytest.mark.parametrize("model", ["mobilenet_v2_tiny_int8", "mobilenet_tiny_int16x8", "efficientnet_tiny_int8"])
@pytest.mark.parametrize("scheme", ["tflite-reference", "tflite-optimized", "tflite-xnnpack", "tflite-micro"])
def test_fast_paths_taken(model, scheme, monkeypatch):
    from pathlib import Path

    import refinterp
    from refinterp.cli.common import random_inputs

    calls: dict[str, list[bool]] = {}
    for mod in _MODULES:
        if not getattr(mod, "_FAST"):
            pytest.fail("REFINTERP_FAST_KERNELS=0 in the test environment")
    for (mod, name), group in _ENTRY_POINTS.items():
        def counted(*a, _orig=getattr(mod, name), _group=group):
            y = _orig(*a)
            calls.setdefault(_group, []).append(y is not None)
            return y
        monkeypatch.setattr(mod, name, counted)
    g = refinterp.load(str(Path(__file__).resolve().parents[4] / "tests/fixtures/tflite" / f"{model}.tflite"))
    refinterp.Session(g, scheme).run(random_inputs(g, 5))
    for group in set(_GROUP.values()):
        n_nodes = sum(_GROUP.get(n.op) == group for n in g.nodes)
        assert n_nodes > 0 and len(calls.get(group, [])) >= n_nodes, (group, n_nodes, calls)
    assert all(all(v) for v in calls.values()), calls  # no fast path declined
