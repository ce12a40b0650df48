"""Float normalization kernels against onnx.reference / onnxruntime and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_close, onnx_reference, onnx_runtime, rng
from kernel_harness import run_float as run_kernel


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (2, 3), (1, 4, 6), (1, 2, 3, 2, 2)])
@pytest.mark.parametrize("eps", [1e-5, 1e-2])
def test_batch_norm_inference(shape, eps):
    r = rng(1)
    c = shape[1]
    x = r.standard_normal(shape).astype(np.float32)
    s, b, m = (r.standard_normal(c).astype(np.float32) for _ in range(3))
    v = r.uniform(0.5, 2, c).astype(np.float32)
    want = onnx_runtime("BatchNormalization", [x, s, b, m, v], {"epsilon": eps})[0]
    assert_close(run_kernel("BatchNormalization", [x, s, b, m, v], {"epsilon": eps})[0], want)
    if len(shape) == 4:
        got = run_kernel("BatchNormalization", [x.transpose(0, 2, 3, 1), s, b, m, v],
                         {"epsilon": eps, "layout": "NHWC"})[0]
        assert_close(got.transpose(0, 3, 1, 2), want)


def test_batch_norm_training_mode():
    r = rng(2)
    x = r.standard_normal((3, 4, 2, 5)).astype(np.float32)
    s, b, m = (r.standard_normal(4).astype(np.float32) for _ in range(3))
    v = r.uniform(0.5, 2, 4).astype(np.float32)
    attrs = {"training_mode": 1, "momentum": 0.8}
    want = onnx_reference("BatchNormalization", [x, s, b, m, v], attrs, n_outputs=3)
    got = run_kernel("BatchNormalization", [x, s, b, m, v], attrs, n_outputs=3)
    for g, w in zip(got, want):
        assert_close(g, w)


@pytest.mark.parametrize("axis", [-1, -2, 1, 0])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm(axis, with_bias):
    r = rng(3)
    x = r.standard_normal((2, 3, 5)).astype(np.float32)
    nshape = x.shape[axis % 3:]
    s = r.standard_normal(nshape).astype(np.float32)
    ins = [x, s] + ([r.standard_normal(nshape).astype(np.float32)] if with_bias else [])
    attrs = {"axis": axis, "epsilon": 1e-3}
    want = onnx_reference("LayerNormalization", ins, attrs, n_outputs=3)
    got = run_kernel("LayerNormalization", ins, attrs, n_outputs=3)
    for g, w in zip(got, want):
        assert_close(g, w)
    assert_close(run_kernel("LayerNormalization", ins, attrs)[0], onnx_runtime("LayerNormalization", ins, attrs)[0])


@pytest.mark.parametrize("shape", [(2, 3, 4, 5), (1, 2, 7), (1, 2, 3, 2, 4)])
def test_instance_norm(shape):
    r = rng(4)
    x = r.standard_normal(shape).astype(np.float32) * 3 + 1
    s, b = (r.standard_normal(shape[1]).astype(np.float32) for _ in range(2))
    attrs = {"epsilon": 1e-4}
    want = onnx_runtime("InstanceNormalization", [x, s, b], attrs)[0]
    assert_close(run_kernel("InstanceNormalization", [x, s, b], attrs)[0], want)
    got = run_kernel("InstanceNormalization", [np.moveaxis(x, 1, -1), s, b], dict(attrs, layout="NHWC"))[0]
    assert_close(np.moveaxis(got, -1, 1), want)


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_lp_normalization(p, axis):
    x = rng(5).standard_normal((3, 4, 5)).astype(np.float32)
    x[0, 0, :] = 0  # a zero vector along axis -1
    attrs = {"p": p, "axis": axis}
    assert_close(run_kernel("LpNormalization", [x], attrs)[0], onnx_runtime("LpNormalization", [x], attrs)[0])


def _lrn_formula(x, size, alpha, beta, bias):
    y = np.empty_like(x)
    c_n = x.shape[1]
    for c in range(c_n):
        lo, hi = max(0, c - (size - 1) // 2), min(c_n - 1, c + int(np.ceil((size - 1) / 2)))
        sq = (x[:, lo:hi + 1].astype(np.float64) ** 2).sum(axis=1)
        y[:, c] = x[:, c] / (bias + alpha / size * sq) ** beta
    return y


@pytest.mark.parametrize("size", [1, 2, 3, 4, 5])
def test_lrn(size):
    x = rng(6).standard_normal((2, 7, 3, 4)).astype(np.float32)
    attrs = {"size": size, "alpha": 0.02, "beta": 0.6, "bias": 1.5}
    # onnx.reference 1.23's LRN loops over the batch axis instead of channels, and ORT only takes
    # odd sizes: ORT is the oracle for odd sizes, the spec's formula written as a loop for even ones.
    want = onnx_runtime("LRN", [x], attrs)[0] if size % 2 else _lrn_formula(x, **attrs)
    assert_close(run_kernel("LRN", [x], attrs)[0], want)
    got = run_kernel("LRN", [x.transpose(0, 2, 3, 1)], dict(attrs, layout="NHWC"))[0]
    assert_close(got.transpose(0, 3, 1, 2), want)


def _litert(op, x, options):
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert
    from tests.tflite_builder import single_op

    model, ins, outs = single_op(op, [("x", list(x.shape), "float32")], [("y", list(x.shape), "float32")], options)
    return run_litert(model, {ins[0]: x}, resolver="opt", preserve_all=False)[outs[0]]


@pytest.mark.parametrize("scale", [1.0, 1e-4, 1e-8])
def test_l2_normalization_vs_litert(scale):
    x = (rng(7).standard_normal((2, 3, 6)) * scale).astype(np.float32)
    x[0, 0] = 0.0  # zero vector: the epsilon floor decides
    want = _litert("L2_NORMALIZATION", x, {})
    assert_close(run_kernel("L2Normalization", [x], {"axis": -1})[0], want)


@pytest.mark.parametrize("radius", [0, 1, 2])
def test_lrn_vs_litert(radius):
    x = rng(8).standard_normal((1, 3, 4, 6)).astype(np.float32)
    alpha, beta, bias = 0.3, 0.75, 2.0
    want = _litert("LOCAL_RESPONSE_NORMALIZATION", x, {"radius": radius, "alpha": alpha, "beta": beta,
                                                       "bias": bias})
    size = 2 * radius + 1  # TFLite alpha multiplies the raw sum; ONNX divides alpha by size
    got = run_kernel("LRN", [x], {"size": size, "alpha": alpha * size, "beta": beta, "bias": bias,
                                  "layout": "NHWC"})[0]
    assert_close(got, want)
