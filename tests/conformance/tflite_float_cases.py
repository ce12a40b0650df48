"""Float32 TFLite single-op and small multi-op models built in code (``CASES``).

Each entry is ``build(rng) -> (TFLiteBuilder, input indices, output indices, feeds)``; the test in
``test_tflite_float.py`` compares refinterp (scheme float32) with LiteRT on every tensor.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from tests.tflite_builder import TFLiteBuilder

CASES: dict[str, Callable[[np.random.Generator], tuple[TFLiteBuilder, list[int], list[int]]]] = {}


def case(fn):
    CASES[fn.__name__.removeprefix("m_")] = fn
    return fn


def f32(rng, *shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def unary(op, shape=(2, 3, 5), options=None, lo=-3.0, hi=3.0, version=1):
    def build(rng):
        b = TFLiteBuilder()
        x = b.tensor("x", shape)
        y = b.tensor("y", shape)
        b.op(op, [x], [y], options=options, version=version)
        return b, [x], [y], {"x": f32(rng, *shape, lo=lo, hi=hi)}
    return build


def binary(op, sa, sb, so, options=None, const_b=False, lo=-2.0, hi=2.0):
    def build(rng):
        b = TFLiteBuilder()
        a = b.tensor("a", sa)
        c = b.const("c", f32(rng, *sb, lo=lo, hi=hi)) if const_b else b.tensor("c", sb)
        y = b.tensor("y", so)
        b.op(op, [a, c], [y], options=options)
        feeds = {"a": f32(rng, *sa, lo=lo, hi=hi)}
        if not const_b:
            feeds["c"] = f32(rng, *sb, lo=lo, hi=hi)
        return b, [a] + ([] if const_b else [c]), [y], feeds
    return build


for _name, _op, _opts, _lo, _hi in [
    ("logistic", "LOGISTIC", None, -6, 6), ("tanh", "TANH", None, -3, 3), ("hard_swish", "HARD_SWISH", None, -5, 5),
    ("leaky_relu", "LEAKY_RELU", {"alpha": 0.2}, -3, 3), ("relu", "RELU", None, -3, 3),
    ("relu6", "RELU6", None, -2, 8), ("relu_n1_to_1", "RELU_N1_TO_1", None, -2, 2),
    ("gelu", "GELU", None, -3, 3), ("gelu_tanh", "GELU", {"approximate": True}, -3, 3),
    ("exp", "EXP", None, -3, 3), ("log", "LOG", None, 0.1, 5), ("sqrt", "SQRT", None, 0.0, 5),
    ("rsqrt", "RSQRT", None, 0.1, 5), ("abs", "ABS", None, -3, 3), ("neg", "NEG", None, -3, 3),
    ("elu", "ELU", None, -3, 3), ("square", "SQUARE", None, -3, 3),
    ("softmax", "SOFTMAX", {"beta": 0.7}, -4, 4), ("log_softmax", "LOG_SOFTMAX", None, -4, 4),
    ("l2norm", "L2_NORMALIZATION", None, -2, 2),
]:
    CASES[_name] = unary(_op, options=_opts, lo=_lo, hi=_hi)

for _name, _op, _sa, _sb, _so, _opts, _const in [
    ("add_bcast_relu", "ADD", (1, 4, 4, 3), (3,), (1, 4, 4, 3), {"fused_activation": "RELU"}, True),
    ("sub_bcast", "SUB", (2, 1, 3), (1, 4, 1), (2, 4, 3), None, False),
    ("mul_bcast_relu6", "MUL", (2, 3, 4), (2, 1, 4), (2, 3, 4), {"fused_activation": "RELU6"}, False),
    ("div", "DIV", (2, 5), (2, 5), (2, 5), None, False),
    ("squared_difference", "SQUARED_DIFFERENCE", (3, 4), (4,), (3, 4), None, False),
    ("maximum", "MAXIMUM", (3, 4), (3, 4), (3, 4), None, False),
    ("minimum_bcast", "MINIMUM", (3, 4), (1, 4), (3, 4), None, True),
    ("prelu", "PRELU", (1, 3, 3, 4), (4,), (1, 3, 3, 4), None, True),
]:
    CASES[_name] = binary(_op, _sa, _sb, _so, _opts, _const)
CASES["div"] = binary("DIV", (2, 5), (2, 5), (2, 5), None, False, lo=0.5, hi=3.0)


def conv_case(x_shape, w_shape, y_shape, options, bias=True, version=1):
    # LiteRT 2.3 float CONV_2D requires a bias (conv.cc "has_bias was not true"), so every case has one.
    def build(rng):
        b = TFLiteBuilder()
        x = b.tensor("x", x_shape)
        w = b.const("w", f32(rng, *w_shape))
        ins = [x, w] + ([b.const("bias", f32(rng, w_shape[0]))] if bias else [])  # LiteRT rejects a -1 bias
        y = b.tensor("y", y_shape)
        b.op("CONV_2D", ins, [y], options=options, version=version)
        return b, [x], [y], {"x": f32(rng, *x_shape)}
    return build


CASES["conv_same_relu"] = conv_case((1, 7, 6, 3), (4, 3, 3, 3), (1, 7, 6, 4),
                                    {"padding": "SAME", "fused_activation": "RELU"})
CASES["conv_valid_s2_d2"] = conv_case((2, 11, 9, 2), (5, 3, 2, 2), (2, 4, 4, 5),
                                      {"padding": "VALID", "stride_h": 2, "stride_w": 2, "dilation_h": 2,
                                       "dilation_w": 2})
CASES["conv_same_s2"] = conv_case((1, 8, 7, 3), (2, 3, 3, 3), (1, 4, 4, 2),
                                  {"padding": "SAME", "stride_h": 2, "stride_w": 2})
CASES["conv_grouped"] = conv_case((1, 5, 5, 6), (4, 3, 3, 3), (1, 5, 5, 4), {"padding": "SAME"})
CASES["conv_1x1"] = conv_case((1, 5, 5, 8), (6, 1, 1, 8), (1, 5, 5, 6), {"padding": "VALID"})


@case
def m_depthwise_mult2_s2_relu6(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 9, 8, 3))
    w = b.const("w", f32(rng, 1, 3, 3, 6))
    bias = b.const("bias", f32(rng, 6))
    y = b.tensor("y", (1, 5, 4, 6))
    b.op("DEPTHWISE_CONV_2D", [x, w, bias], [y], {"padding": "SAME", "stride_h": 2, "stride_w": 2,
                                                  "depth_multiplier": 2, "fused_activation": "RELU6"})
    return b, [x], [y], {"x": f32(rng, 1, 9, 8, 3, lo=-3, hi=3)}


@case
def m_depthwise_valid_dilated(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 9, 9, 4))
    w = b.const("w", f32(rng, 1, 3, 3, 4))
    bias = b.const("bias", f32(rng, 4))
    y = b.tensor("y", (1, 5, 5, 4))
    b.op("DEPTHWISE_CONV_2D", [x, w, bias], [y], {"padding": "VALID", "dilation_h": 2, "dilation_w": 2},
         version=2)
    return b, [x], [y], {"x": f32(rng, 1, 9, 9, 4)}


@case
def m_fully_connected(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (3, 12))
    w = b.const("w", f32(rng, 5, 12))
    bias = b.const("bias", f32(rng, 5))
    y = b.tensor("y", (3, 5))
    b.op("FULLY_CONNECTED", [x, w, bias], [y], {"fused_activation": "RELU"})
    return b, [x], [y], {"x": f32(rng, 3, 12)}


@case
def m_fully_connected_keep_dims(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (2, 3, 8))
    w = b.const("w", f32(rng, 4, 8))
    y = b.tensor("y", (2, 3, 4))
    b.op("FULLY_CONNECTED", [x, w, -1], [y], {"keep_num_dims": True})
    return b, [x], [y], {"x": f32(rng, 2, 3, 8)}


@case
def m_transpose_conv_same_s2(rng):
    b = TFLiteBuilder()
    shape = b.const("out_shape", np.array([1, 8, 10, 3], np.int32))
    w = b.const("w", f32(rng, 3, 3, 3, 2))
    x = b.tensor("x", (1, 4, 5, 2))
    bias = b.const("bias", f32(rng, 3))
    y = b.tensor("y", (1, 8, 10, 3))
    b.op("TRANSPOSE_CONV", [shape, w, x, bias], [y], {"padding": "SAME", "stride_h": 2, "stride_w": 2},
         version=4)
    return b, [x], [y], {"x": f32(rng, 1, 4, 5, 2)}


@case
def m_transpose_conv_valid(rng):
    b = TFLiteBuilder()
    shape = b.const("out_shape", np.array([1, 9, 7, 2], np.int32))
    w = b.const("w", f32(rng, 2, 3, 3, 3))
    x = b.tensor("x", (1, 4, 3, 3))
    y = b.tensor("y", (1, 9, 7, 2))
    b.op("TRANSPOSE_CONV", [shape, w, x], [y], {"padding": "VALID", "stride_h": 2, "stride_w": 2})
    return b, [x], [y], {"x": f32(rng, 1, 4, 3, 3)}


def pool_case(op, x_shape, y_shape, options):
    def build(rng):
        b = TFLiteBuilder()
        x = b.tensor("x", x_shape)
        y = b.tensor("y", y_shape)
        b.op(op, [x], [y], options)
        return b, [x], [y], {"x": f32(rng, *x_shape, lo=-3, hi=3)}
    return build


CASES["maxpool_3x3_s2_same"] = pool_case("MAX_POOL_2D", (1, 9, 8, 3), (1, 5, 4, 3),
                                         {"padding": "SAME", "stride_h": 2, "stride_w": 2, "filter_h": 3,
                                          "filter_w": 3})
CASES["avgpool_2x2_valid"] = pool_case("AVERAGE_POOL_2D", (2, 6, 7, 2), (2, 3, 3, 2),
                                       {"padding": "VALID", "stride_h": 2, "stride_w": 2, "filter_h": 2,
                                        "filter_w": 2})
CASES["avgpool_3x3_same_relu"] = pool_case("AVERAGE_POOL_2D", (1, 5, 5, 4), (1, 5, 5, 4),
                                           {"padding": "SAME", "filter_h": 3, "filter_w": 3,
                                            "fused_activation": "RELU"})


def with_const(op, x_shape, consts, y_shape, options=None, x_dtype="float32", y_dtype="float32", version=1,
               y_shapes=None):
    """One op: input x, then constant inputs (name, array) in order; one or several outputs."""
    def build(rng):
        b = TFLiteBuilder()
        x = b.tensor("x", x_shape, x_dtype)
        ins = [x] + [b.const(n, v) for n, v in consts]
        outs = [b.tensor(f"y{i}", s, y_dtype) for i, s in enumerate(y_shapes)] if y_shapes else \
            [b.tensor("y", y_shape, y_dtype)]
        b.op(op, ins, outs, options, version=version)
        return b, [x], outs, {"x": f32(rng, *x_shape, lo=-3, hi=3)}
    return build


i32 = lambda *v: np.array(v, np.int32)  # noqa: E731
CASES["mean_hw_keepdims"] = with_const("MEAN", (2, 5, 4, 3), [("axes", i32(1, 2))], (2, 1, 1, 3),
                                       {"keep_dims": True})
CASES["mean_last"] = with_const("MEAN", (2, 5, 4), [("axes", i32(-1))], (2, 5))
CASES["sum_axis0"] = with_const("SUM", (3, 4, 2), [("axes", i32(0))], (4, 2))
CASES["reduce_max"] = with_const("REDUCE_MAX", (3, 4, 2), [("axes", i32(1))], (3, 1, 2), {"keep_dims": True})
CASES["reshape"] = with_const("RESHAPE", (2, 3, 4), [("shape", i32(4, -1))], (4, 6))
CASES["reshape_opts"] = with_const("RESHAPE", (2, 3, 4), [], (6, 4), {"new_shape": [6, 4]})
CASES["transpose"] = with_const("TRANSPOSE", (2, 3, 4, 5), [("perm", i32(0, 3, 1, 2))], (2, 5, 3, 4))
CASES["pad"] = with_const("PAD", (1, 3, 4, 2), [("paddings", np.array([[0, 0], [1, 2], [2, 0], [0, 1]], np.int32))],
                          (1, 6, 6, 3))
CASES["padv2"] = with_const("PADV2", (2, 3), [("paddings", np.array([[1, 0], [0, 2]], np.int32)),
                                              ("value", np.array([1.5], np.float32))], (3, 5))
CASES["strided_slice"] = with_const("STRIDED_SLICE", (3, 8, 6), [("begin", i32(0, 1, -1)), ("end", i32(2, 7, 0)),
                                                                 ("strides", i32(1, 2, -2))], (2, 3, 3),
                                    {"end_mask": 4})
CASES["strided_slice_shrink"] = with_const("STRIDED_SLICE", (3, 8, 6), [("begin", i32(1, 0, 0)),
                                                                        ("end", i32(2, 8, 6)),
                                                                        ("strides", i32(1, 1, 3))], (8, 2),
                                           {"shrink_axis_mask": 1})
CASES["slice"] = with_const("SLICE", (3, 8, 6), [("begin", i32(1, 2, 0)), ("size", i32(2, -1, 4))], (2, 6, 4))
CASES["gather"] = with_const("GATHER", (5, 4), [("idx", i32(4, 0, 2, 2))], (4, 4))
CASES["gather_axis1"] = with_const("GATHER", (2, 5, 3), [("idx", np.array([[1, 3], [0, 4]], np.int32))],
                                   (2, 2, 2, 3), {"axis": 1})
CASES["squeeze"] = with_const("SQUEEZE", (1, 3, 1, 4), [], (3, 1, 4), {"squeeze_dims": [0]})
CASES["expand_dims"] = with_const("EXPAND_DIMS", (3, 4), [("axis", i32(1))], (3, 1, 4))
CASES["depth_to_space"] = with_const("DEPTH_TO_SPACE", (1, 2, 3, 8), [], (1, 4, 6, 2), {"block_size": 2})
CASES["space_to_depth"] = with_const("SPACE_TO_DEPTH", (1, 4, 6, 2), [], (1, 2, 3, 8), {"block_size": 2})
CASES["arg_max"] = with_const("ARG_MAX", (3, 7), [("axis", i32(1))], (3,), {"output_type": "int32"},
                              y_dtype="int32")
CASES["shape"] = with_const("SHAPE", (3, 7, 2), [], (3,), {"out_type": "int32"}, y_dtype="int32")
CASES["unpack"] = with_const("UNPACK", (3, 2, 4), [], None, {"axis": 1}, y_shapes=[(3, 4), (3, 4)])
CASES["split_v"] = with_const("SPLIT_V", (2, 9), [("sizes", i32(2, -1, 4)), ("axis", i32(1))], None,
                              y_shapes=[(2, 2), (2, 3), (2, 4)])


@case
def m_split(rng):
    b = TFLiteBuilder()
    axis = b.const("axis", i32(2))
    x = b.tensor("x", (2, 3, 6))
    ys = [b.tensor(f"y{i}", (2, 3, 2)) for i in range(3)]
    b.op("SPLIT", [axis, x], ys)
    return b, [x], ys, {"x": f32(rng, 2, 3, 6)}


for _ac, _hp in [(False, False), (True, False), (False, True)]:
    _tag = "align" if _ac else "half" if _hp else "asym"
    for _op, _short in [("RESIZE_BILINEAR", "bilinear"), ("RESIZE_NEAREST_NEIGHBOR", "nearest")]:
        for _size in [(9, 4), (10, 14), (3, 5)]:
            CASES[f"resize_{_short}_{_tag}_{_size[0]}x{_size[1]}"] = with_const(
                _op, (1, 5, 7, 2), [("size", i32(*_size))], (1, *_size, 2),
                {"align_corners": _ac, "half_pixel_centers": _hp}, version=3 if _hp else 1)


@case
def m_concat(rng):
    b = TFLiteBuilder()
    a = b.tensor("a", (1, 3, 4, 2))
    c = b.tensor("c", (1, 3, 4, 5))
    k = b.const("k", f32(rng, 1, 3, 4, 1))
    y = b.tensor("y", (1, 3, 4, 8))
    b.op("CONCATENATION", [a, c, k], [y], {"axis": -1})  # LiteRT kernels reject a fused activation here
    return b, [a, c], [y], {"a": f32(rng, 1, 3, 4, 2), "c": f32(rng, 1, 3, 4, 5)}


@case
def m_pack(rng):
    b = TFLiteBuilder()
    a = b.tensor("a", (3, 4))
    c = b.tensor("c", (3, 4))
    y = b.tensor("y", (3, 2, 4))
    b.op("PACK", [a, c], [y], {"axis": 1})
    return b, [a, c], [y], {"a": f32(rng, 3, 4), "c": f32(rng, 3, 4)}


@case
def m_batch_matmul_adj(rng):
    b = TFLiteBuilder()
    a = b.tensor("a", (2, 5, 3))
    c = b.tensor("c", (1, 4, 5))
    y = b.tensor("y", (2, 3, 4))
    b.op("BATCH_MATMUL", [a, c], [y], {"adj_x": True, "adj_y": True})
    return b, [a, c], [y], {"a": f32(rng, 2, 5, 3), "c": f32(rng, 1, 4, 5)}


@case
def m_float16_weights_conv(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 6, 6, 3))
    w16 = b.const("w_fp16", f32(rng, 4, 3, 3, 3).astype(np.float16))
    bias16 = b.const("b_fp16", f32(rng, 4).astype(np.float16))
    w = b.tensor("w", (4, 3, 3, 3))
    bias = b.tensor("bias", (4,))
    y = b.tensor("y", (1, 6, 6, 4))
    b.op("DEQUANTIZE", [w16], [w])
    b.op("DEQUANTIZE", [bias16], [bias])
    b.op("CONV_2D", [x, w, bias], [y], {"padding": "SAME"})
    return b, [x], [y], {"x": f32(rng, 1, 6, 6, 3)}


@case
def m_small_net(rng):
    b = TFLiteBuilder()
    x = b.tensor("input", (1, 8, 8, 3))
    w1 = b.const("conv/w", f32(rng, 8, 3, 3, 3, lo=-0.5, hi=0.5))
    b1 = b.const("conv/b", f32(rng, 8))
    c1 = b.tensor("conv/out", (1, 4, 4, 8))
    b.op("CONV_2D", [x, w1, b1], [c1], {"padding": "SAME", "stride_h": 2, "stride_w": 2, "fused_activation": "RELU6"})
    wd = b.const("dw/w", f32(rng, 1, 3, 3, 8))
    bd = b.const("dw/b", f32(rng, 8))
    d1 = b.tensor("dw/out", (1, 4, 4, 8))
    b.op("DEPTHWISE_CONV_2D", [c1, wd, bd], [d1], {"padding": "SAME", "fused_activation": "RELU"})
    hs = b.tensor("hswish", (1, 4, 4, 8))
    b.op("HARD_SWISH", [d1], [hs])
    s = b.tensor("add", (1, 4, 4, 8))
    b.op("ADD", [hs, c1], [s])
    p = b.tensor("pool", (1, 1, 1, 8))
    b.op("AVERAGE_POOL_2D", [s], [p], {"padding": "VALID", "filter_h": 4, "filter_w": 4, "stride_h": 4,
                                       "stride_w": 4})
    r = b.tensor("flat", (1, 8))
    b.op("RESHAPE", [p, b.const("flat/shape", i32(1, 8))], [r])
    wf = b.const("fc/w", f32(rng, 10, 8))
    bf = b.const("fc/b", f32(rng, 10))
    f = b.tensor("logits", (1, 10))
    b.op("FULLY_CONNECTED", [r, wf, bf], [f])
    y = b.tensor("probs", (1, 10))
    b.op("SOFTMAX", [f], [y])
    return b, [x], [y], {"input": f32(rng, 1, 8, 8, 3, lo=-2, hi=2)}


# index / generator / comparison ops real models use (refinterp/kernels/float/index.py)
CASES["gather_nd"] = with_const("GATHER_ND", (4, 5, 3), [("idx", np.array([[1, 2], [3, 0], [0, 4]], np.int32))],
                                (3, 3))
CASES["cumsum_exclusive_reverse"] = with_const("CUMSUM", (3, 6), [("axis", i32(1))], (3, 6),
                                               {"exclusive": True, "reverse": True})
CASES["cumsum"] = with_const("CUMSUM", (4, 5), [("axis", i32(0))], (4, 5))


@case
def m_topk(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (3, 9))
    v, i = b.tensor("v", (3, 4)), b.tensor("i", (3, 4), "int32")
    b.op("TOPK_V2", [x, b.const("k", i32(4))], [v, i])
    xs = f32(rng, 3, 9)
    xs[1, 2] = xs[1, 7] = 2.0  # a tie: the lower index comes first
    return b, [x], [v, i], {"x": xs}


CASES["reverse_v2"] = with_const("REVERSE_V2", (2, 3, 4), [("axis", i32(1, 2))], (2, 3, 4))
CASES["zeros_like"] = unary("ZEROS_LIKE")
CASES["sin"] = unary("SIN", lo=-4, hi=4)
CASES["cos"] = unary("COS", lo=-4, hi=4)
for _name, _op in (("not_equal", "NOT_EQUAL"), ("greater_equal", "GREATER_EQUAL"), ("less_equal", "LESS_EQUAL")):
    CASES[_name] = with_const(_op, (3, 4), [("c", np.array([0.5, -0.25, 0.0, 1.0], np.float32))], (3, 4),
                              y_dtype="bool")
CASES["floor_div"] = binary("FLOOR_DIV", (3, 5), (3, 5), (3, 5), lo=-3.0, hi=3.0)
CASES["floor_mod"] = binary("FLOOR_MOD", (3, 5), (1, 5), (3, 5), lo=-3.0, hi=3.0)


@case
def m_fill_range(rng):
    """FILL of a runtime value and RANGE from constants, each added to x so the model has an input."""
    b = TFLiteBuilder()
    x = b.tensor("x", (2, 3))
    v = b.tensor("v", ())
    f = b.tensor("f", (2, 3))
    b.op("FILL", [b.const("dims", i32(2, 3)), v], [f])
    y = b.tensor("y", (2, 3))
    b.op("ADD", [x, f], [y], options={"fused_activation": "NONE"})
    r = b.tensor("r", (5,))
    lims = [b.tensor(n, ()) for n in ("start", "limit", "delta")]
    b.op("RANGE", lims, [r])
    return b, [x, v] + lims, [y, r], {"x": f32(rng, 2, 3), "v": np.array(0.75, np.float32),
                                      "start": np.array(1.5, np.float32), "limit": np.array(4.0, np.float32),
                                      "delta": np.array(0.5, np.float32)}


@case
def m_embedding_lookup(rng):
    b = TFLiteBuilder()
    ids = b.tensor("ids", (4,), "int32")
    y = b.tensor("y", (4, 3))
    b.op("EMBEDDING_LOOKUP", [ids, b.const("table", f32(rng, 6, 3))], [y])
    return b, [ids], [y], {"ids": np.array([5, 0, 2, 2], np.int32)}


@case
def m_broadcast_args(rng):
    b = TFLiteBuilder()
    s0 = b.tensor("s0", (3,), "int32")
    y = b.tensor("y", (3,), "int32")
    b.op("BROADCAST_ARGS", [s0, b.const("s1", i32(4, 1))], [y])
    return b, [s0], [y], {"s0": np.array([2, 1, 5], np.int32)}


# older converters' dilated convolution: SPACE_TO_BATCH_ND -> CONV_2D (VALID) -> BATCH_TO_SPACE_ND
CASES["space_to_batch_nd"] = with_const("SPACE_TO_BATCH_ND", (2, 5, 6, 3),
                                        [("block", i32(2, 3)), ("pads", np.array([[1, 0], [0, 0]], np.int32))],
                                        (12, 3, 2, 3))
CASES["space_to_batch_nd_3d"] = with_const("SPACE_TO_BATCH_ND", (2, 5, 3),
                                           [("block", i32(2)), ("pads", np.array([[0, 1]], np.int32))], (4, 3, 3))
CASES["batch_to_space_nd"] = with_const("BATCH_TO_SPACE_ND", (8, 3, 2, 3),
                                        [("block", i32(2, 2)), ("crops", np.array([[1, 0], [0, 1]], np.int32))],
                                        (2, 5, 3, 3))


@case
def m_dilated_conv_space_batch(rng):
    """The pattern TF 1.x converters emitted for a dilated 3x3 conv (rate 2, SAME)."""
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 8, 8, 3))
    s2b = b.tensor("s2b", (4, 6, 6, 3))
    b.op("SPACE_TO_BATCH_ND", [x, b.const("block", i32(2, 2)), b.const("pads", np.full((2, 2), 2, np.int32))],
         [s2b])
    c = b.tensor("conv", (4, 4, 4, 5))
    b.op("CONV_2D", [s2b, b.const("w", f32(rng, 5, 3, 3, 3)), b.const("bias", f32(rng, 5))], [c],
         {"padding": "VALID"})
    y = b.tensor("y", (1, 8, 8, 5))
    b.op("BATCH_TO_SPACE_ND", [c, b.const("block2", i32(2, 2)), b.const("crops", np.zeros((2, 2), np.int32))],
         [y])
    return b, [x], [y], {"x": f32(rng, 1, 8, 8, 3)}


@case
def m_one_hot(rng):
    b = TFLiteBuilder()
    idx = b.tensor("idx", (2, 3), "int32")
    y = b.tensor("y", (2, 5, 3))
    b.op("ONE_HOT", [idx, b.const("depth", np.array(5, np.int32)), b.const("on", np.array(2.5, np.float32)),
                     b.const("off", np.array(-1.0, np.float32))], [y], {"axis": 1})
    return b, [idx], [y], {"idx": np.array([[0, 4, 2], [7, -1, 3]], np.int32)}  # 7, -1: all-off rows


@case
def m_reduce_any_all(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (3, 4, 2), "bool")
    ya, yl = b.tensor("any", (3, 1, 2), "bool"), b.tensor("all", (4,), "bool")
    b.op("REDUCE_ANY", [x, b.const("ax1", i32(1))], [ya], {"keep_dims": True})
    b.op("REDUCE_ALL", [x, b.const("ax02", i32(0, 2))], [yl])
    xs = rng.uniform(size=(3, 4, 2)) < 0.7
    xs[:, 1, :] = True
    xs[0, :, 0] = False
    return b, [x], [ya, yl], {"x": xs}


@case
def m_where_argwhere(rng):
    b = TFLiteBuilder()
    x = b.tensor("x", (3, 4), "bool")
    y = b.tensor("y", (5, 2), "int64")
    b.op("WHERE", [x], [y])
    xs = np.zeros((3, 4), bool)
    xs[[0, 1, 1, 2, 2], [3, 0, 2, 1, 3]] = True
    return b, [x], [y], {"x": xs}


@case
def m_scatter_nd(rng):
    b = TFLiteBuilder()
    upd = b.tensor("upd", (4, 3))
    y = b.tensor("y", (5, 3))
    idx = np.array([[4], [0], [2], [4]], np.int32)  # a duplicate index: the updates add up
    b.op("SCATTER_ND", [b.const("idx", idx), upd, b.const("shape", i32(5, 3))], [y])
    return b, [upd], [y], {"upd": f32(rng, 4, 3)}


@case
def m_while_loop(rng):
    """WHILE (i < 5): i += 1, x = x * 1.5 + c; cond and body are subgraphs 1 and 2."""
    b = TFLiteBuilder()
    i0, x0 = b.tensor("i0", (), "int32"), b.tensor("x0", (2, 3))
    i_out, x_out = b.tensor("i_out", (), "int32"), b.tensor("x_out", (2, 3))
    cond = b.subgraph("cond")
    ci, cx = cond.tensor("ci", (), "int32"), cond.tensor("cx", (2, 3))
    go = cond.tensor("go", (), "bool")
    cond.op("LESS", [ci, cond.const("five", np.array(5, np.int32))], [go])
    body = b.subgraph("body")
    bi, bx = body.tensor("bi", (), "int32"), body.tensor("bx", (2, 3))
    ni, scaled, nx = body.tensor("ni", (), "int32"), body.tensor("scaled", (2, 3)), body.tensor("nx", (2, 3))
    body.op("ADD", [bi, body.const("one", np.array(1, np.int32))], [ni])
    body.op("MUL", [bx, body.const("k", np.array(1.5, np.float32))], [scaled])
    body.op("ADD", [scaled, body.const("c", f32(rng, 2, 3))], [nx])
    ci_idx = b.set_io(cond, [ci, cx], [go])
    bi_idx = b.set_io(body, [bi, bx], [ni, nx])
    b.op("WHILE", [i0, x0], [i_out, x_out], {"cond_subgraph_index": ci_idx, "body_subgraph_index": bi_idx})
    return b, [i0, x0], [i_out, x_out], {"i0": np.array(1, np.int32), "x0": f32(rng, 2, 3)}


def if_case(flag_value: bool):
    def build(rng):
        return _if_model(rng, flag_value)
    return build


def _if_model(rng, flag_value: bool):
    """IF on a runtime bool: then x + c, else x * c (subgraphs 1 and 2 take x and c as inputs)."""
    b = TFLiteBuilder()
    flag, x = b.tensor("flag", (), "bool"), b.tensor("x", (4,))
    c = b.const("c", f32(rng, 4))
    y = b.tensor("y", (4,))
    subs = []
    for op in ("ADD", "MUL"):
        s = b.subgraph(op.lower())
        sx, sc, sy = s.tensor("sx", (4,)), s.tensor("sc", (4,)), s.tensor("sy", (4,))
        s.op(op, [sx, sc], [sy])
        subs.append(b.set_io(s, [sx, sc], [sy]))
    b.op("IF", [flag, x, c], [y], {"then_subgraph_index": subs[0], "else_subgraph_index": subs[1]})
    return b, [flag, x], [y], {"flag": np.array(flag_value), "x": f32(rng, 4)}


CASES["if_then"] = if_case(True)
CASES["if_else"] = if_case(False)
