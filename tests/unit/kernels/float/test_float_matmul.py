"""Float MatMul / Gemm against onnxruntime; FullyConnected / BatchMatMul against LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_close, onnx_reference, onnx_runtime, rng
from kernel_harness import run_float as run_kernel


@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                                   ((2, 3, 4), (4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((6, 3, 4), (6, 4, 2))])
def test_matmul(sa, sb):
    r = rng(1)
    a = r.standard_normal(sa).astype(np.float32)
    b = r.standard_normal(sb).astype(np.float32)
    assert_close(run_kernel("MatMul", [a, b])[0], onnx_runtime("MatMul", [a, b])[0])


def test_matmul_float64_float16():
    r = rng(2)
    a, b = r.standard_normal((3, 5)), r.standard_normal((5, 2))
    assert_close(run_kernel("MatMul", [a, b])[0], a @ b, rtol=1e-12, atol=1e-12)
    a16, b16 = a.astype(np.float16), b.astype(np.float16)
    assert_close(run_kernel("MatMul", [a16, b16])[0], onnx_runtime("MatMul", [a16, b16])[0], rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("cshape", [None, (), (5,), (1, 5), (3, 1), (3, 5)], ids=str)
def test_gemm(ta, tb, cshape):
    r = rng(3)
    a = r.standard_normal((4, 3) if ta else (3, 4)).astype(np.float32)
    b = r.standard_normal((5, 4) if tb else (4, 5)).astype(np.float32)
    ins = [a, b] + ([] if cshape is None else [r.standard_normal(cshape).astype(np.float32)])
    attrs = {"transA": ta, "transB": tb, "alpha": 0.7, "beta": 1.3}
    assert_close(run_kernel("Gemm", ins, attrs)[0], onnx_reference("Gemm", ins, attrs)[0])


def test_gemm_defaults():
    r = rng(4)
    a, b, c = (r.standard_normal(s).astype(np.float32) for s in [(2, 3), (3, 4), (4,)])
    assert_close(run_kernel("Gemm", [a, b, c])[0], onnx_runtime("Gemm", [a, b, c])[0])


def _litert_single(op, inputs, outputs, options, feeds):
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert
    from tests.tflite_builder import single_op

    model, ins, outs = single_op(op, inputs, outputs, options)
    return run_litert(model, dict(zip(ins, feeds)), resolver="opt", preserve_all=False)[outs[0]]


@pytest.mark.parametrize("xshape,keep", [((2, 6), False), ((3, 2, 6), False), ((3, 2, 6), True),
                                         ((1, 2, 3, 4), False)])
@pytest.mark.parametrize("bias", [True, False])
def test_fully_connected_vs_litert(xshape, keep, bias):
    r = rng(5)
    n_in = 6 if xshape[-1] == 6 else 12
    x = r.standard_normal(xshape).astype(np.float32)
    w = r.standard_normal((5, n_in)).astype(np.float32)
    b = r.standard_normal(5).astype(np.float32)
    oshape = list(xshape[:-1]) + [5] if keep else [x.size // n_in, 5]
    want = _litert_single("FULLY_CONNECTED", [("x", list(xshape), "float32"), ("w", w), ("b", b) if bias else None],
                          [("y", oshape, "float32")], {"keep_num_dims": keep}, [x])
    got = run_kernel("FullyConnected", [x, w, b if bias else None], {"keep_num_dims": keep})[0]
    assert_close(got, want)


@pytest.mark.parametrize("adj_x,adj_y", [(False, False), (True, False), (False, True), (True, True)])
@pytest.mark.parametrize("sa,sb", [((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (3, 4, 5)), ((3, 4), (2, 4, 5))])
def test_batch_matmul_vs_litert(adj_x, adj_y, sa, sb):
    r = rng(6)
    a = r.standard_normal(sa).astype(np.float32)
    b = r.standard_normal(sb).astype(np.float32)
    if adj_x:
        a = np.ascontiguousarray(np.swapaxes(a, -1, -2))
    if adj_y:
        b = np.ascontiguousarray(np.swapaxes(b, -1, -2))
    ref = np.matmul(np.swapaxes(a, -1, -2) if adj_x else a, np.swapaxes(b, -1, -2) if adj_y else b)
    want = _litert_single("BATCH_MATMUL", [("a", list(a.shape), "float32"), ("b", list(b.shape), "float32")],
                          [("y", list(ref.shape), "float32")], {"adj_x": adj_x, "adj_y": adj_y}, [a, b])
    got = run_kernel("BatchMatMul", [a, b], {"adj_x": adj_x, "adj_y": adj_y})[0]
    assert_close(got, want)
