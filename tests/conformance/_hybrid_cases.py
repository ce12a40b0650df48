"""One-op dynamic-range ("hybrid") TFLite models: float32 activations, constant int8 weights.

Input distributions (``_x``) exercise the run-time input quantization: Gaussian, one outlier,
all-positive / all-negative rows (asymmetric zero point at -128 / 127), an all-zero batch row
(scale 1), and exact ties (range 127, so the quantizer multiplies by 1 and half-integers reach the
rounding: the 8-wide vector blocks round ``trunc(p +- 0.5)``, the tail ``std::round``;
0.49999997 differs between the two).
"""
from __future__ import annotations

import numpy as np

from tests.conformance._int_cases import Case, rand_q
from tests.tflite_builder import TFLiteBuilder

DISTS = ("normal", "outlier", "positive", "negative", "zero_row", "ties", "ties_asym")


def _x(rng, shape, dist: str, per_row: bool) -> np.ndarray:
    """Quantized rows: the last axis (``per_row``: FC, BATCH_MATMUL) or whole images (conv)."""
    x = rng.standard_normal(shape).astype(np.float32) * np.float32(rng.uniform(0.05, 4.0))
    if dist == "outlier":
        x.flat[int(rng.integers(x.size))] = np.float32(50.0)
    elif dist == "positive":
        x = np.abs(x) + np.float32(0.25)
    elif dist == "negative":
        x = -np.abs(x) - np.float32(0.25)
    elif dist in ("ties", "ties_asym"):
        x = rng.integers(-60, 61, shape).astype(np.float32) + np.float32(0.5)
        x.flat[::7] = np.float32(0.49999997)
        x.flat[3::7] = np.float32(-0.49999997)
    rows = x.reshape(-1, shape[-1]) if per_row else x.reshape(shape[0], -1)
    if dist == "zero_row":
        rows[0] = 0
    elif dist in ("ties", "ties_asym"):
        # symmetric: range 127 -> scale 1; asymmetric: [-128, 127] -> scale 1, zero point 0
        rows[:, -1] = np.float32(127.0)
        rows[:, 0] = np.float32(-128.0 if dist == "ties_asym" else -127.0)
    return x.astype(np.float32)


def _w(rng, shape, n_out: int, axis: int, per_channel: bool):
    w = rand_q(rng, shape, "int8", -127, 127)
    if per_channel:
        sw = (0.01 * rng.uniform(0.2, 2.0, n_out)).astype(np.float32)
        return w, dict(scale=[float(s) for s in sw], zero_point=[0] * n_out, axis=axis)
    return w, dict(scale=float(np.float32(rng.uniform(0.002, 0.02))), zero_point=0)


def fc_case(rng, i, *, k=13, o=7, batch=3, per_channel=False, asym=False, bias=True, act="NONE",
            dist="normal", keep_num_dims=False) -> Case:
    b = TFLiteBuilder()
    xshape = (batch, 2, k) if keep_num_dims else (batch, k)
    x = b.tensor("x", xshape, "float32")
    w, wq = _w(rng, (o, k), o, 0, per_channel)
    ins = [x, b.const("w", w, **wq)]
    if bias:
        ins.append(b.const("bias", (rng.standard_normal(o) * 0.5).astype(np.float32)))
    y = b.tensor("y", xshape[:-1] + (o,) if keep_num_dims else (batch, o), "float32")
    b.op("FULLY_CONNECTED", ins, [y], options=dict(fused_activation=act, asymmetric_quantize_inputs=asym,
                                                   keep_num_dims=keep_num_dims), version=9)
    xv = _x(rng, xshape, dist, True)
    return Case(f"fc{i}-k{k}o{o}b{batch}-{'pc' if per_channel else 'pt'}-{'asym' if asym else 'sym'}-{act}-{dist}",
                "FULLY_CONNECTED", b.build([x], [y]), {"x": xv})


def conv_case(rng, i, *, cin=3, cout=8, k=(3, 3), hw=(7, 6), batch=2, stride=(1, 1), dil=(1, 1), pad="SAME",
              act="NONE", per_channel=True, dist="normal", groups=1) -> Case:
    b = TFLiteBuilder()
    x = b.tensor("x", (batch,) + hw + (cin,), "float32")
    w, wq = _w(rng, (cout, k[0], k[1], cin // groups), cout, 0, per_channel)
    bt = b.const("bias", (rng.standard_normal(cout) * 0.5).astype(np.float32))
    ext = [(k[j] - 1) * dil[j] + 1 for j in range(2)]
    oh = [-(-hw[j] // stride[j]) if pad == "SAME" else (hw[j] - ext[j] + stride[j]) // stride[j] for j in range(2)]
    y = b.tensor("y", (batch, oh[0], oh[1], cout), "float32")
    b.op("CONV_2D", [x, b.const("w", w, **wq), bt], [y],
         options=dict(padding=pad, stride_h=stride[0], stride_w=stride[1], dilation_h_factor=dil[0],
                      dilation_w_factor=dil[1], fused_activation=act), version=2)
    return Case(f"conv{i}-c{cin}->{cout}-g{groups}-k{k[0]}x{k[1]}-s{stride[0]}-d{dil[0]}-{pad}-{act}-"
                f"{'pc' if per_channel else 'pt'}-{dist}", "CONV_2D", b.build([x], [y]),
                {"x": _x(rng, (batch,) + hw + (cin,), dist, False)})


def dw_case(rng, i, *, cin=8, mult=1, k=(3, 3), hw=(6, 7), batch=2, stride=(1, 1), dil=(1, 1), pad="SAME",
            act="NONE", dist="normal") -> Case:
    b = TFLiteBuilder()
    cout = cin * mult
    x = b.tensor("x", (batch,) + hw + (cin,), "float32")
    w, wq = _w(rng, (1, k[0], k[1], cout), cout, 3, True)
    bt = b.const("bias", (rng.standard_normal(cout) * 0.5).astype(np.float32))
    ext = [(k[j] - 1) * dil[j] + 1 for j in range(2)]
    oh = [-(-hw[j] // stride[j]) if pad == "SAME" else (hw[j] - ext[j] + stride[j]) // stride[j] for j in range(2)]
    y = b.tensor("y", (batch, oh[0], oh[1], cout), "float32")
    b.op("DEPTHWISE_CONV_2D", [x, b.const("w", w, **wq), bt], [y],
         options=dict(padding=pad, stride_h=stride[0], stride_w=stride[1], dilation_h_factor=dil[0],
                      dilation_w_factor=dil[1], depth_multiplier=mult, fused_activation=act), version=2)
    return Case(f"dw{i}-c{cin}x{mult}-k{k[0]}-s{stride[0]}-d{dil[0]}-{pad}-{act}-{dist}", "DEPTHWISE_CONV_2D",
                b.build([x], [y]), {"x": _x(rng, (batch,) + hw + (cin,), dist, False)})


def bmm_case(rng, i, *, lead=(2,), m=3, k=13, n=5, adj_x=False, adj_y=False, asym=False, per_channel=False,
             dist="normal", rhs_lead=()) -> Case:
    b = TFLiteBuilder()
    ashape = lead + ((k, m) if adj_x else (m, k))
    a = b.tensor("a", ashape, "float32")
    wshape = tuple(rhs_lead) + ((n, k) if adj_y else (k, n))
    w, wq = _w(rng, wshape, n, len(rhs_lead) + (0 if adj_y else 1), per_channel)
    y = b.tensor("y", lead + (m, n), "float32")
    av = _x(rng, lead + (m, k), dist, True)  # rows over the contraction axis
    b.op("BATCH_MATMUL", [a, b.const("w", w, **wq)], [y],
         options=dict(adj_x=adj_x, adj_y=adj_y, asymmetric_quantize_inputs=asym), version=1)
    return Case(f"bmm{i}-{lead}x{m}x{k}x{n}-r{len(rhs_lead) + 2}-ax{int(adj_x)}-ay{int(adj_y)}-"
                f"{'asym' if asym else 'sym'}-"
                f"{'pc' if per_channel else 'pt'}-{dist}", "BATCH_MATMUL", b.build([a], [y]),
                {"a": np.ascontiguousarray(np.swapaxes(av, -1, -2)) if adj_x else av})
