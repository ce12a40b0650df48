"""Float Resize against onnx.reference (every mode/transform), onnxruntime and LiteRT (NHWC)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from kernel_harness import assert_close, onnx_reference, onnx_runtime, rng
from kernel_harness import run_float as run_kernel

CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
        "tf_crop_and_resize"]
NEAREST_MODES = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
SCALES = [(1.0, 1.0, 2.0, 3.0), (1.0, 1.0, 0.6, 0.8), (1.0, 1.0, 1.7, 0.5), (1.0, 1.0, 3.0, 1.0)]
SIZES = [(1, 2, 9, 4), (1, 2, 3, 11), (1, 2, 1, 5), (1, 2, 10, 6)]
ROI = np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], dtype=np.float32)


def _inputs(x, ctm, scales=None, sizes=None):
    roi = ROI if ctm == "tf_crop_and_resize" else None
    sc = None if scales is None else np.array(scales, dtype=np.float32)
    sz = None if sizes is None else np.array(sizes, dtype=np.int64)
    return [x, roi, sc, sz]


def _check(x, attrs, scales=None, sizes=None, rtol=1e-4, atol=1e-5):
    ins = _inputs(x, attrs.get("coordinate_transformation_mode", "half_pixel"), scales, sizes)
    want = onnx_reference("Resize", ins, attrs)[0]
    got = run_kernel("Resize", ins, attrs, const=(1, 2, 3))[0]
    assert_close(got, want, rtol=rtol, atol=atol)
    return got


X = rng(1).standard_normal((1, 2, 6, 5)).astype(np.float32)


@pytest.mark.parametrize("ctm,nm", list(itertools.product(CTMS, NEAREST_MODES)))
@pytest.mark.parametrize("which", range(4))
def test_nearest(ctm, nm, which):
    attrs = {"mode": "nearest", "coordinate_transformation_mode": ctm, "nearest_mode": nm,
             "extrapolation_value": -7.0}
    _check(X, attrs, scales=SCALES[which])
    _check(X, attrs, sizes=SIZES[which])


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("ctm", CTMS)
@pytest.mark.parametrize("which", range(4))
def test_linear_cubic(mode, ctm, which):
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "extrapolation_value": 0.5}
    _check(X, attrs, scales=SCALES[which])
    _check(X, attrs, sizes=SIZES[which])


@pytest.mark.parametrize("a", [-0.5, -0.75])
@pytest.mark.parametrize("exclude", [0, 1])
@pytest.mark.parametrize("ctm", ["half_pixel", "align_corners", "asymmetric"])
def test_cubic_coeff_exclude_outside(a, exclude, ctm):
    attrs = {"mode": "cubic", "cubic_coeff_a": a, "exclude_outside": exclude,
             "coordinate_transformation_mode": ctm}
    for sc in SCALES:
        _check(X, attrs, scales=sc)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("which", range(4))
@pytest.mark.parametrize("exclude", [0, 1])
def test_antialias(mode, which, exclude):
    x = rng(2).standard_normal((1, 2, 16, 13)).astype(np.float32)
    attrs = {"mode": mode, "antialias": 1, "exclude_outside": exclude}
    _check(x, attrs, scales=[(1, 1, 0.6, 0.8), (1, 1, 0.3, 0.45), (1, 1, 2.0, 0.5), (1, 1, 0.5, 1.5)][which])
    _check(x, attrs, sizes=[(1, 2, 5, 6), (1, 2, 3, 13), (1, 2, 7, 20), (1, 2, 16, 4)][which])


@pytest.mark.parametrize("policy", ["stretch", "not_larger", "not_smaller"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_axes_and_keep_aspect_ratio(policy, mode):
    attrs = {"mode": mode, "axes": [2, 3], "keep_aspect_ratio_policy": policy}
    _check(X, attrs, sizes=(9, 4))
    _check(X, {"mode": mode, "axes": [3, 2]}, scales=(1.5, 0.5))
    _check(X, {"mode": mode, "axes": [3]}, sizes=(7,))
    ins = [X, None, None, np.array([7], np.int64)]  # negative axes (onnx.reference cannot take them)
    np.testing.assert_array_equal(run_kernel("Resize", ins, {"mode": mode, "axes": [-1]})[0],
                                  run_kernel("Resize", ins, {"mode": mode, "axes": [3]})[0])


def test_tf_crop_and_resize_with_axes_roi():
    attrs = {"mode": "linear", "axes": [2, 3], "coordinate_transformation_mode": "tf_crop_and_resize",
             "extrapolation_value": 3.0}
    roi = np.array([-0.1, 0.25, 0.8, 1.3], dtype=np.float32)
    ins = [X, roi, None, np.array([5, 7], dtype=np.int64)]
    assert_close(run_kernel("Resize", ins, attrs)[0], onnx_reference("Resize", ins, attrs)[0])


def test_float64_and_3d():
    x = rng(3).standard_normal((1, 2, 3, 4, 5))
    # onnx.reference forms cubic coefficients in float32 (A is a float32 attribute): looser tolerance.
    for attrs, tol in [({"mode": "linear"}, 1e-10), ({"mode": "nearest"}, 0), ({"mode": "cubic"}, 1e-5)]:
        _check(x, attrs, scales=(1, 1, 2, 0.5, 1.4), rtol=tol, atol=tol)


@pytest.mark.parametrize("nm", NEAREST_MODES)
def test_tf_half_pixel_for_nn_vs_ort(nm):
    """tf_half_pixel_for_nn left the spec in opset 13; ORT still runs it under opset 11."""
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn", "nearest_mode": nm}
    for sizes in SIZES:
        ins = [X, np.zeros(0, np.float32), np.zeros(0, np.float32), np.array(sizes, np.int64)]
        want = onnx_runtime("Resize", ins, attrs, opset=11)[0]
        assert_close(run_kernel("Resize", ins, attrs)[0], want, rtol=0, atol=0)


# ---- LiteRT: RESIZE_NEAREST_NEIGHBOR / RESIZE_BILINEAR, NHWC --------------------------------------

def _tfl_attrs(mode, align, half):
    if mode == "nearest":
        ctm = "align_corners" if align else ("tf_half_pixel_for_nn" if half else "asymmetric")
        return {"mode": "nearest", "coordinate_transformation_mode": ctm,
                "nearest_mode": "round_prefer_ceil" if align else "floor", "layout": "NHWC"}
    ctm = "align_corners" if align else ("half_pixel" if half else "asymmetric")
    return {"mode": "linear", "coordinate_transformation_mode": ctm, "layout": "NHWC"}


TFL_SIZES = [(6, 5, 10, 8), (6, 5, 3, 2), (3, 3, 7, 5), (10, 6, 4, 9), (5, 7, 5, 7), (4, 4, 1, 1), (9, 9, 6, 6)]


@pytest.mark.parametrize("mode,tfl", [("nearest", "RESIZE_NEAREST_NEIGHBOR"), ("linear", "RESIZE_BILINEAR")])
@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("dims", TFL_SIZES, ids=str)
def test_resize_vs_litert(mode, tfl, align, half, dims):
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert
    from tests.tflite_builder import single_op

    ih, iw, oh, ow = dims
    x = rng(4).standard_normal((2, ih, iw, 3)).astype(np.float32)
    size = np.array([oh, ow], dtype=np.int32)
    model, ins, outs = single_op(tfl, [("x", list(x.shape), "float32"), ("size", size)],
                                 [("y", [2, oh, ow, 3], "float32")],
                                 {"align_corners": align, "half_pixel_centers": half})
    want = run_litert(model, {ins[0]: x}, resolver="opt", preserve_all=False)[outs[0]]
    got = run_kernel("Resize", [x, None, None, size.astype(np.int64)], _tfl_attrs(mode, align, half))[0]
    if mode == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        assert_close(got, want)
