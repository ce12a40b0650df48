"""Float pooling kernels against onnx.reference, onnxruntime and LiteRT."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_close, onnx_reference, onnx_runtime, rng
from kernel_harness import run_float as run_kernel

POOL_CASES = [
    ("basic", (1, 3, 6, 7), {"kernel_shape": [2, 2]}),
    ("strides-pads", (2, 2, 9, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("asym-pads", (1, 2, 7, 7), {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [0, 1, 2, 0]}),
    ("same-upper", (1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("same-lower", (1, 2, 7, 8), {"kernel_shape": [2, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
    ("valid", (1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "VALID"}),
    ("ceil", (1, 2, 8, 7), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("ceil-pads", (1, 2, 7, 7), {"kernel_shape": [3, 3], "strides": [3, 3], "pads": [1, 1, 1, 1],
                                 "ceil_mode": 1}),
    ("dilations", (1, 2, 9, 9), {"kernel_shape": [2, 2], "dilations": [2, 3], "pads": [1, 1, 1, 1]}),
    ("1d", (2, 3, 10), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
    ("3d", (1, 2, 5, 6, 4), {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 0, 1, 0, 1, 0]}),
]
IDS = [c[0] for c in POOL_CASES]


@pytest.mark.parametrize("cid,shape,attrs", POOL_CASES, ids=IDS)
def test_max_pool(cid, shape, attrs):
    x = rng(1).standard_normal(shape).astype(np.float32)
    want = onnx_runtime("MaxPool", [x], attrs)[0]
    assert_close(run_kernel("MaxPool", [x], attrs)[0], want, rtol=0, atol=0)


# storage_order=1 only on 2-D cases (ORT's column-major rule for 1-D/3-D is not checked here).
INDEX_CASES = [(c[0], c[1], c[2], so) for c in POOL_CASES if "dilations" not in c[2]
               for so in ((0, 1) if len(c[1]) == 4 else (0,))]


@pytest.mark.parametrize("cid,shape,attrs,storage_order", INDEX_CASES,
                         ids=[f"{c[0]}-so{c[3]}" for c in INDEX_CASES])
def test_max_pool_indices(cid, shape, attrs, storage_order):
    x = rng(2).standard_normal(shape).astype(np.float32)
    a = dict(attrs, storage_order=storage_order)
    want_y, want_i = onnx_runtime("MaxPool", [x], a, n_outputs=2, out_types=["float32", "int64"])
    got_y, got_i = run_kernel("MaxPool", [x], a, n_outputs=2)
    assert_close(got_y, want_y, rtol=0, atol=0)
    np.testing.assert_array_equal(got_i, want_i)


@pytest.mark.parametrize("cid,shape,attrs", POOL_CASES, ids=IDS)
@pytest.mark.parametrize("cip", [0, 1], ids=["exclude-pad", "include-pad"])
def test_average_pool(cid, shape, attrs, cip):
    x = rng(3).standard_normal(shape).astype(np.float32)
    a = dict(attrs, count_include_pad=cip)
    want = onnx_reference("AveragePool", [x], a)[0]
    assert_close(run_kernel("AveragePool", [x], a)[0], want)
    if "dilations" not in attrs:
        assert_close(run_kernel("AveragePool", [x], a)[0], onnx_runtime("AveragePool", [x], a)[0])


@pytest.mark.parametrize("cid,shape,attrs", POOL_CASES[:6], ids=IDS[:6])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pool(cid, shape, attrs, p):
    x = rng(4).standard_normal(shape).astype(np.float32)
    a = dict(attrs, p=p)
    assert_close(run_kernel("LpPool", [x], a)[0], onnx_reference("LpPool", [x], a)[0])


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (1, 4, 7), (1, 2, 3, 4, 5)])
def test_global_pools(op, shape):
    x = rng(5).standard_normal(shape).astype(np.float32)
    want = onnx_runtime(op, [x], {})[0]
    assert_close(run_kernel(op, [x], {})[0], want)
    nhwc = run_kernel(op, [np.moveaxis(x, 1, -1)], {"layout": "NHWC"})[0]
    assert_close(np.moveaxis(nhwc, -1, 1), want)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("cid,shape,attrs", POOL_CASES[:8], ids=IDS[:8])
def test_nhwc_equals_nchw(op, cid, shape, attrs):
    x = rng(6).standard_normal(shape).astype(np.float32)
    want = run_kernel(op, [x], attrs)[0]
    got = run_kernel(op, [x.transpose(0, 2, 3, 1)], dict(attrs, layout="NHWC"))[0]
    np.testing.assert_array_equal(got.transpose(0, 3, 1, 2), want)


@pytest.mark.parametrize("op,tfl", [("MaxPool", "MAX_POOL_2D"), ("AveragePool", "AVERAGE_POOL_2D"),
                                    ("LpPool", "L2_POOL_2D")])
@pytest.mark.parametrize("padding,stride,k,hw", [("SAME", 2, 3, (7, 8)), ("SAME", 1, 3, (5, 5)),
                                                 ("VALID", 2, 2, (7, 8)), ("SAME", 3, 2, (8, 7))])
def test_pool_vs_litert(op, tfl, padding, stride, k, hw):
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert
    from tests.tflite_builder import single_op

    x = rng(7).standard_normal((1,) + hw + (3,)).astype(np.float32)
    oh, ow = [(-(-s // stride)) if padding == "SAME" else (s - k) // stride + 1 for s in hw]
    model, ins, outs = single_op(tfl, [("x", list(x.shape), "float32")], [("y", [1, oh, ow, 3], "float32")],
                                 dict(padding=padding, stride_h=stride, stride_w=stride, filter_h=k, filter_w=k))
    want = run_litert(model, {ins[0]: x}, resolver="opt", preserve_all=False)[outs[0]]
    got = run_kernel(op, [x], {"layout": "NHWC", "kernel_shape": [k, k], "strides": [stride, stride],
                               "auto_pad": "SAME_UPPER" if padding == "SAME" else "VALID",
                               "count_include_pad": 0, "p": 2, "mean": 1})[0]
    assert_close(got, want)


def test_float64_average_pool_keeps_dtype():
    x = rng(8).standard_normal((1, 2, 5, 5))
    a = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    assert_close(run_kernel("AveragePool", [x], a)[0], onnx_reference("AveragePool", [x], a)[0],
                 rtol=1e-12, atol=1e-12)


# ---- randomized geometry ---------------------------------------------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@st.composite
def _pool_geometry(draw):
    nsp = draw(st.integers(1, 2))
    k = [draw(st.integers(1, 3)) for _ in range(nsp)]
    d = [draw(st.integers(1, 2)) for _ in range(nsp)]
    s = [draw(st.integers(1, 3)) for _ in range(nsp)]
    size = [draw(st.integers((kk - 1) * dd + 1, 9)) for kk, dd in zip(k, d)]
    attrs = {"kernel_shape": k, "strides": s, "dilations": d, "ceil_mode": draw(st.integers(0, 1))}
    auto = draw(st.sampled_from(["NOTSET", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if auto == "NOTSET":
        attrs["pads"] = [draw(st.integers(0, kk - 1)) for kk in k + k]  # pads < kernel (ONNX rule)
    else:
        attrs["auto_pad"] = auto
        attrs["dilations"] = [1] * nsp
        attrs["ceil_mode"] = 0  # onnx.reference rejects ceil_mode with auto_pad
    return (1, 2) + tuple(size), attrs


@settings(max_examples=40, deadline=None)
@given(_pool_geometry(), st.integers(0, 1), st.integers(0, 2**31 - 1))
def test_pools_random_geometry(geo, cip, seed):
    shape, attrs = geo
    x = rng(seed).standard_normal(shape).astype(np.float32)
    # A negative SAME total padding (kernel < stride) is clamped at 0 (TFLite, and ORT's Conv); ORT's
    # MaxPool refuses it and onnx.reference crops the input, so the oracle gets the explicit pads.
    want_attrs = attrs
    if attrs.get("auto_pad", "").startswith("SAME"):
        totals = [max((-(-n // s) - 1) * s + k - n, 0)
                  for n, s, k in zip(shape[2:], attrs["strides"], attrs["kernel_shape"])]
        begin = [t // 2 if attrs["auto_pad"] == "SAME_UPPER" else t - t // 2 for t in totals]
        want_attrs = {k: v for k, v in attrs.items() if k != "auto_pad"}
        want_attrs["pads"] = begin + [t - b for t, b in zip(totals, begin)]
    assert_close(run_kernel("MaxPool", [x], attrs)[0], onnx_runtime("MaxPool", [x], want_attrs)[0],
                 rtol=0, atol=0)
    a = dict(attrs, count_include_pad=cip)
    # ORT here: onnx.reference 1.23 mis-places dilated windows when ceil_mode=1 (checked by hand).
    assert_close(run_kernel("AveragePool", [x], a)[0],
                 onnx_runtime("AveragePool", [x], dict(want_attrs, count_include_pad=cip))[0])
