"""Shape / data-movement kernels against onnx.reference, under both the float and int variants."""
from __future__ import annotations

import numpy as np
import pytest

from kernel_harness import assert_same, onnx_ref, ort_ref, run_kernel
from refinterp.ir import QuantParams

RNG = np.random.default_rng(5)
I64 = np.int64


def _x(shape, dtype=np.float32):
    return RNG.uniform(-5, 5, shape).astype(dtype) if np.dtype(dtype).kind == "f" else \
        RNG.integers(-100, 100, shape).astype(dtype)


def check(op, inputs, attrs=None, *, n_out=1, variants=("float", "int"), opset=None, const=True):
    want = onnx_ref(op, inputs, attrs, n_out=n_out, opset=opset)
    for v in variants:
        for c in ((True, False) if const is True and len(inputs) > 1 else (const,)):
            got = run_kernel(op, inputs, attrs, n_out=n_out, variant=v, const=c)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert_same(g, w)


DTYPES = [np.float32, np.int8, np.int64]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(dtype, axis):
    xs = [_x((2, 3, 4), dtype), _x((2, 3, 4), dtype), _x((2, 3, 4), dtype)]
    check("Concat", xs, {"axis": axis})


@pytest.mark.parametrize("shape,allowzero", [([4, -1], 0), ([0, 3, -1], 0), ([2, 0, 12], 1), ([24], 0),
                                             ([-1, 2, 2], 0), ([2, 0, -1], 0)])
def test_reshape(shape, allowzero):
    x = _x((2, 3, 4)) if not (allowzero and 0 in shape) else _x((2, 0, 3))
    check("Reshape", [x, np.array(shape, I64)], {"allowzero": allowzero})


@pytest.mark.parametrize("perm", [None, [0, 2, 1, 3], [3, 2, 1, 0], [1, 0, 3, 2]])
@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose(perm, dtype):
    check("Transpose", [_x((2, 3, 4, 5), dtype)], {} if perm is None else {"perm": perm})


@pytest.mark.parametrize("axis", [0, 1, 2, 3, -1, -3])
def test_flatten(axis):
    check("Flatten", [_x((2, 3, 4))], {"axis": axis})


@pytest.mark.parametrize("axes", [None, [0], [2, -1], [-4]])
def test_squeeze(axes):
    x = _x((1, 3, 1, 1))
    check("Squeeze", [x] if axes is None else [x, np.array(axes, I64)])


@pytest.mark.parametrize("axes", [[0], [-1], [0, 4], [1, 3], [-1, -2]])
def test_unsqueeze(axes):
    check("Unsqueeze", [_x((2, 3, 4)), np.array(axes, I64)])


@pytest.mark.parametrize("axis", [0, 1, 3, -1, -4])
def test_expand_dims_matches_unsqueeze(axis):
    x = _x((2, 3, 4))
    # TFLite EXPAND_DIMS: a negative axis counts from the end of the output (rank + 1).
    want = onnx_ref("Unsqueeze", [x, np.array([axis], I64)])[0]
    for v in ("float", "int"):
        assert_same(run_kernel("ExpandDims", [x, np.array(axis, np.int32)], variant=v)[0], want)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 1, 0, 2], [1, 0, 0, 0, 2, 1], [0, -1, 1, 0, 1, -1]])
def test_pad(mode, pads):
    x = _x((2, 4, 5))
    if mode != "constant" and min(pads) < 0:
        pads = [abs(p) for p in pads]
    if min(pads) < 0:  # onnx.reference cannot crop; ONNX Runtime can
        want = ort_ref("Pad", [x, np.array(pads, I64)], {"mode": mode})[0]
        for v in ("float", "int"):
            assert_same(run_kernel("Pad", [x, np.array(pads, I64)], {"mode": mode}, variant=v)[0], want)
        return
    check("Pad", [x, np.array(pads, I64)], {"mode": mode})
    if mode == "constant":
        check("Pad", [x, np.array(pads, I64), np.array(1.5, np.float32)], {"mode": mode}, variants=("float",))


def test_pad_axes_input():
    x = _x((2, 4, 5))
    check("Pad", [x, np.array([1, 2, 0, 3], I64), None, np.array([-1, 0], I64)], {"mode": "constant"},
          const=[1, 3])


def test_pad_int_uses_output_zero_point():
    x = _x((1, 3, 3), np.int8)
    pads = np.array([0, 1, 1, 0, 1, 1], I64)
    q = QuantParams(np.float32(0.1), np.int64(-7))
    got = run_kernel("Pad", [x, pads], variant="int", out_quant=q, out_dtype="int8")[0]
    want = onnx_ref("Pad", [x, pads, np.array(-7, np.int8)])[0]
    assert_same(got, want)
    # PADV2: an explicit value input wins over the zero point.
    got = run_kernel("Pad", [x, pads, np.array(5, np.int8)], variant="int", out_quant=q, out_dtype="int8")[0]
    assert_same(got, onnx_ref("Pad", [x, pads, np.array(5, np.int8)])[0])


def test_pad_tflite_paddings_matrix():
    x = _x((2, 3))
    got = run_kernel("Pad", [x, np.array([[1, 0], [2, 1]], np.int32)])[0]
    assert_same(got, onnx_ref("Pad", [x, np.array([1, 2, 0, 1], I64)])[0])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("dtype", [np.float32, np.int8])
def test_depth_to_space_nchw(mode, dtype):
    check("DepthToSpace", [_x((2, 8, 3, 4), dtype)], {"blocksize": 2, "mode": mode})


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_nhwc_is_nchw_transposed(mode):
    x = _x((2, 18, 2, 3))
    want = onnx_ref("DepthToSpace", [x], {"blocksize": 3, "mode": mode})[0].transpose(0, 2, 3, 1)
    got = run_kernel("DepthToSpace", [np.ascontiguousarray(x.transpose(0, 2, 3, 1))],
                     {"blocksize": 3, "mode": mode, "layout": "NHWC"})[0]
    assert_same(got, want)


def test_space_to_depth_both_layouts():
    x = _x((2, 3, 4, 6))
    want = onnx_ref("SpaceToDepth", [x], {"blocksize": 2})[0]
    for v in ("float", "int"):
        assert_same(run_kernel("SpaceToDepth", [x], {"blocksize": 2}, variant=v)[0], want)
        got = run_kernel("SpaceToDepth", [np.ascontiguousarray(x.transpose(0, 2, 3, 1))],
                         {"blocksize": 2, "layout": "NHWC"}, variant=v)[0]
        assert_same(got, want.transpose(0, 2, 3, 1))


SLICES = [
    ([1], [3], None, None),
    ([0, 1], [2, -1], [0, 2], None),
    ([-1], [-1000], [1], [-1]),
    ([10], [-10], [2], [-2]),
    ([0, 0, 0], [9, 9, 9], None, [2, 1, 3]),
    ([2**62], [2**63 - 1], [0], [1]),
    ([-2**63], [2**63 - 1], [-1], [1]),
    ([3], [0], [1], [-1]),
    ([1, 1], [4, 2], [2, 1], [1, -1]),
]


@pytest.mark.parametrize("starts,ends,axes,steps", SLICES, ids=[str(i) for i in range(len(SLICES))])
def test_slice(starts, ends, axes, steps):
    x = _x((3, 4, 5))
    ins = [x, np.array(starts, I64), np.array(ends, I64),
           None if axes is None else np.array(axes, I64), None if steps is None else np.array(steps, I64)]
    while ins[-1] is None:
        ins.pop()
    check("Slice", ins, const=[i for i in range(1, len(ins)) if ins[i] is not None])
    check("Slice", ins, const=False)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("indices", [[0, 2, -1], [[1, 0], [-2, 1]], 1])
def test_gather(axis, indices):
    x = _x((3, 4, 5), np.int8)
    check("Gather", [x, np.array(indices, I64)], {"axis": axis})
    check("Gather", [x, np.array(indices, np.int32)], {"axis": axis})


@pytest.mark.parametrize("split,n", [([2, 3, 1], 3), (None, 3), (None, 2), ([6], 1)])
def test_split_sizes(split, n):
    x = _x((6, 4))
    ins = [x] if split is None else [x, np.array(split, I64)]
    check("Split", ins, {"axis": 0}, n_out=n)


@pytest.mark.parametrize("n", [2, 3, 4])
def test_split_num_outputs_uneven(n):
    x = _x((2, 7))
    check("Split", [x], {"axis": 1, "num_outputs": n}, n_out=n)


def test_split_tflite_split_v_infers_minus_one():
    x = _x((2, 9))
    got = run_kernel("Split", [x, np.array([2, -1, 3], np.int32)], {"axis": 1}, n_out=3)
    want = onnx_ref("Split", [x, np.array([2, 4, 3], I64)], {"axis": 1}, n_out=3)
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_pack_unpack_match_concat_of_unsqueezed(axis):
    xs = [_x((2, 3), np.int8) for _ in range(4)]
    parts = [onnx_ref("Unsqueeze", [x, np.array([axis], I64)])[0] for x in xs]
    want = onnx_ref("Concat", parts, {"axis": axis})[0]
    for v in ("float", "int"):
        packed = run_kernel("Pack", xs, {"axis": axis}, variant=v, const=False)[0]
        assert_same(packed, want)
        back = run_kernel("Unpack", [packed], {"axis": axis, "num": 4}, variant=v, n_out=4)
        for b, x in zip(back, xs):
            assert_same(b, x)


@pytest.mark.parametrize("dtype", DTYPES + [np.bool_])
def test_identity(dtype):
    check("Identity", [_x((2, 3), np.int8).astype(dtype)])


@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-2, None), (0, -1), (1, 2), (-10, 10)])
def test_shape(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    check("Shape", [_x((2, 3, 4, 5))], attrs)


def test_size():
    check("Size", [_x((2, 3, 4))])
    check("Size", [_x((0, 3))])


@pytest.mark.parametrize("shape", [[2, 3, 4], [3, 1], [1, 1, 1, 1], [4, 1, 1]])
def test_expand(shape):
    check("Expand", [_x((3, 1), np.int8), np.array(shape, I64)])


@pytest.mark.parametrize("reps", [[1, 1], [2, 3], [1, 4], [3, 1]])
def test_tile(reps):
    check("Tile", [_x((2, 3), np.int8), np.array(reps, I64)])


CASTS = [(np.float32, 7), (np.float32, 6), (np.float32, 3), (np.float32, 2), (np.float32, 10), (np.float32, 11),
         (np.float32, 9), (np.int32, 1), (np.int64, 6), (np.int8, 2), (np.bool_, 1), (np.float64, 1),
         (np.float16, 1), (np.uint8, 3), (np.int32, 9)]


@pytest.mark.parametrize("src,to", CASTS, ids=[f"{np.dtype(s).name}-to{t}" for s, t in CASTS])
def test_cast(src, to):
    x = RNG.uniform(-100, 100, (3, 7))
    if np.dtype(src).kind == "f":
        x = np.concatenate([x.ravel(), [0.5, -0.5, 1.5, -1.7, 2.9, -2.9, 0.0]]).reshape(4, 7)
    if to in (2,) and np.dtype(src).kind == "f":
        x = np.abs(x)  # float -> uint8 of negatives is undefined behaviour
    if to in (2, 3) and np.dtype(src).kind == "f":
        x = np.clip(x, -120, 120)
    check("Cast", [np.asarray(x).astype(src)], {"to": to}, variants=("float",))


# -- TFLite semantics against LiteRT (optimized resolver, in process) ---------------------------

def _litert_single(op, x, consts, options, out_shape, dtype="float32"):
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert
    from tests.tflite_builder import single_op

    ins = [("x", list(x.shape), dtype)] + [(f"c{i}", c) for i, c in enumerate(consts)]
    model, names, outs = single_op(op, ins, [("y", list(out_shape), dtype)], options=options)
    return run_litert(model, {names[0]: x}, preserve_all=False)[outs[0]]


# (begin, end, strides, begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask, offset)
STRIDED = [
    ([1, 0, 0], [3, -1, 5], [1, 1, 2], 0, 0, 0, 0, 0, False),
    ([-1, 3, 4], [-4, 0, 0], [-1, -1, -2], 0, 0, 0, 0, 0, False),
    ([0, 0, 0], [0, 0, 0], [-1, 1, -1], 0b111, 0b111, 0, 0, 0, False),
    ([1, 2, 0], [2, 3, 5], [1, 1, 1], 0, 0b100, 0, 0, 0b011, False),
    ([-1, 0, -2], [0, 4, 0], [1, 1, 1], 0, 0, 0, 0, 0b101, False),
    ([1, 1, 1], [1, 2, 3], [1, 1, 1], 0, 0, 0, 0, 0, True),
    ([-2, 0, 1], [2, 2, 3], [1, 1, 2], 0, 0, 0, 0, 0, True),
    ([-10, 2, 10], [10, -10, -10], [1, 1, -1], 0, 0, 0, 0, 0, False),
    ([0, 1, 0], [5, 4, 5], [2, 2, 2], 0b010, 0b101, 0, 0, 0, False),
    ([2, 1], [3, 3], [1, 1], 0, 0, 0, 0, 0b01, False),
    ([0, 1], [0, 3], [1, 1], 0, 0, 0b01, 0, 0, False),
    ([1, 0, 2], [2, 0, 4], [1, 1, 1], 0, 0, 0b010, 0, 0b001, False),
    ([0, 1, 0, 0], [0, 3, 0, 2], [1, 1, 1, 1], 0, 0, 0, 0b001, 0, False),
    ([1, 0, 0], [3, 0, 1], [1, 1, 1], 0, 0, 0, 0b010, 0b100, False),
]


@pytest.mark.parametrize("case", STRIDED, ids=[str(i) for i in range(len(STRIDED))])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_strided_slice_vs_litert(case, dtype):
    b, e, s, bm, em, elm, nm, sm, off = case
    x = _x((3, 4, 5), dtype)
    attrs = dict(begin_mask=bm, end_mask=em, ellipsis_mask=elm, new_axis_mask=nm, shrink_axis_mask=sm,
                 offset=off)
    consts = [np.array(v, np.int32) for v in (b, e, s)]
    got = run_kernel("StridedSlice", [x] + consts, attrs, variant="float" if dtype == "float32" else "int")[0]
    want = _litert_single("STRIDED_SLICE", x, consts, attrs, got.shape or [1], dtype)
    assert_same(got, want)


def test_strided_slice_runtime_indices_match_const():
    x = _x((3, 4, 5))
    ins = [x, np.array([2, -1], np.int32), np.array([0, 0], np.int32), np.array([-1, -2], np.int32)]
    a = run_kernel("StridedSlice", ins, {"end_mask": 2}, const=True)[0]
    b = run_kernel("StridedSlice", ins, {"end_mask": 2}, const=False)[0]
    assert_same(a, b)
    assert_same(a, x[2:0:-1, ::-2])


@pytest.mark.parametrize("op", ["DEPTH_TO_SPACE", "SPACE_TO_DEPTH"])
@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_depth_space_nhwc_vs_litert(op, dtype):
    x = _x((1, 4, 6, 8), dtype)
    canon = "DepthToSpace" if op == "DEPTH_TO_SPACE" else "SpaceToDepth"
    got = run_kernel(canon, [x], {"blocksize": 2, "layout": "NHWC"},
                     variant="float" if dtype == "float32" else "int")[0]
    want = _litert_single(op, x, [], {"block_size": 2}, got.shape, dtype)
    assert_same(got, want)


def test_shape_tflite_int32_out_type():
    x = _x((2, 3, 4))
    got = run_kernel("Shape", [x], out_dtype="int32")[0]
    assert_same(got, onnx_ref("Shape", [x])[0].astype(np.int32))


def test_space_to_depth_crd_mode():  # the mode attribute exists since ONNX opset 24
    x = _x((1, 2, 4, 6))
    check("SpaceToDepth", [x], {"blocksize": 2, "mode": "CRD"})
    want = onnx_ref("SpaceToDepth", [x], {"blocksize": 2, "mode": "CRD"})[0].transpose(0, 2, 3, 1)
    got = run_kernel("SpaceToDepth", [np.ascontiguousarray(x.transpose(0, 2, 3, 1))],
                     {"blocksize": 2, "mode": "CRD", "layout": "NHWC"})[0]
    assert_same(got, want)


@pytest.mark.parametrize("to", [22, 21])
def test_cast_to_4bit_wraps_like_reference(to):
    x = np.arange(-20, 21, dtype=np.float32)
    want = np.asarray(onnx_ref("Cast", [x], {"to": to})[0])
    want = want.astype(np.int8 if to == 22 else np.uint8)
    assert_same(run_kernel("Cast", [x], {"to": to})[0], want)


def test_cast_float_to_int8_out_of_range_wraps_like_reference():
    x = np.array([200.0, -200.0, 127.9, -128.9, 300.5], np.float32)
    check("Cast", [x], {"to": 3}, variants=("float",))


@pytest.mark.parametrize("resolver", ["ref", "opt"])
def test_concat_uint8_rescales_like_litert(resolver):
    # LiteRT rescales uint8 inputs whose params differ from the output (int8 must match).
    pytest.importorskip("ai_edge_litert")
    from tests.conformance.litert_oracle import run_litert_subprocess
    from tests.tflite_builder import TFLiteBuilder

    a = np.arange(0, 256).astype(np.uint8).reshape(1, 16, 16)
    c = RNG.integers(0, 256, (1, 16, 5)).astype(np.uint8)
    qa, qc, qo = (0.05, 131), (0.1, 120), (0.07, 126)
    b = TFLiteBuilder()
    ia = b.tensor("a", [1, 16, 16], "uint8", scale=qa[0], zero_point=qa[1])
    ic = b.tensor("c", [1, 16, 5], "uint8", scale=qc[0], zero_point=qc[1])
    io = b.tensor("y", [1, 16, 21], "uint8", scale=qo[0], zero_point=qo[1])
    b.op("CONCATENATION", [ia, ic], [io], options={"axis": 2})
    want = run_litert_subprocess(b.build([ia, ic], [io]), {"a": a, "c": c}, resolver=resolver,
                                 preserve_all=False)["y"]
    qp = [QuantParams(np.float32(s), np.int64(z)) for s, z in (qa, qc, qo)]
    got = run_kernel("Concat", [a, c], {"axis": 2}, variant="int", const=False, in_quant=qp[:2],
                     out_quant=qp[2], out_dtype="uint8")[0]
    assert_same(got, want)
