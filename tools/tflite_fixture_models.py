"""Keras builders for the converter-made TFLite test fixtures (dev tool; needs tensorflow).

Used only by tools/make_tflite_fixtures.py. Every builder seeds Keras itself, so each model is
reproducible on its own regardless of build order. Weights are random (no training, no download);
BatchNorm statistics are randomised so the folded conv weights/biases are not trivial.
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf
import keras
from keras import layers


def seed_everything(seed: int) -> None:
    keras.utils.set_random_seed(seed)


def randomise_batchnorm(model: keras.Model, seed: int) -> None:
    """Give every BatchNormalization layer non-trivial gamma/beta/mean/variance."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if isinstance(layer, layers.BatchNormalization):
            gamma, beta, mean, var = layer.get_weights()
            n = gamma.shape
            layer.set_weights([
                rng.uniform(0.6, 1.4, n).astype(np.float32),
                rng.normal(0.0, 0.1, n).astype(np.float32),
                rng.normal(0.0, 0.1, n).astype(np.float32),
                rng.uniform(0.6, 1.4, n).astype(np.float32),
            ])


def scale_kernel(model: keras.Model, layer_name: str, factor: float) -> None:
    """Scale one layer's kernel so random-weight logits are spread out (a non-flat softmax)."""
    layer = model.get_layer(layer_name)
    weights = layer.get_weights()
    layer.set_weights([weights[0] * np.float32(factor)] + weights[1:])


# --------------------------------------------------------------------------- MobileNetV2-style

def _conv_bn(x, filters, kernel, stride, act, name):
    x = layers.Conv2D(filters, kernel, strides=stride, padding="same", use_bias=False,
                      name=f"{name}_conv")(x)
    x = layers.BatchNormalization(name=f"{name}_bn")(x)
    return act(x, name)


def _relu6(x, name):
    return layers.ReLU(6.0, name=f"{name}_relu6")(x)


def _inverted_residual(x, expansion, out_ch, stride, name, act=_relu6, se=None):
    in_ch = x.shape[-1]
    y = x
    if expansion != 1:
        y = _conv_bn(y, in_ch * expansion, 1, 1, act, f"{name}_expand")
    y = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False,
                               name=f"{name}_dw")(y)
    y = layers.BatchNormalization(name=f"{name}_dw_bn")(y)
    y = act(y, f"{name}_dw")
    if se is not None:
        y = se(y, f"{name}_se")
    y = layers.Conv2D(out_ch, 1, use_bias=False, name=f"{name}_project")(y)
    y = layers.BatchNormalization(name=f"{name}_project_bn")(y)
    if stride == 1 and in_ch == out_ch:
        y = layers.Add(name=f"{name}_add")([x, y])
    return y


def mobilenet_v2_tiny(input_hw: int = 64, alpha: float = 0.35, classes: int = 10) -> keras.Model:
    """Inverted residuals (expand 1x1 -> depthwise 3x3 -> project 1x1), ReLU6, ADD skips."""
    seed_everything(1)

    def ch(c):
        return max(8, int(round(c * alpha / 8)) * 8)

    inp = keras.Input((input_hw, input_hw, 3), batch_size=1, name="input")
    x = _conv_bn(inp, ch(32), 3, 2, _relu6, "stem")
    x = _inverted_residual(x, 1, ch(16), 1, "b1")
    x = _inverted_residual(x, 6, ch(24), 2, "b2")
    x = _inverted_residual(x, 6, ch(24), 1, "b3")
    x = _inverted_residual(x, 6, ch(32), 2, "b4")
    x = _inverted_residual(x, 6, ch(32), 1, "b5")
    x = _inverted_residual(x, 6, ch(64), 2, "b6")
    x = _inverted_residual(x, 6, ch(64), 1, "b7")
    x = _inverted_residual(x, 6, ch(96), 1, "b8")
    x = _conv_bn(x, 256, 1, 1, _relu6, "head")
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(classes, name="logits")(x)
    out = layers.Softmax(name="probs")(x)
    model = keras.Model(inp, out, name="mobilenet_v2_tiny")
    randomise_batchnorm(model, 101)
    scale_kernel(model, "logits", 6.0)
    return model


# --------------------------------------------------------------------------- MobileNetV3-style

def _hard_swish(x, name):
    # x * relu6(x + 3) / 6: the converter fuses this pattern into HARD_SWISH.
    return layers.Activation(keras.activations.hard_swish, name=f"{name}_hswish")(x)


def _relu(x, name):
    return layers.ReLU(name=f"{name}_relu")(x)


def _squeeze_excite(gate: str):
    def apply(x, name):
        c = x.shape[-1]
        s = layers.GlobalAveragePooling2D(keepdims=True, name=f"{name}_pool")(x)
        s = layers.Conv2D(max(8, c // 4), 1, activation="relu", name=f"{name}_reduce")(s)
        s = layers.Conv2D(c, 1, name=f"{name}_expand")(s)
        if gate == "sigmoid":
            s = layers.Activation("sigmoid", name=f"{name}_sigmoid")(s)
        else:
            # keras hard_sigmoid is relu6(x + 3) / 6
            s = layers.Activation("hard_sigmoid", name=f"{name}_hsigmoid")(s)
        return layers.Multiply(name=f"{name}_mul")([x, s])
    return apply


def mobilenet_v3_tiny(input_hw: int = 64, classes: int = 10) -> keras.Model:
    """Hard-swish activations, squeeze-excite gates (one sigmoid, one hard-sigmoid)."""
    seed_everything(2)
    inp = keras.Input((input_hw, input_hw, 3), batch_size=1, name="input")
    x = _conv_bn(inp, 16, 3, 2, _hard_swish, "stem")
    x = _inverted_residual(x, 1, 16, 2, "b1", act=_relu, se=_squeeze_excite("hard_sigmoid"))
    x = _inverted_residual(x, 4, 24, 2, "b2", act=_relu)
    x = _inverted_residual(x, 3, 24, 1, "b3", act=_relu)
    x = _inverted_residual(x, 4, 40, 2, "b4", act=_hard_swish, se=_squeeze_excite("sigmoid"))
    x = _inverted_residual(x, 3, 40, 1, "b5", act=_hard_swish, se=_squeeze_excite("hard_sigmoid"))
    x = _conv_bn(x, 192, 1, 1, _hard_swish, "head")
    x = layers.GlobalAveragePooling2D(keepdims=True, name="gap")(x)
    x = layers.Conv2D(256, 1, name="pre_logits")(x)
    x = _hard_swish(x, "pre_logits")
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(classes, name="logits")(x)
    out = layers.Softmax(name="probs")(x)
    model = keras.Model(inp, out, name="mobilenet_v3_tiny")
    randomise_batchnorm(model, 102)
    scale_kernel(model, "logits", 6.0)
    return model


# --------------------------------------------------------------------------- attention block

def attention_block(seq: int = 16, dim: int = 32, heads: int = 2) -> keras.Model:
    """Pre-LN transformer block: LN, Q/K/V dense, batch matmul, softmax, out proj, LN, GELU MLP."""
    seed_everything(3)
    head_dim = dim // heads
    inp = keras.Input((seq, dim), batch_size=1, name="input")

    def split_heads(t, name):
        t = layers.Reshape((seq, heads, head_dim), name=f"{name}_reshape")(t)
        return layers.Permute((2, 1, 3), name=f"{name}_transpose")(t)

    h = layers.LayerNormalization(epsilon=1e-5, name="ln1")(inp)
    q = split_heads(layers.Dense(dim, name="q")(h), "q")
    k = split_heads(layers.Dense(dim, name="k")(h), "k")
    v = split_heads(layers.Dense(dim, name="v")(h), "v")
    scores = layers.Lambda(
        lambda qk: keras.ops.matmul(qk[0], keras.ops.transpose(qk[1], (0, 1, 3, 2)))
        * (1.0 / float(np.sqrt(head_dim))), name="scores")([q, k])
    probs = layers.Softmax(axis=-1, name="attn_softmax")(scores)
    ctx = layers.Lambda(lambda pv: keras.ops.matmul(pv[0], pv[1]), name="context")([probs, v])
    ctx = layers.Permute((2, 1, 3), name="merge_transpose")(ctx)
    ctx = layers.Reshape((seq, dim), name="merge_reshape")(ctx)
    x = layers.Add(name="res1")([inp, layers.Dense(dim, name="out_proj")(ctx)])
    h = layers.LayerNormalization(epsilon=1e-5, name="ln2")(x)
    h = layers.Dense(dim * 2, activation="gelu", name="mlp_up")(h)
    h = layers.Dense(dim, name="mlp_down")(h)
    out = layers.Add(name="res2")([x, h])
    return keras.Model(inp, out, name="attention_block")


# --------------------------------------------------------------------------- ops zoo

def ops_zoo() -> keras.Model:
    """A grab-bag of shape, resize, pooling, elementwise and activation ops on one 16x16x8 map."""
    seed_everything(4)
    ops = keras.ops
    inp = keras.Input((16, 16, 4), batch_size=1, name="input")
    x = layers.Conv2D(8, 3, padding="same", name="conv_in")(inp)

    # spatial: resize, pool, pad, slicing (DEPTH_TO_SPACE lives in depth_space(): BUILTIN_REF
    # cannot load its int8 version, and this model should run on every LiteRT resolver)
    up_bl = layers.Resizing(24, 24, interpolation="bilinear", name="resize_bilinear")(x)
    up_nn = layers.Resizing(32, 32, interpolation="nearest", name="resize_nearest")(x)
    down = layers.MaxPooling2D(2, name="maxpool")(up_nn)                       # 16x16
    down = layers.AveragePooling2D(3, strides=1, padding="same", name="avgpool")(down)
    padded = layers.ZeroPadding2D(((1, 1), (2, 2)), name="pad")(down)             # 18x20
    sliced = layers.Lambda(lambda t: t[:, 1:17:2, 2:18:2, :], name="strided_slice")(padded)
    branch = layers.Conv2D(16, 3, strides=2, padding="same", name="conv_s2")(x)  # 8x8x16
    halves = layers.Lambda(lambda t: tf.split(t, 2, axis=-1), name="split")(branch)
    bl_down = layers.Resizing(8, 8, interpolation="bilinear", name="resize_bilinear_down")(up_bl)

    # elementwise / activations at 8x8
    a = layers.LeakyReLU(negative_slope=0.2, name="leaky_relu")(sliced)
    b = layers.Activation("tanh", name="tanh")(halves[0])
    c = layers.Activation("sigmoid", name="logistic")(bl_down)
    diff = layers.Subtract(name="sub")([a, b])
    prod = layers.Multiply(name="mul")([diff, c])
    sqd = layers.Lambda(lambda t: tf.math.squared_difference(t[0], t[1]),
                        name="squared_difference")([a, c])
    mx = layers.Maximum(name="maximum")([prod, sqd])
    mn = layers.Minimum(name="minimum")([prod, sqd])
    cat = layers.Concatenate(axis=-1, name="concat")([mx, mn, halves[1]])

    # shape ops + reductions
    t = layers.Permute((3, 1, 2), name="transpose")(cat)          # 1x24x8x8
    t = layers.Reshape((24, 64), name="reshape")(t)
    mean = layers.Lambda(lambda u: ops.mean(u, axis=-1, keepdims=True), name="mean")(t)
    centered = layers.Subtract(name="center")([t, mean])
    out = layers.Dense(16, name="fc")(layers.Flatten(name="flatten")(centered))
    return keras.Model(inp, out, name="ops_zoo")


def depth_space() -> keras.Model:
    """DEPTH_TO_SPACE / SPACE_TO_DEPTH between convs (kept apart from ops_zoo, see there)."""
    seed_everything(6)
    inp = keras.Input((8, 8, 16), batch_size=1, name="input")
    x = layers.Conv2D(16, 1, name="conv_a")(inp)
    x = layers.Lambda(lambda t: tf.nn.depth_to_space(t, 2), name="depth_to_space")(x)  # 16x16x4
    x = layers.Conv2D(8, 3, padding="same", activation="relu", name="conv_b")(x)
    x = layers.Lambda(lambda t: tf.nn.space_to_depth(t, 2), name="space_to_depth")(x)  # 8x8x32
    out = layers.Conv2D(8, 1, name="conv_c")(x)
    return keras.Model(inp, out, name="depth_space")


# --------------------------------------------------------------------------- small float CNN

def small_cnn(classes: int = 10) -> keras.Model:
    """Conv/pool/dense CNN; weights exceed 1024 elements so dynamic-range quantises them."""
    seed_everything(5)
    inp = keras.Input((32, 32, 3), batch_size=1, name="input")
    x = layers.Conv2D(16, 3, padding="same", activation="relu", name="conv1")(inp)
    x = layers.MaxPooling2D(2, name="pool1")(x)
    x = layers.Conv2D(32, 3, padding="same", activation="relu", name="conv2")(x)
    x = layers.MaxPooling2D(2, name="pool2")(x)
    x = layers.DepthwiseConv2D(3, padding="same", activation="relu6", name="dw3")(x)
    x = layers.Conv2D(48, 1, activation="relu", name="pw3")(x)
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(64, activation="relu", name="fc1")(x)
    x = layers.Dense(classes, name="logits")(x)
    out = layers.Softmax(name="probs")(x)
    model = keras.Model(inp, out, name="small_cnn")
    scale_kernel(model, "logits", 6.0)
    return model


# --------------------------------------------------------------------------- MobileNetV1-style

def mobilenet_v1_tiny(input_hw: int = 64, classes: int = 10) -> keras.Model:
    """Plain stacks: conv 3x3/2, then depthwise 3x3 + pointwise 1x1 pairs, all BN + ReLU6;
    a full-map AveragePooling2D (AVERAGE_POOL_2D, not MEAN), flatten, dense, softmax."""
    seed_everything(7)
    inp = keras.Input((input_hw, input_hw, 3), batch_size=1, name="input")
    x = _conv_bn(inp, 16, 3, 2, _relu6, "stem")                                # 32x32
    for i, (out_ch, stride) in enumerate([(24, 1), (32, 2), (32, 1), (48, 2), (64, 2), (64, 1)]):
        name = f"b{i + 1}"
        x = layers.DepthwiseConv2D(3, strides=stride, padding="same", use_bias=False,
                                   name=f"{name}_dw")(x)
        x = layers.BatchNormalization(name=f"{name}_dw_bn")(x)
        x = _relu6(x, f"{name}_dw")
        x = _conv_bn(x, out_ch, 1, 1, _relu6, f"{name}_pw")                    # ends 4x4x64
    x = layers.AveragePooling2D(pool_size=x.shape[1], name="avgpool")(x)
    x = layers.Flatten(name="flatten")(x)
    x = layers.Dense(classes, name="logits")(x)
    out = layers.Softmax(name="probs")(x)
    model = keras.Model(inp, out, name="mobilenet_v1_tiny")
    randomise_batchnorm(model, 107)
    scale_kernel(model, "logits", 6.0)
    return model


# --------------------------------------------------------------------------- EfficientNet-style

def _swish(x, name):
    # written out as x * sigmoid(x) so the converter emits LOGISTIC + MUL (no fused op)
    s = layers.Activation("sigmoid", name=f"{name}_sigmoid")(x)
    return layers.Multiply(name=f"{name}_swish")([x, s])


def _se_swish(x, name):
    c = x.shape[-1]
    s = layers.GlobalAveragePooling2D(keepdims=True, name=f"{name}_pool")(x)
    s = layers.Conv2D(max(4, c // 4), 1, name=f"{name}_reduce")(s)
    s = _swish(s, f"{name}_reduce")
    s = layers.Conv2D(c, 1, activation="sigmoid", name=f"{name}_expand")(s)
    return layers.Multiply(name=f"{name}_scale")([x, s])


def efficientnet_tiny(input_hw: int = 64, classes: int = 10) -> keras.Model:
    """MBConv blocks: swish (LOGISTIC + MUL) everywhere, sigmoid squeeze-excite, ADD skips."""
    seed_everything(8)
    inp = keras.Input((input_hw, input_hw, 3), batch_size=1, name="input")
    x = _conv_bn(inp, 16, 3, 2, _swish, "stem")                                # 32x32
    x = _inverted_residual(x, 1, 16, 1, "b1", act=_swish, se=_se_swish)
    x = _inverted_residual(x, 4, 24, 2, "b2", act=_swish, se=_se_swish)
    x = _inverted_residual(x, 4, 24, 1, "b3", act=_swish, se=_se_swish)
    x = _inverted_residual(x, 4, 40, 2, "b4", act=_swish, se=_se_swish)
    x = _inverted_residual(x, 4, 40, 1, "b5", act=_swish, se=_se_swish)
    x = _conv_bn(x, 128, 1, 1, _swish, "head")
    x = layers.GlobalAveragePooling2D(name="gap")(x)
    x = layers.Dense(classes, name="logits")(x)
    out = layers.Softmax(name="probs")(x)
    model = keras.Model(inp, out, name="efficientnet_tiny")
    randomise_batchnorm(model, 108)
    scale_kernel(model, "logits", 6.0)
    return model
