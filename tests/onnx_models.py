"""Small ONNX models built in code with onnx.helper (test helpers; weights from a seeded RNG)."""
from __future__ import annotations

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper


class _Builder:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.count = 0

    def w(self, name: str, shape, scale: float = 0.3, dtype=np.float32, value=None) -> str:
        arr = np.asarray(value, dtype) if value is not None else (self.rng.standard_normal(shape) * scale
                                                                   ).astype(dtype)
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs) -> str | list[str]:
        self.count += 1
        outs = [f"{op_type.lower()}_{self.count}" + (f"_{k}" if k else "") for k in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{op_type}_{self.count}", **attrs))
        return outs[0] if n_out == 1 else outs

    def model(self, name: str, inputs, outputs, opset: int) -> ModelProto:
        g = helper.make_graph(self.nodes, name, inputs, outputs, initializer=self.inits)
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="refinterp-tests")
        m.ir_version = 8
        return m


def small_cnn(seed: int = 0) -> ModelProto:
    """conv-bn-relu6, depthwise conv, 1x1 conv + hardswish, max/avg pool, resize, concat, GAP, gemm."""
    b = _Builder(seed)
    x = "input"
    h = b.op("Conv", [x, b.w("c1_w", (8, 3, 3, 3)), b.w("c1_b", (8,), 0.1)], pads=[1, 1, 1, 1])
    h = b.op("BatchNormalization", [h, b.w("bn_s", (8,), value=1 + 0.1 * b.rng.standard_normal(8)),
                                    b.w("bn_b", (8,), 0.1), b.w("bn_m", (8,), 0.1),
                                    b.w("bn_v", (8,), value=0.5 + b.rng.random(8))], epsilon=1e-3)
    h = b.op("Clip", [h, b.w("zero", (), value=0.0), b.w("six", (), value=6.0)])
    h = b.op("Conv", [h, b.w("dw_w", (8, 1, 3, 3)), b.w("dw_b", (8,), 0.1)], group=8, pads=[1, 1, 1, 1],
             strides=[1, 1])
    h = b.op("Relu", [h])
    h = b.op("Conv", [h, b.w("pw_w", (16, 8, 1, 1))])
    h = b.op("HardSwish", [h])
    p = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    a = b.op("AveragePool", [p], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=0)
    d = b.op("AveragePool", [p], kernel_shape=[2, 2], strides=[2, 2])
    u = b.op("Resize", [d, "", b.w("scales", (4,), value=[1, 1, 2, 2])], mode="linear")
    c = b.op("Concat", [a, u], axis=1)
    g = b.op("GlobalAveragePool", [c])
    f = b.op("Flatten", [g], axis=1)
    b.op("Gemm", [f, b.w("fc_w", (10, 32)), b.w("fc_b", (10,), 0.1)], transB=1)
    b.nodes[-1].output[0] = "logits"
    return b.model("small_cnn", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10]),
                    helper.make_tensor_value_info(c, TensorProto.FLOAT, [1, 32, 8, 8])], opset=17)


def mobile_blocks(seed: int = 0) -> ModelProto:
    """MobileNetV2-style: strided conv + ReLU6, inverted residual (1x1 expand + ReLU6, depthwise + ReLU,
    1x1 project, residual Add), stride-2 depthwise + ReLU6, GAP, Flatten, Gemm."""
    b = _Builder(seed)
    x = "input"
    h = b.op("Conv", [x, b.w("c1_w", (16, 3, 3, 3)), b.w("c1_b", (16,), 0.1)], pads=[1, 1, 1, 1], strides=[2, 2])
    h = b.op("Clip", [h, b.w("zero", (), value=0.0), b.w("six", (), value=6.0)])
    r = h
    h = b.op("Conv", [h, b.w("e_w", (32, 16, 1, 1)), b.w("e_b", (32,), 0.1)])
    h = b.op("Clip", [h, "zero", "six"])
    h = b.op("Conv", [h, b.w("dw_w", (32, 1, 3, 3)), b.w("dw_b", (32,), 0.1)], group=32, pads=[1, 1, 1, 1])
    h = b.op("Relu", [h])
    h = b.op("Conv", [h, b.w("p_w", (16, 32, 1, 1)), b.w("p_b", (16,), 0.1)])
    h = b.op("Add", [h, r])
    h = b.op("Conv", [h, b.w("dw2_w", (16, 1, 3, 3)), b.w("dw2_b", (16,), 0.1)], group=16, pads=[1, 1, 1, 1],
             strides=[2, 2])
    h = b.op("Clip", [h, "zero", "six"])
    g = b.op("GlobalAveragePool", [h])
    f = b.op("Flatten", [g], axis=1)
    b.op("Gemm", [f, b.w("fc_w", (10, 16)), b.w("fc_b", (10,), 0.1)], transB=1)
    b.nodes[-1].output[0] = "logits"
    return b.model("mobile_blocks", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], opset=17)


def _strided_head(b: _Builder, h: str, name: str) -> ModelProto:
    """16 x 16 x 16 features -> strided 1x1 conv to 4 channels, Flatten, Gemm to 10 logits; the model of a
    [1, 3, 32, 32] "input"."""
    h = b.op("Conv", [h, b.w("q_w", (4, 16, 1, 1)), b.w("q_b", (4,), 0.1)], strides=[2, 2])
    f = b.op("Flatten", [h], axis=1)
    b.op("Gemm", [f, b.w("fc_w", (10, 4 * 8 * 8)), b.w("fc_b", (10,), 0.1)], transB=1)
    b.nodes[-1].output[0] = "logits"
    return b.model(name, [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], opset=17)


def residual_blocks(seed: int = 3) -> ModelProto:
    """mobile_blocks without its pooling: strided conv + ReLU6, inverted residual (1x1 expand + ReLU,
    depthwise + ReLU, 1x1 project, residual Add), 1x1 conv, Flatten, Gemm -- ops the HTP runs on 16-bit
    activations."""
    b = _Builder(seed)
    x = "input"
    h = b.op("Conv", [x, b.w("c1_w", (16, 3, 3, 3)), b.w("c1_b", (16,), 0.1)], pads=[1, 1, 1, 1], strides=[2, 2])
    h = b.op("Clip", [h, b.w("zero", (), value=0.0), b.w("six", (), value=6.0)])
    r = h
    h = b.op("Relu", [b.op("Conv", [h, b.w("e_w", (32, 16, 1, 1)), b.w("e_b", (32,), 0.1)])])
    h = b.op("Relu", [b.op("Conv", [h, b.w("dw_w", (32, 1, 3, 3)), b.w("dw_b", (32,), 0.1)], group=32,
                           pads=[1, 1, 1, 1])])
    h = b.op("Add", [b.op("Conv", [h, b.w("p_w", (16, 32, 1, 1)), b.w("p_b", (16,), 0.1)]), r])
    return _strided_head(b, h, "residual_blocks")


def gated_blocks(seed: int = 7) -> ModelProto:
    """Gated-activation blocks of the kind 16-bit models carry Sigmoid and Tanh in: strided conv + ReLU, a
    tanh(conv) * sigmoid(conv) gate (WaveNet / GLU-style), a residual Add, a squeeze-excitation gate (GAP, 1x1 +
    ReLU, 1x1 + Sigmoid, Mul broadcast over H x W), strided 1x1 conv, Flatten, Gemm."""
    b = _Builder(seed)
    x = "input"
    h = b.op("Relu", [b.op("Conv", [x, b.w("c1_w", (16, 3, 3, 3)), b.w("c1_b", (16,), 0.1)], pads=[1, 1, 1, 1],
                           strides=[2, 2])])
    v = b.op("Tanh", [b.op("Conv", [h, b.w("v_w", (16, 16, 1, 1)), b.w("v_b", (16,), 0.1)])])
    g = b.op("Sigmoid", [b.op("Conv", [h, b.w("g_w", (16, 16, 1, 1)), b.w("g_b", (16,), 0.1)])])
    h = b.op("Add", [b.op("Mul", [v, g]), h])
    s = b.op("GlobalAveragePool", [h])
    s = b.op("Relu", [b.op("Conv", [s, b.w("se1_w", (4, 16, 1, 1)), b.w("se1_b", (4,), 0.1)])])
    s = b.op("Sigmoid", [b.op("Conv", [s, b.w("se2_w", (16, 4, 1, 1)), b.w("se2_b", (16,), 0.1)])])
    h = b.op("Mul", [h, s])
    return _strided_head(b, h, "gated_blocks")


def pooled_unet(seed: int = 5, up: str = "resize") -> ModelProto:
    """A small U-Net-style model of the pooling and data-movement ops: conv + ReLU, MaxPool 2x2, conv,
    AveragePool 3x3 (padded, count_include_pad), AveragePool 2x2 stride 1 (padded, count_include_pad 0),
    an Add of the two, nearest Resize back up, Concat with the skip, conv head -- all of which the HTP runs
    on 8- and 16-bit activations.  (With a Sub in place of the Add, the emulator fails to finalize the graph,
    QNN_COMMON_ERROR_MEM_ALLOC: a finding; Sub followed by Resize is enough to trigger it.)  ``up="tconv"``
    upsamples by a ConvTranspose (4x4, stride 2, pads 1) + ReLU instead of the Resize (a ReLU: an input on a
    Relu range into a Concat with a higher zero point is refused on the HTP, kernels/qnn_htp/MEASURED.md)."""
    b = _Builder(seed)
    x = "input"
    h = b.op("Relu", [b.op("Conv", [x, b.w("c1_w", (8, 3, 3, 3)), b.w("c1_b", (8,), 0.1)], pads=[1, 1, 1, 1])])
    skip = h
    h = b.op("MaxPool", [h], kernel_shape=[2, 2], strides=[2, 2])
    h = b.op("Relu", [b.op("Conv", [h, b.w("c2_w", (8, 8, 3, 3)), b.w("c2_b", (8,), 0.1)], pads=[1, 1, 1, 1])])
    a = b.op("AveragePool", [h], kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1)
    c = b.op("AveragePool", [h], kernel_shape=[2, 2], pads=[0, 0, 1, 1], count_include_pad=0)
    h = b.op("Add", [a, c])
    if up == "tconv":
        h = b.op("Relu", [b.op("ConvTranspose", [h, b.w("up_w", (8, 8, 4, 4)), b.w("up_b", (8,), 0.1)],
                               strides=[2, 2], pads=[1, 1, 1, 1])])
    else:
        h = b.op("Resize", [h, "", b.w("up", (4,), value=[1, 1, 2, 2])], mode="nearest")
    h = b.op("Concat", [h, skip], axis=1)
    b.op("Conv", [h, b.w("c3_w", (4, 16, 1, 1)), b.w("c3_b", (4,), 0.1)])
    b.nodes[-1].output[0] = "out"
    return b.model("pooled_unet", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 16, 16])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 4, 16, 16])], opset=17)


def swish_se_blocks(seed: int = 2) -> ModelProto:
    """EfficientNet-style: conv + SiLU (x * Sigmoid(x)), depthwise + SiLU, a squeeze-excitation gate
    (GAP, 1x1 conv + SiLU, 1x1 conv + Sigmoid, Mul broadcast over H x W), 1x1 projection, a Mul by a
    constant scalar, GAP, Flatten, Gemm."""
    b = _Builder(seed)
    x = "input"

    def silu(t: str) -> str:
        return b.op("Mul", [t, b.op("Sigmoid", [t])])

    h = silu(b.op("Conv", [x, b.w("c1_w", (16, 3, 3, 3)), b.w("c1_b", (16,), 0.1)], pads=[1, 1, 1, 1], strides=[2, 2]))
    h = silu(b.op("Conv", [h, b.w("dw_w", (16, 1, 3, 3)), b.w("dw_b", (16,), 0.1)], group=16, pads=[1, 1, 1, 1]))
    g = b.op("GlobalAveragePool", [h])
    g = silu(b.op("Conv", [g, b.w("se1_w", (4, 16, 1, 1)), b.w("se1_b", (4,), 0.1)]))
    g = b.op("Sigmoid", [b.op("Conv", [g, b.w("se2_w", (16, 4, 1, 1)), b.w("se2_b", (16,), 0.1)])])
    h = b.op("Mul", [h, g])
    h = b.op("Conv", [h, b.w("p_w", (24, 16, 1, 1)), b.w("p_b", (24,), 0.1)])
    h = b.op("Mul", [h, b.w("gain", (), value=1.7)])
    f = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    b.op("Gemm", [f, b.w("fc_w", (10, 24)), b.w("fc_b", (10,), 0.1)], transB=1)
    b.nodes[-1].output[0] = "logits"
    return b.model("swish_se_blocks", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], opset=17)


def mobilenet_v3_blocks(seed: int = 0, res: int = 48) -> ModelProto:
    """MobileNetV3-style: stride-2 stem + HardSwish; inverted residuals (1x1 expand, 3x3 / 5x5 depthwise at stride 1
    or 2, each with ReLU or HardSwish, a squeeze-excitation gate GAP -> 1x1 + ReLU -> 1x1 + HardSigmoid(1/6, 1/2)
    -> Mul, 1x1 project, residual Add at stride 1); 1x1 + HardSwish, GAP, Flatten, Gemm."""
    b = _Builder(seed)
    h = b.op("HardSwish", [b.op("Conv", ["input", b.w("c0", (16, 3, 3, 3)), b.w("c0b", (16,), 0.1)], pads=[1] * 4,
                                     strides=[2, 2])])
    cin = 16
    for i, (e, o, k, s, se, hs) in enumerate([(16, 16, 3, 2, 1, 0), (48, 24, 3, 2, 0, 0), (72, 24, 3, 1, 0, 0),
                                              (96, 40, 5, 2, 1, 1), (120, 40, 5, 1, 1, 1)]):
        def act(t: str) -> str:
            return b.op("HardSwish" if hs else "Relu", [t])

        t = act(b.op("Conv", [h, b.w(f"e{i}", (e, cin, 1, 1), 0.2), b.w(f"eb{i}", (e,), 0.1)]))
        t = act(b.op("Conv", [t, b.w(f"d{i}", (e, 1, k, k), 0.3), b.w(f"db{i}", (e,), 0.1)], group=e,
                     pads=[k // 2] * 4, strides=[s, s]))
        if se:
            g = b.op("Relu", [b.op("Conv", [b.op("GlobalAveragePool", [t]), b.w(f"s{i}", (e // 4, e, 1, 1), 0.1),
                                            b.w(f"sb{i}", (e // 4,), 0.1)])])
            g = b.op("HardSigmoid", [b.op("Conv", [g, b.w(f"x{i}", (e, e // 4, 1, 1), 0.1), b.w(f"xb{i}", (e,), 0.1)])],
                     alpha=1 / 6, beta=0.5)
            t = b.op("Mul", [t, g])
        t = b.op("Conv", [t, b.w(f"p{i}", (o, e, 1, 1), 0.15), b.w(f"pb{i}", (o,), 0.1)])
        h, cin = (b.op("Add", [t, h]) if s == 1 and cin == o else t), o
    h = b.op("HardSwish", [b.op("Conv", [h, b.w("last", (96, cin, 1, 1), 0.15), b.w("lastb", (96,), 0.1)])])
    f = b.op("Flatten", [b.op("GlobalAveragePool", [h])], axis=1)
    b.op("Gemm", [f, b.w("fc", (10, 96), 0.1), b.w("fcb", (10,), 0.1)], transB=1)
    b.nodes[-1].output[0] = "logits"
    return b.model("mobilenet_v3_blocks", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, res, res])],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], opset=17)


def detection_head(seed: int = 3) -> ModelProto:
    """A YOLO-style single-scale head: strided Conv backbone, nearest upsampling and a skip Concat, 1x1 Convs, then
    box decoding -- Reshape / Transpose / Split, Sigmoid scores, boxes times a stride plus a grid, one Concat."""
    b = _Builder(seed)
    x = "input"
    h = b.op("Relu", [b.op("Conv", [x, b.w("c1", (16, 3, 3, 3)), b.w("c1b", (16,), 0.1)], pads=[1, 1, 1, 1],
                           strides=[2, 2])])
    p3 = b.op("Relu", [b.op("Conv", [h, b.w("c2", (24, 16, 3, 3)), b.w("c2b", (24,), 0.1)], pads=[1, 1, 1, 1],
                            strides=[2, 2])])
    p4 = b.op("Relu", [b.op("Conv", [p3, b.w("c3", (32, 24, 3, 3)), b.w("c3b", (32,), 0.1)], pads=[1, 1, 1, 1],
                            strides=[2, 2])])
    up = b.op("Resize", [p4, "", b.w("sc", (4,), value=[1, 1, 2, 2])], mode="nearest")
    f = b.op("Relu", [b.op("Conv", [b.op("Concat", [p3, up], axis=1), b.w("c4", (24, 56, 1, 1)),
                                    b.w("c4b", (24,), 0.1)])])
    o = b.op("Conv", [f, b.w("c5", (9, 24, 1, 1)), b.w("c5b", (9,), 0.1)])  # 4 box + 1 object + 4 class
    o = b.op("Transpose", [b.op("Reshape", [o, b.w("rs", (3,), dtype=np.int64, value=[1, 9, 64])])], perm=[0, 2, 1])
    box, rest = b.op("Split", [o, b.w("sp", (2,), dtype=np.int64, value=[4, 5])], n_out=2, axis=2)
    boxes = b.op("Add", [b.op("Mul", [box, b.w("stride", (), value=8.0)]), b.w("grid", (64, 4), 2.0)])
    b.op("Concat", [boxes, b.op("Sigmoid", [rest])], axis=2)
    b.nodes[-1].output[0] = "det"
    return b.model("detection_head", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 3, 32, 32])],
                   [helper.make_tensor_value_info("det", TensorProto.FLOAT, [1, 64, 9])], opset=17)


def super_resolution(seed: int = 4) -> ModelProto:
    """ESPCN-style x3 super-resolution: Conv 5x5 + Tanh, Conv 3x3 + Tanh, Conv 3x3 to 9 channels, DepthToSpace
    (the pixel shuffle, CRD), Clip to [0, 1]."""
    b = _Builder(seed)
    x = "input"
    h = b.op("Tanh", [b.op("Conv", [x, b.w("c1", (16, 1, 5, 5)), b.w("c1b", (16,), 0.1)], pads=[2, 2, 2, 2])])
    h = b.op("Tanh", [b.op("Conv", [h, b.w("c2", (8, 16, 3, 3), 0.2), b.w("c2b", (8,), 0.1)], pads=[1, 1, 1, 1])])
    h = b.op("Conv", [h, b.w("c3", (9, 8, 3, 3), 0.2), b.w("c3b", (9,), 0.1)], pads=[1, 1, 1, 1])
    h = b.op("DepthToSpace", [h], blocksize=3, mode="CRD")
    b.op("Clip", [h, b.w("lo", (), value=0.0), b.w("hi", (), value=1.0)])
    b.nodes[-1].output[0] = "out"
    return b.model("super_resolution", [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, 1, 12, 12])],
                   [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, 1, 36, 36])], opset=17)


def transformer_block(gelu: str = "op", seed: int = 1, seq: int = 8, dim: int = 16, heads: int = 2,
                      vocab: int = 20) -> ModelProto:
    """Token embedding (Gather) + positional add, pre-LN self-attention and MLP, residuals.

    ``gelu="op"`` uses the Gelu op (opset 20); ``gelu="erf"`` spells it with Erf (opset 17).
    """
    b = _Builder(seed)
    hd = dim // heads
    ids = "tokens"
    e = b.op("Gather", [b.w("embed", (vocab, dim), 0.5), ids], axis=0)
    x0 = b.op("Add", [e, b.w("pos", (seq, dim), 0.1)])
    ln1 = b.op("LayerNormalization", [x0, b.w("ln1_g", (dim,), value=1 + 0.1 * b.rng.standard_normal(dim)),
                                      b.w("ln1_b", (dim,), 0.1)], axis=-1, epsilon=1e-5)

    def heads_of(t: str, tag: str) -> str:
        p = b.op("Add", [b.op("MatMul", [t, b.w(f"{tag}_w", (dim, dim))]), b.w(f"{tag}_b", (dim,), 0.1)])
        r = b.op("Reshape", [p, b.w(f"{tag}_shape", (4,), dtype=np.int64, value=[1, seq, heads, hd])])
        return b.op("Transpose", [r], perm=[0, 2, 1, 3])

    q, k, v = heads_of(ln1, "q"), heads_of(ln1, "k"), heads_of(ln1, "v")
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    s = b.op("Mul", [b.op("MatMul", [q, kt]), b.w("att_scale", (), value=1.0 / np.sqrt(hd))])
    att = b.op("Softmax", [s], axis=-1)
    o = b.op("Transpose", [b.op("MatMul", [att, v])], perm=[0, 2, 1, 3])
    o = b.op("Reshape", [o, b.w("merge_shape", (3,), dtype=np.int64, value=[1, seq, dim])])
    o = b.op("Add", [b.op("MatMul", [o, b.w("o_w", (dim, dim))]), b.w("o_b", (dim,), 0.1)])
    x1 = b.op("Add", [x0, o])
    ln2 = b.op("LayerNormalization", [x1, b.w("ln2_g", (dim,), value=np.ones(dim)), b.w("ln2_b", (dim,), 0.1)])
    up = b.op("Add", [b.op("MatMul", [ln2, b.w("up_w", (dim, 2 * dim))]), b.w("up_b", (2 * dim,), 0.1)])
    if gelu == "op":
        act = b.op("Gelu", [up])
    else:
        erf = b.op("Erf", [b.op("Div", [up, b.w("sqrt2", (), value=np.sqrt(2.0))])])
        act = b.op("Mul", [b.op("Mul", [up, b.w("half", (), value=0.5)]),
                           b.op("Add", [erf, b.w("one", (), value=1.0)])])
    down = b.op("MatMul", [act, b.w("down_w", (2 * dim, dim))])
    b.op("Add", [x1, down])
    b.nodes[-1].output[0] = "hidden"
    return b.model(f"transformer_{gelu}", [helper.make_tensor_value_info(ids, TensorProto.INT64, [1, seq])],
                   [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, seq, dim]),
                    helper.make_tensor_value_info(att, TensorProto.FLOAT, [1, heads, seq, seq])],
                   opset=20 if gelu == "op" else 17)


_ONNX_TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int64): TensorProto.INT64,
               np.dtype(np.int32): TensorProto.INT32, np.dtype(np.bool_): TensorProto.BOOL}


def single_node_model(node, feeds: dict, outputs: dict, opset: int, ir_version: int, inits=(),
                      domains: tuple = ()) -> ModelProto:
    """A graph of ``node`` (or a list of nodes); inputs typed from the ``feeds`` arrays, outputs
    ``{name: TensorProto type}``."""
    graph = helper.make_graph([node] if not isinstance(node, list) else node, "g",
                              [helper.make_tensor_value_info(k, _ONNX_TYPES[v.dtype], v.shape)
                               for k, v in feeds.items()],
                              [helper.make_tensor_value_info(o, t, None) for o, t in outputs.items()], list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]
                          + [helper.make_opsetid(d, 1) for d in domains])
    m.ir_version = ir_version
    return m


def ort_and_refinterp(model: ModelProto, feeds: dict, tmp_path, scheme: str = "float32", optimize: bool = True):
    """(ONNX Runtime CPU outputs by name, refinterp outputs by name, the refinterp graph) for one feed.
    ``optimize=False``: ORT with graph optimisations off (no fusion renames a contrib op away)."""
    import onnxruntime as ort

    import refinterp

    so = ort.SessionOptions()
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    want = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))
    p = tmp_path / "m.onnx"
    p.write_bytes(model.SerializeToString())
    g = refinterp.load(str(p))
    return want, refinterp.Session(g, scheme).run(feeds), g


ORT_LEVELS = ("ORT_DISABLE_ALL", "ORT_ENABLE_ALL")


def ort_optimized(model: bytes, path):
    """(ONNX Runtime CPU session at its default optimisation, the graph it optimized to) for ``model``
    (bytes); the optimized model is written to ``path``."""
    import onnx
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.optimized_model_filepath = str(path)
    sess = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    return sess, onnx.load(str(path)).graph


def ort_output(model, feeds: dict, level: str):
    """ONNX Runtime CPU's first output of ``model`` (ModelProto or bytes) at GraphOptimizationLevel ``level``."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    so.log_severity_level = 3
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def ort_at_levels(model, feeds: dict) -> dict:
    """{level: first output} with ORT's graph optimisations off and at its default, ORT_ENABLE_ALL."""
    return {level: ort_output(model, feeds, level) for level in ORT_LEVELS}
