"""``sweep``: single-op cases over the axes that break integer kernels.

Case ``i`` of a sweep takes scenario ``scenarios[i % len]`` (deterministic) and draws the rest
(shapes, data, scales) from ``numpy.random.default_rng([seed, i])``.  Scenarios (sweep_axes.py):

* ``zp_min`` / ``zp_max`` / ``zp_random``: input and output zero points at the type's min / max /
  random (int16 is symmetric, zero point 0: these sweep the lower / upper half of the codes);
* ``scale_tiny`` / ``scale_huge``: effective scale near 2**-20 (outputs collapse to the zero point)
  or above 1 (outputs saturate to the clamp bounds);
* ``saturate``: inputs at the type's extremes;
* ``ties``: power-of-two scales so that the rescaled accumulator hits exact .5 often (rounding mode);
* ``odd_channels``: 1, 3, 5, 7, 17 channels (no SIMD-friendly multiples);
* ``pad_same`` / ``pad_valid``, ``stride2`` / ``stride3``, ``dilation2``, ``relu`` / ``relu6`` /
  ``relu_n1_to_1`` (clamp bounds folded into the requantization);
* elementwise: ``broadcast_row`` / ``broadcast_scalar``, ``scale_ratio`` (input scales 2**10 apart);
* pools: ``filter_1x1``, ``filter_full``; LOGISTIC / SOFTMAX: ``all_codes`` (every int8 code once),
  ``beta_small`` / ``beta_large``, ``single_class``.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import GoldenError
from . import singleop as so
from .sweep_axes import (ELEMENTWISE, FC, LOGISTIC, POOL, SOFTMAX, SPATIAL, Act, act_of, channels, geometry,
                         in_scale, out_scale, pow2)

DTYPES = ("int8", "int16")


def _conv_like(rng, sc: str, q: Act, depthwise: bool):
    cin = channels(rng, sc)
    mult = int(rng.choice([1, 1, 2])) if depthwise else 1
    cout = cin * mult if depthwise else channels(rng, sc, (3, 8, 16))
    pad, strides, dil, k = geometry(rng, sc)
    ext = ((k[0] - 1) * dil[0] + 1, (k[1] - 1) * dil[1] + 1)
    h, w = int(rng.integers(ext[0], ext[0] + 7)), int(rng.integers(ext[1], ext[1] + 7))
    ties = sc == "ties"
    sx = pow2(rng, 4, 8) if ties else float(rng.uniform(0.005, 0.05))
    sw = np.array([pow2(rng, 5, 8) if ties else rng.uniform(0.002, 0.02) for _ in range(cout)])
    zx = q.zp(rng, sc)
    wshape = (1, k[0], k[1], cout) if depthwise else (cout, k[0], k[1], cin)
    wq = rng.integers(-127, 128, size=wshape).astype(np.int8)
    if sc == "saturate":
        wq = rng.choice(np.array([-127, 127], np.int8), size=wshape)
    bias = rng.integers(-4000, 4000, size=cout) * (256 if q.dtype == "int16" else 1)
    n_terms = k[0] * k[1] * (1 if depthwise else cin)
    x_typ = 60.0 * (q.hi + 1) / 128
    so_ = out_scale(rng, sc, sx * float(sw.max()), x_typ * 60.0 * np.sqrt(n_terms), q)
    zo = q.zp(rng, sc)
    oh, ow = so.spatial_out((h, w), k, strides, dil, pad)
    x = so.qtensor("x", (1, h, w, cin), q.dtype, sx, zx)
    wt = so.qtensor("w", wshape, "int8", sw.astype(np.float32), 0, axis=3 if depthwise else 0, const=wq)
    bt = so.qtensor("bias", (cout,), q.bias_dtype, np.float32(sx) * sw.astype(np.float32), 0, axis=0, const=bias)
    y = so.qtensor("y", (1, oh, ow, cout), q.dtype, so_, zo)
    act = act_of(sc)
    if depthwise:
        attrs = so.depthwise_attrs(pad, strides, dil, act, k, cin, mult)
        op, src = "DepthwiseConv", "DEPTHWISE_CONV_2D"
    else:
        attrs = so.conv_attrs(pad, strides, dil, act, k)
        op, src = "Conv", "CONV_2D"
    axes = {"cin": cin, "cout": cout, "kernel": list(k), "strides": list(strides), "dilations": list(dil),
            "padding": pad, "input_zero_point": zx, "output_zero_point": zo, "activation": act}
    return op, src, [x, wt, bt], [y], attrs, {"x": q.data(rng, x.shape, sc)}, axes


def _conv(rng, sc, q):
    return _conv_like(rng, sc, q, False)


def _depthwise(rng, sc, q):
    return _conv_like(rng, sc, q, True)


def _fc(rng, sc, q):
    n_in = channels(rng, sc, (8, 16, 32, 64))
    n_out = channels(rng, sc, (4, 10, 16))
    batch = int(rng.choice([1, 2, 3]))
    ties = sc == "ties"
    sx = pow2(rng, 4, 8) if ties else float(rng.uniform(0.005, 0.05))
    sw = pow2(rng, 5, 8) if ties else float(rng.uniform(0.002, 0.02))
    zx, zo = q.zp(rng, sc), q.zp(rng, sc)
    wq = rng.integers(-127, 128, size=(n_out, n_in)).astype(np.int8)
    bias = rng.integers(-4000, 4000, size=n_out) * (256 if q.dtype == "int16" else 1)
    x_typ = 60.0 * (q.hi + 1) / 128
    so_ = out_scale(rng, sc, sx * sw, x_typ * 60.0 * np.sqrt(n_in), q)
    x = so.qtensor("x", (batch, n_in), q.dtype, sx, zx)
    wt = so.qtensor("w", (n_out, n_in), "int8", sw, 0, const=wq)
    bt = so.qtensor("bias", (n_out,), q.bias_dtype, np.float32(sx) * np.float32(sw), 0, const=bias)
    y = so.qtensor("y", (batch, n_out), q.dtype, so_, zo)
    act = act_of(sc)
    axes = {"batch": batch, "n_in": n_in, "n_out": n_out, "input_zero_point": zx, "output_zero_point": zo,
            "activation": act}
    return ("FullyConnected", "FULLY_CONNECTED", [x, wt, bt], [y], so.fc_attrs(act),
            {"x": q.data(rng, x.shape, sc)}, axes)


def _binary(op: str, src: str):
    def gen(rng, sc, q):
        c = channels(rng, sc)
        shape = (1, int(rng.integers(1, 5)), int(rng.integers(1, 6)), c)
        shape_b = {"broadcast_row": (1, 1, 1, c), "broadcast_scalar": (1,)}.get(sc, shape)
        ties = sc == "ties"
        r = 128.0 / (q.hi + 1)
        sa = (pow2(rng, 4, 8) if ties else float(rng.uniform(0.005, 0.1))) * r
        sb = sa * 2.0 ** -10 if sc == "scale_ratio" else (pow2(rng, 4, 8) if ties else
                                                           float(rng.uniform(0.005, 0.1))) * r
        typical = (sa + sb) * (q.hi + 1) if op != "Mul" else sa * sb * (q.hi + 1) ** 2
        so_ = {"scale_tiny": typical * 2.0 ** 12, "scale_huge": typical / 1000.0}.get(sc)
        if so_ is None:
            so_ = (pow2(rng, 1, 6) * (sa if op != "Mul" else sa * sb) if ties
                   else typical / q.hi * rng.uniform(0.4, 1.5))
        za, zb, zo = q.zp(rng, sc), q.zp(rng, sc), q.zp(rng, sc)
        a = so.qtensor("a", shape, q.dtype, sa, za)
        b = so.qtensor("b", shape_b, q.dtype, sb, zb)
        y = so.qtensor("y", shape, q.dtype, float(so_), zo)
        act = act_of(sc)
        attrs = so.binary_attrs(op, act)
        if q.dtype == "int16" and "pot_scale_int16" in attrs:
            attrs["pot_scale_int16"] = False  # the converter's general int16 path (scales are not 2**k)
        feeds = {"a": q.data(rng, shape, sc), "b": q.data(rng, shape_b, sc)}
        axes = {"shape_a": list(shape), "shape_b": list(shape_b), "zero_points": [za, zb, zo], "activation": act}
        return op, src, [a, b], [y], attrs, feeds, axes
    return gen


def _avgpool(rng, sc, q):
    c = channels(rng, sc)
    pad, strides, _dil, k = geometry(rng, sc)
    h, w = int(rng.integers(3, 9)), int(rng.integers(3, 9))
    if sc == "filter_1x1":
        k = (1, 1)
    elif sc == "filter_full":
        k, pad = (h, w), "VALID"
    k = (min(k[0], h), min(k[1], w))
    s = float(rng.uniform(0.01, 0.1))
    z = q.zp(rng, sc)
    oh, ow = so.spatial_out((h, w), k, strides, (1, 1), pad)
    x = so.qtensor("x", (1, h, w, c), q.dtype, s, z)
    y = so.qtensor("y", (1, oh, ow, c), q.dtype, s, z)  # TFLite AVERAGE_POOL keeps the input params
    act = act_of(sc)
    axes = {"channels": c, "filter": list(k), "strides": list(strides), "padding": pad, "zero_point": z,
            "activation": act}
    return ("AveragePool", "AVERAGE_POOL_2D", [x], [y], so.pool_attrs(pad, strides, k, act),
            {"x": q.data(rng, x.shape, sc)}, axes)


def _softmax(rng, sc, q):
    n = 1 if sc == "single_class" else channels(rng, sc, (4, 10, 16, 32))
    rows = int(rng.integers(1, 4))
    xv = q.all_codes(rng, rows) if sc == "all_codes" else q.data(rng, (rows, n), sc)
    n = xv.shape[1]
    beta = {"beta_small": 0.25, "beta_large": 4.0}.get(sc, 1.0)
    s, z = in_scale(rng, sc, q), q.zp(rng, sc)
    x = so.qtensor("x", (rows, n), q.dtype, s, z)
    y = so.qtensor("y", (rows, n), q.dtype, *q.prob_params)
    axes = {"rows": rows, "classes": n, "beta": beta, "input_scale": s, "input_zero_point": z}
    return "Softmax", "SOFTMAX", [x], [y], so.softmax_attrs(beta), {"x": xv}, axes


def _logistic(rng, sc, q):
    s, z = in_scale(rng, sc, q), q.zp(rng, sc)
    xv = q.all_codes(rng, 1) if sc == "all_codes" else q.data(rng, (1, 64), sc)
    x = so.qtensor("x", xv.shape, q.dtype, s, z)
    y = so.qtensor("y", xv.shape, q.dtype, *q.prob_params)
    axes = {"input_scale": s, "input_zero_point": z, "size": int(xv.size)}
    return "Sigmoid", "LOGISTIC", [x], [y], {"op_version": 2 if q.dtype == "int8" else 3}, {"x": xv}, axes


Generator = Callable[[Any, str, Act], tuple]
GENERATORS: dict[str, tuple[Generator, tuple[str, ...]]] = {
    "CONV_2D": (_conv, SPATIAL), "DEPTHWISE_CONV_2D": (_depthwise, SPATIAL), "FULLY_CONNECTED": (_fc, FC),
    "ADD": (_binary("Add", "ADD"), ELEMENTWISE), "SUB": (_binary("Sub", "SUB"), ELEMENTWISE),
    "MUL": (_binary("Mul", "MUL"), ELEMENTWISE), "AVERAGE_POOL_2D": (_avgpool, POOL),
    "SOFTMAX": (_softmax, SOFTMAX), "LOGISTIC": (_logistic, LOGISTIC),
}


def sweep_ops() -> list[str]:
    return sorted(GENERATORS)


def sweep_cases(op: str, scheme: Any, count: int, seed: int = 0, dtype: str = "int8") -> list:
    """``count`` cases for TFLite builtin ``op`` (e.g. ``CONV_2D``) made under ``scheme``.

    ``dtype``: the activation type, ``int8`` or ``int16`` (16x8: int8 weights, int64 bias)."""
    from .make import make_cases

    key = op.upper()
    if key not in GENERATORS:
        raise GoldenError(f"no sweep for op '{op}' (available: {', '.join(sweep_ops())})")
    if count < 1:
        raise GoldenError(f"--count must be at least 1, got {count}")
    if dtype not in DTYPES:
        raise GoldenError(f"--dtype must be one of {', '.join(DTYPES)}, got '{dtype}'")
    gen, scenarios = GENERATORS[key]
    q = Act(dtype)
    cases = []
    for i in range(count):
        sc = scenarios[i % len(scenarios)]
        rng = np.random.default_rng([seed, i])
        cop, src, ins, outs, attrs, feeds, axes = gen(rng, sc, q)
        name = sc if dtype == "int8" else f"{dtype}_{sc}"
        g = so.graph_of(cop, src, name, ins, outs, attrs)
        extra = {"sweep": {"op": key, "seed": seed, "index": i, "dtype": dtype, "axes": dict(scenario=sc, **axes)}}
        cases += make_cases(g, scheme, feeds, generator="refinterp golden sweep", extra=extra, start_index=i)
    return cases
