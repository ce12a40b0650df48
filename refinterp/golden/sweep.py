"""``sweep``: single-op cases over the axes that break integer kernels.

Case ``i`` of a sweep takes scenario ``SCENARIOS[op][i % len]`` (deterministic) and draws the rest
(shapes, data, scales) from ``numpy.random.default_rng(seed + i)``.  Scenarios:

* ``zp_min`` / ``zp_max`` / ``zp_random``: input and output zero points at -128 / 127 / random;
* ``scale_tiny`` / ``scale_huge``: effective scale near 2**-20 (outputs collapse to the zero point)
  or above 1 (every output saturates to the clamp bounds);
* ``saturate``: inputs at the int8 extremes, output range narrower than the accumulator range;
* ``ties``: power-of-two scales so that the rescaled accumulator hits exact .5 often (rounding mode);
* ``odd_channels``: 1, 3, 5, 7, 17 channels (no SIMD-friendly multiples);
* ``pad_same`` / ``pad_valid``, ``stride2`` / ``stride3``, ``dilation2``, ``relu`` / ``relu6``...
* ops with a LUT or fixed range (LOGISTIC, SOFTMAX) also get ``all_codes``: every int8 code once.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..errors import GoldenError
from . import singleop as so

I8 = (-128, 127)
SPATIAL = ("zp_random", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "ties", "odd_channels",
           "pad_same", "pad_valid", "stride2", "stride3", "dilation2", "relu", "relu6", "relu_n1_to_1")
ELEMENTWISE = ("zp_random", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "ties", "odd_channels",
               "broadcast_row", "broadcast_scalar", "scale_ratio", "relu", "relu6")
POOL = ("zp_random", "zp_min", "zp_max", "saturate", "ties", "odd_channels", "pad_same", "pad_valid",
        "stride2", "stride3", "filter_1x1", "filter_full", "relu6")
SOFTMAX = ("zp_random", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "ties", "all_codes",
           "beta_small", "beta_large", "odd_channels", "single_class")
LOGISTIC = ("all_codes", "zp_min", "zp_max", "scale_tiny", "scale_huge", "saturate", "zp_random", "ties")


def _act(sc: str) -> str | None:
    return {"relu": "RELU", "relu6": "RELU6", "relu_n1_to_1": "RELU_N1_TO_1"}.get(sc)


def _data(rng, shape, sc: str, lo: int = -128, hi: int = 127) -> np.ndarray:
    if sc == "saturate":
        return rng.choice(np.array([lo, lo + 1, hi - 1, hi]), size=shape).astype(np.int8)
    return rng.integers(lo, hi, size=shape, endpoint=True).astype(np.int8)


def _zp(rng, sc: str) -> int:
    return {"zp_min": -128, "zp_max": 127}.get(sc, int(rng.integers(-128, 128)))


def _pow2(rng, lo: int, hi: int) -> float:
    return float(2.0 ** -int(rng.integers(lo, hi + 1)))


def _channels(rng, sc: str, default: tuple[int, ...] = (4, 8, 16)) -> int:
    return int(rng.choice((1, 3, 5, 7, 17) if sc == "odd_channels" else default))


def _geometry(rng, sc: str):
    pad = "VALID" if sc == "pad_valid" else ("SAME_UPPER" if sc == "pad_same" else str(rng.choice(["SAME_UPPER",
                                                                                                  "VALID"])))
    s = 2 if sc == "stride2" else 3 if sc == "stride3" else int(rng.choice([1, 1, 2]))
    d = 2 if sc == "dilation2" else 1
    k = (int(rng.choice([1, 2, 3, 5])), int(rng.choice([1, 3])))
    return pad, (s, s), (d, d), k


def _out_scale(rng, sc: str, acc_scale: float, typical: float) -> float:
    """Output scale so that acc_scale * |acc| / out_scale spans the int8 range ``typical`` for random data."""
    if sc == "scale_tiny":
        return float(acc_scale * 2.0 ** 20)
    if sc == "scale_huge":
        return float(acc_scale * 0.75)
    if sc == "ties":
        return float(acc_scale * 2.0 ** int(rng.integers(1, 6)))
    return float(acc_scale * typical * rng.uniform(0.5, 2.0) / 127.0)


def _conv_like(i: int, rng, sc: str, depthwise: bool):
    cin = _channels(rng, sc)
    mult = int(rng.choice([1, 1, 2])) if depthwise else 1
    cout = cin * mult if depthwise else _channels(rng, sc, (3, 8, 16))
    pad, strides, dil, k = _geometry(rng, sc)
    ext = ((k[0] - 1) * dil[0] + 1, (k[1] - 1) * dil[1] + 1)
    h, w = int(rng.integers(ext[0], ext[0] + 7)), int(rng.integers(ext[1], ext[1] + 7))
    ties = sc == "ties"
    sx = _pow2(rng, 4, 8) if ties else float(rng.uniform(0.005, 0.05))
    sw = np.array([_pow2(rng, 5, 8) if ties else rng.uniform(0.002, 0.02) for _ in range(cout)])
    zx = _zp(rng, sc)
    wshape = (1, k[0], k[1], cout) if depthwise else (cout, k[0], k[1], cin)
    wq = rng.integers(-127, 128, size=wshape).astype(np.int8)
    if sc == "saturate":
        wq = rng.choice(np.array([-127, 127], np.int8), size=wshape)
    bias = rng.integers(-4000, 4000, size=cout).astype(np.int32)
    n_terms = k[0] * k[1] * (1 if depthwise else cin)
    so_ = _out_scale(rng, sc, sx * float(sw.max()), 60.0 * np.sqrt(n_terms) * 60.0)
    zo = _zp(rng, sc)
    oh, ow = so.spatial_out((h, w), k, strides, dil, pad)
    x = so.qtensor("x", (1, h, w, cin), "int8", sx, zx)
    wt = so.qtensor("w", wshape, "int8", sw.astype(np.float32), 0, axis=3 if depthwise else 0, const=wq)
    bt = so.qtensor("bias", (cout,), "int32", (np.float32(sx) * sw.astype(np.float32)), 0, axis=0, const=bias)
    y = so.qtensor("y", (1, oh, ow, cout), "int8", so_, zo)
    act = _act(sc)
    if depthwise:
        attrs = so.depthwise_attrs(pad, strides, dil, act, k, cin, mult)
        op, src = "DepthwiseConv", "DEPTHWISE_CONV_2D"
    else:
        attrs = so.conv_attrs(pad, strides, dil, act, k)
        op, src = "Conv", "CONV_2D"
    feeds = {"x": _data(rng, x.shape, sc)}
    axes = {"scenario": sc, "cin": cin, "cout": cout, "kernel": list(k), "strides": list(strides),
            "dilations": list(dil), "padding": pad, "input_zero_point": zx, "output_zero_point": zo,
            "activation": act}
    return op, src, [x, wt, bt], [y], attrs, feeds, axes


def _conv(i, rng, sc):
    return _conv_like(i, rng, sc, False)


def _depthwise(i, rng, sc):
    return _conv_like(i, rng, sc, True)


def _fc(i, rng, sc):
    n_in = _channels(rng, sc, (8, 16, 32, 64))
    n_out = _channels(rng, sc, (4, 10, 16))
    batch = int(rng.choice([1, 2, 3]))
    ties = sc == "ties"
    sx = _pow2(rng, 4, 8) if ties else float(rng.uniform(0.005, 0.05))
    sw = _pow2(rng, 5, 8) if ties else float(rng.uniform(0.002, 0.02))
    zx, zo = _zp(rng, sc), _zp(rng, sc)
    wq = rng.integers(-127, 128, size=(n_out, n_in)).astype(np.int8)
    bias = rng.integers(-4000, 4000, size=n_out).astype(np.int32)
    so_ = _out_scale(rng, sc, sx * sw, 60.0 * np.sqrt(n_in) * 60.0)
    x = so.qtensor("x", (batch, n_in), "int8", sx, zx)
    wt = so.qtensor("w", (n_out, n_in), "int8", sw, 0, const=wq)
    bt = so.qtensor("bias", (n_out,), "int32", np.float32(sx) * np.float32(sw), 0, const=bias)
    y = so.qtensor("y", (batch, n_out), "int8", so_, zo)
    act = _act(sc)
    axes = {"scenario": sc, "batch": batch, "n_in": n_in, "n_out": n_out, "input_zero_point": zx,
            "output_zero_point": zo, "activation": act}
    return ("FullyConnected", "FULLY_CONNECTED", [x, wt, bt], [y], so.fc_attrs(act), {"x": _data(rng, x.shape, sc)},
            axes)


def _binary(op: str, src: str):
    def gen(i, rng, sc):
        c = _channels(rng, sc)
        shape = (1, int(rng.integers(1, 5)), int(rng.integers(1, 6)), c)
        shape_b = {"broadcast_row": (1, 1, 1, c), "broadcast_scalar": (1,)}.get(sc, shape)
        ties = sc == "ties"
        sa = _pow2(rng, 4, 8) if ties else float(rng.uniform(0.005, 0.1))
        sb = sa * 2.0 ** -10 if sc == "scale_ratio" else (_pow2(rng, 4, 8) if ties else float(rng.uniform(0.005, 0.1)))
        if op == "Add":
            typical = (sa + sb) * 128
        else:
            typical = sa * sb * 128 * 128
        so_ = {"scale_tiny": typical * 2.0 ** 12, "scale_huge": typical / 1000.0}.get(sc)
        if so_ is None:
            so_ = _pow2(rng, 1, 6) * (sa if op == "Add" else sa * sb) if ties else typical / 127 * rng.uniform(0.4, 1.5)
        za, zb, zo = _zp(rng, sc), _zp(rng, sc), _zp(rng, sc)
        a = so.qtensor("a", shape, "int8", sa, za)
        b = so.qtensor("b", shape_b, "int8", sb, zb)
        y = so.qtensor("y", shape, "int8", float(so_), zo)
        act = _act(sc)
        feeds = {"a": _data(rng, shape, sc), "b": _data(rng, shape_b, sc)}
        axes = {"scenario": sc, "shape_a": list(shape), "shape_b": list(shape_b), "zero_points": [za, zb, zo],
                "activation": act}
        return op, src, [a, b], [y], so.binary_attrs(op, act), feeds, axes
    return gen


def _avgpool(i, rng, sc):
    c = _channels(rng, sc)
    pad, strides, _dil, k = _geometry(rng, sc)
    h, w = int(rng.integers(3, 9)), int(rng.integers(3, 9))
    if sc == "filter_1x1":
        k = (1, 1)
    elif sc == "filter_full":
        k, pad = (h, w), "VALID"
    k = (min(k[0], h), min(k[1], w))
    s = float(rng.uniform(0.01, 0.1))
    z = _zp(rng, sc)
    oh, ow = so.spatial_out((h, w), k, strides, (1, 1), pad)
    x = so.qtensor("x", (1, h, w, c), "int8", s, z)
    y = so.qtensor("y", (1, oh, ow, c), "int8", s, z)  # TFLite int8 AVERAGE_POOL keeps the input params
    act = _act(sc)
    axes = {"scenario": sc, "channels": c, "filter": list(k), "strides": list(strides), "padding": pad,
            "zero_point": z, "activation": act}
    return ("AveragePool", "AVERAGE_POOL_2D", [x], [y], so.pool_attrs(pad, strides, k, act),
            {"x": _data(rng, x.shape, sc)}, axes)


def _all_codes(rng, rows: int = 1) -> np.ndarray:
    return np.stack([rng.permutation(np.arange(-128, 128)) for _ in range(rows)]).astype(np.int8)


def _in_scale(rng, sc: str) -> float:
    if sc == "scale_tiny":
        return float(rng.uniform(1e-4, 1e-3))
    if sc == "scale_huge":
        return float(rng.uniform(0.5, 2.0))
    if sc == "ties":
        return _pow2(rng, 2, 6)
    return float(rng.uniform(0.01, 0.15))


def _softmax(i, rng, sc):
    n = _channels(rng, sc, (4, 10, 16, 32))
    if sc == "single_class":
        n = 1
    rows = int(rng.integers(1, 4))
    if sc == "all_codes":
        feeds_x, n = _all_codes(rng, rows), 256
    else:
        feeds_x = _data(rng, (rows, n), sc)
    beta = {"beta_small": 0.25, "beta_large": 4.0}.get(sc, 1.0)
    s, z = _in_scale(rng, sc), _zp(rng, sc)
    x = so.qtensor("x", (rows, n), "int8", s, z)
    y = so.qtensor("y", (rows, n), "int8", 1.0 / 256, -128)  # TFLite's required int8 softmax output
    axes = {"scenario": sc, "rows": rows, "classes": n, "beta": beta, "input_scale": s, "input_zero_point": z}
    return "Softmax", "SOFTMAX", [x], [y], so.softmax_attrs(beta), {"x": feeds_x}, axes


def _logistic(i, rng, sc):
    s, z = _in_scale(rng, sc), _zp(rng, sc)
    xv = _all_codes(rng, 1).reshape(1, 256) if sc == "all_codes" else _data(rng, (1, 64), sc)
    x = so.qtensor("x", xv.shape, "int8", s, z)
    y = so.qtensor("y", xv.shape, "int8", 1.0 / 256, -128)  # TFLite's required int8 logistic output
    axes = {"scenario": sc, "input_scale": s, "input_zero_point": z, "size": int(xv.size)}
    return "Sigmoid", "LOGISTIC", [x], [y], {"op_version": 2}, {"x": xv}, axes


Generator = Callable[[int, Any, str], tuple]
GENERATORS: dict[str, tuple[Generator, tuple[str, ...]]] = {
    "CONV_2D": (_conv, SPATIAL), "DEPTHWISE_CONV_2D": (_depthwise, SPATIAL), "FULLY_CONNECTED": (_fc, ELEMENTWISE[:8]
                                                                                            + ("relu", "relu6")),
    "ADD": (_binary("Add", "ADD"), ELEMENTWISE), "SUB": (_binary("Sub", "SUB"), ELEMENTWISE),
    "MUL": (_binary("Mul", "MUL"), ELEMENTWISE), "AVERAGE_POOL_2D": (_avgpool, POOL),
    "SOFTMAX": (_softmax, SOFTMAX), "LOGISTIC": (_logistic, LOGISTIC),
}


def sweep_ops() -> list[str]:
    return sorted(GENERATORS)


def sweep_cases(op: str, scheme: Any, count: int, seed: int = 0, verify=None) -> list:
    """``count`` cases for TFLite builtin ``op`` (e.g. ``CONV_2D``) made under ``scheme``."""
    from .make import make_cases

    key = op.upper()
    if key not in GENERATORS:
        raise GoldenError(f"no sweep for op '{op}' (available: {', '.join(sweep_ops())})")
    if count < 1:
        raise GoldenError(f"--count must be at least 1, got {count}")
    gen, scenarios = GENERATORS[key]
    cases = []
    for i in range(count):
        sc = scenarios[i % len(scenarios)]
        rng = np.random.default_rng([seed, i])
        cop, src, ins, outs, attrs, feeds, axes = gen(i, rng, sc)
        g = so.graph_of(cop, src, sc, ins, outs, attrs)
        extra = {"sweep": {"op": key, "seed": seed, "index": i, "axes": axes}}
        cases += make_cases(g, scheme, feeds, generator="refinterp golden sweep", extra=extra, start_index=i)
    return cases
