"""Opset normalisation: every ONNX node is rewritten to its latest-opset form (OPS.md).

Values that newer opsets take as inputs become constant inputs, legacy ops are renamed
(Upsample -> Resize), coerced-2D Softmax (opset < 13) is expanded, and the ONNX defaults of the
attributes listed in ``DEFAULTS`` are filled in.  ``normalize(node, opset, ctx)`` returns the
list of nodes that replace ``node``.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..errors import ModelError
from ..ir import Node
from .onnx_build import BuildContext, attr_to_input

REDUCE_OPS = ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")
SPATIAL_OPS = ("Conv", "DepthwiseConv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool",
               "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool", "Resize", "DepthToSpace",
               "SpaceToDepth", "BatchNormalization", "InstanceNormalization", "LRN", "MaxUnpool",
               "RoiAlign", "GridSample")

_SELU_ALPHA = 1.67326319217681884765625
_SELU_GAMMA = 1.05070102214813232421875

DEFAULTS: dict[str, dict] = {
    "LeakyRelu": {"alpha": 0.01}, "Elu": {"alpha": 1.0}, "Celu": {"alpha": 1.0},
    "Selu": {"alpha": _SELU_ALPHA, "gamma": _SELU_GAMMA},
    "HardSigmoid": {"alpha": 0.2, "beta": 0.5}, "ThresholdedRelu": {"alpha": 1.0},
    "Gelu": {"approximate": "none"}, "Shrink": {"bias": 0.0, "lambd": 0.5},
    "Gemm": {"alpha": 1.0, "beta": 1.0, "transA": 0, "transB": 0},
    "Softmax": {"axis": -1}, "LogSoftmax": {"axis": -1}, "Hardmax": {"axis": -1},
    "Flatten": {"axis": 1}, "Gather": {"axis": 0}, "GatherElements": {"axis": 0}, "Split": {"axis": 0},
    "ArgMax": {"axis": 0, "keepdims": 1, "select_last_index": 0},
    "ArgMin": {"axis": 0, "keepdims": 1, "select_last_index": 0},
    "BatchNormalization": {"epsilon": 1e-5, "momentum": 0.9, "training_mode": 0},
    "InstanceNormalization": {"epsilon": 1e-5},
    "LayerNormalization": {"axis": -1, "epsilon": 1e-5, "stash_type": 1},
    "LpNormalization": {"axis": -1, "p": 2},
    "LRN": {"alpha": 1e-4, "beta": 0.75, "bias": 1.0},
    "DepthToSpace": {"mode": "DCR"}, "Pad": {"mode": "constant"},
    "Cast": {"saturate": 1}, "Shape": {"start": 0},
    "QuantizeLinear": {"axis": 1, "saturate": 1, "block_size": 0, "output_dtype": 0},
    "DequantizeLinear": {"axis": 1, "block_size": 0},
    "Resize": {"coordinate_transformation_mode": "half_pixel", "cubic_coeff_a": -0.75,
               "exclude_outside": 0, "extrapolation_value": 0.0, "mode": "nearest",
               "nearest_mode": "round_prefer_floor", "antialias": 0, "keep_aspect_ratio_policy": "stretch"},
    "Conv": {"auto_pad": "NOTSET", "group": 1}, "ConvTranspose": {"auto_pad": "NOTSET", "group": 1},
    "DepthwiseConv": {"auto_pad": "NOTSET"},
    "MaxPool": {"auto_pad": "NOTSET", "ceil_mode": 0, "storage_order": 0},
    "AveragePool": {"auto_pad": "NOTSET", "ceil_mode": 0, "count_include_pad": 0},
    "LpPool": {"auto_pad": "NOTSET", "ceil_mode": 0, "p": 2},
    "GlobalLpPool": {"p": 2},
    "CumSum": {"exclusive": 0, "reverse": 0}, "TopK": {"axis": -1, "largest": 1, "sorted": 1},
    "Trilu": {"upper": 1}, "Einsum": {}, "Mod": {"fmod": 0},
}
for _op in REDUCE_OPS:
    DEFAULTS[_op] = {"keepdims": 1, "noop_with_empty_axes": 0}

Rule = Callable[[Node, int, BuildContext], list[Node]]
_RULES: dict[str, Rule] = {}


def rule(*ops: str):
    def deco(fn: Rule) -> Rule:
        for o in ops:
            _RULES[o] = fn
        return fn
    return deco


def normalize(node: Node, opset: int, ctx: BuildContext) -> list[Node]:
    node.attrs.pop("consumed_inputs", None)  # opset <= 6 memory hint, no meaning
    fn = _RULES.get(node.op)
    nodes = fn(node, opset, ctx) if fn else [node]
    for n in nodes:
        for key, value in DEFAULTS.get(n.op, {}).items():
            n.attrs.setdefault(key, value)
        _spatial_defaults(n, ctx)
    return nodes


# -- attribute -> input moves -----------------------------------------------------------------
@rule("Split")
def _split(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 13:
        attr_to_input(n, ctx, "split", 1, "int64")
    return [n]


@rule("Squeeze", "Unsqueeze")
def _squeeze(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 13:
        attr_to_input(n, ctx, "axes", 1, "int64")
    return [n]


@rule(*REDUCE_OPS)
def _reduce(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < (13 if n.op == "ReduceSum" else 18):
        attr_to_input(n, ctx, "axes", 1, "int64")
    return [n]


@rule("GroupNormalization")
def _group_norm(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    """Opsets 18-20 take one scale / bias per group; 21 one per channel: each group's value repeated
    over its C / G channels (the same products: every channel of a group multiplies the same value)."""
    if opset >= 21:
        return [n]
    n.attrs.setdefault("stash_type", 1)
    shape = ctx.shape(n.inputs[0])
    c = shape[1] if shape is not None and len(shape) > 1 else None
    g = int(n.attrs.get("num_groups", 0))
    if not isinstance(c, int) or g <= 0 or c % g:
        raise ModelError(f"node '{n.name}' (GroupNormalization, opset {opset}): per-group scale and bias need "
                         f"a known channel count divisible by num_groups={g} (channels: {c})", ctx.where)
    extra: list[Node] = []
    base = dict(source_op=n.source_op, index=n.index)
    for pos, label in ((1, "scale"), (2, "bias")):
        name = n.inputs[pos]
        value = ctx.const(name)
        dt = ctx.dtype(name)
        if value is not None:
            if value.size != g:
                raise ModelError(f"node '{n.name}' (GroupNormalization, opset {opset}): {label} has "
                                 f"{value.size} values, num_groups is {g}", ctx.where)
            n.inputs[pos] = ctx.add_const(f"{name}:per_channel", np.repeat(value.reshape(-1), c // g), dt)
            continue
        col = ctx.add_tensor(f"{n.name}:{label}_col", (g, 1), dt)
        wide = ctx.add_tensor(f"{n.name}:{label}_wide", (g, c // g), dt)
        out = ctx.add_tensor(f"{n.name}:{label}_per_channel", (c,), dt)
        extra += [Node(f"{n.name}:{label}_col", "Reshape", [name, ctx.add_const("gn_col", [g, 1], "int64")],
                       [col], {"allowzero": 0}, **base),
                  Node(f"{n.name}:{label}_wide", "Expand", [col, ctx.add_const("gn_wide", [g, c // g], "int64")],
                       [wide], {}, **base),
                  Node(f"{n.name}:{label}_per_channel", "Reshape", [wide, ctx.add_const("gn_flat", [c], "int64")],
                       [out], {"allowzero": 0}, **base)]
        n.inputs[pos] = out
    return extra + [n]


@rule("Pad")
def _pad(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 11:
        if "paddings" in n.attrs:
            n.attrs["pads"] = n.attrs.pop("paddings")
        attr_to_input(n, ctx, "pads", 1, "int64")
        if "value" in n.attrs:
            attr_to_input(n, ctx, "value", 2, ctx.dtype(n.inputs[0]))
    return [n]


@rule("Clip")
def _clip(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 11:
        dt = ctx.dtype(n.inputs[0])
        attr_to_input(n, ctx, "min", 1, dt)
        attr_to_input(n, ctx, "max", 2, dt)
    return [n]


@rule("Slice")
def _slice(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 10:
        attr_to_input(n, ctx, "starts", 1, "int64")
        attr_to_input(n, ctx, "ends", 2, "int64")
        attr_to_input(n, ctx, "axes", 3, "int64")
    return [n]


@rule("Reshape")
def _reshape(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 5:
        attr_to_input(n, ctx, "shape", 1, "int64")
    n.attrs.setdefault("allowzero", 0)
    return [n]


@rule("TopK")
def _topk(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 10:
        attr_to_input(n, ctx, "k", 1, "int64")
    return [n]


@rule("Dropout")
def _dropout(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    n.attrs.pop("is_test", None)
    if opset < 12:
        attr_to_input(n, ctx, "ratio", 1, "float32")
    return [n]


@rule("CausalConvWithState")
def _causal_conv(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    """Its own ``activation`` attribute (none / silu / swish) is not refinterp's fused activation."""
    if "activation" in n.attrs:
        n.attrs["conv_activation"] = n.attrs.pop("activation")
    return [n]


@rule("Scatter")
def _scatter(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    """Scatter (deprecated in opset 11) is ScatterElements without a reduction."""
    n.op = "ScatterElements"
    return [n]


@rule("Upsample")
def _upsample(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    # Upsample (and Resize-10) index the input with floor(out_index / scale): asymmetric + floor.
    if "height_scale" in n.attrs:  # Upsample-1
        scales = [1.0, 1.0, n.attrs.pop("height_scale"), n.attrs.pop("width_scale")]
        n.attrs["scales"] = scales
    scales_in = n.inputs[1] if len(n.inputs) > 1 else ""
    n.inputs = [n.inputs[0], ""]
    if scales_in:
        n.inputs.append(scales_in)
    else:
        attr_to_input(n, ctx, "scales", 2, "float32")
    return _resize_legacy(n)


def _resize_legacy(n: Node) -> list[Node]:
    mode = str(n.attrs.pop("mode", "nearest")).lower()
    n.attrs = {"mode": "linear" if mode in ("linear", "bilinear") else mode,
               "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    n.op = "Resize"
    return [n]


@rule("Resize")
def _resize(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 11:
        n.inputs = [n.inputs[0], "", n.inputs[1] if len(n.inputs) > 1 else ""]
        return _resize_legacy(n)
    return [n]


@rule("BatchNormalization")
def _batchnorm(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    n.attrs.pop("is_test", None)
    if n.attrs.pop("spatial", 1) != 1:
        raise ModelError(f"node '{n.name}' (BatchNormalization): spatial=0 (opset < 9) is not supported",
                         ctx.where)
    return [n]


@rule("Gemm")
def _gemm(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    n.attrs.pop("broadcast", None)
    return [n]


@rule("Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")
def _legacy_broadcast(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 7:
        if n.attrs.pop("broadcast", 0) and "axis" in n.attrs:
            axis = int(n.attrs.pop("axis"))
            ra, rb = ctx.rank(n.inputs[0]), ctx.rank(n.inputs[1])
            if ra is None or rb is None:
                raise ModelError(f"node '{n.name}' ({n.op}): legacy broadcast with axis needs known ranks",
                                 ctx.where)
            tail = ra - (axis % ra) - rb
            if tail > 0:  # align b's dims at ``axis``: append trailing unit dims
                axes = ctx.add_const(f"{n.name}:axes", np.arange(rb, rb + tail), "int64")
                b2 = ctx.add_tensor(f"{n.inputs[1]}:aligned", None, ctx.dtype(n.inputs[1]))
                unsq = Node(f"{n.name}:align", "Unsqueeze", [n.inputs[1], axes], [b2], {},
                            n.source_op, n.index)
                n.inputs[1] = b2
                return [unsq, n]
        n.attrs.pop("axis", None)
    return [n]


@rule("Softmax", "LogSoftmax", "Hardmax")
def _softmax(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset >= 13:
        return [n]
    # Opsets < 13 flatten to 2-D at ``axis`` and normalise over everything after it.
    axis = int(n.attrs.get("axis", 1))
    x, y = n.inputs[0], n.outputs[0]
    rank = ctx.rank(x)
    if rank is not None and axis % max(rank, 1) == rank - 1:
        n.attrs["axis"] = -1
        return [n]
    if rank is not None:
        axis %= max(rank, 1)
    dt = ctx.dtype(x)
    shp = ctx.add_tensor(f"{n.name}:shape", (rank,) if rank is not None else (None,), "int64")
    flat = ctx.add_tensor(f"{n.name}:flat", (None, None), dt)
    flat_out = ctx.add_tensor(f"{n.name}:2d", (None, None), dt)
    base = dict(source_op=n.source_op, index=n.index)
    return [Node(f"{n.name}:shape", "Shape", [x], [shp], {"start": 0}, **base),
            Node(f"{n.name}:flatten", "Flatten", [x], [flat], {"axis": axis}, **base),
            Node(n.name, n.op, [flat], [flat_out], {"axis": -1}, **base),
            Node(f"{n.name}:reshape", "Reshape", [flat_out, shp], [y], {"allowzero": 0}, **base)]


@rule("Cast")
def _cast(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    to = n.attrs.get("to")
    if isinstance(to, str):  # Cast-1 names the type
        from onnx import TensorProto  # loaders may import onnx

        n.attrs["to"] = int(TensorProto.DataType.Value(to.upper()))
    return [n]


# -- conv / pool geometry ---------------------------------------------------------------------
def _spatial_rank(n: Node, ctx: BuildContext) -> int | None:
    if "kernel_shape" in n.attrs:
        return len(n.attrs["kernel_shape"])
    if n.op in ("Conv", "ConvTranspose", "DepthwiseConv") and len(n.inputs) > 1:
        ws = ctx.shape(n.inputs[1])
        if ws is not None and len(ws) >= 2:
            if all(d is not None for d in ws[2:]):
                n.attrs["kernel_shape"] = [int(d) for d in ws[2:]]
            return len(ws) - 2
    xs = ctx.shape(n.inputs[0]) if n.inputs else None
    return len(xs) - 2 if xs is not None and len(xs) >= 2 else None


def _spatial_defaults(n: Node, ctx: BuildContext) -> None:
    if n.op not in SPATIAL_OPS:
        return
    n.attrs.setdefault("layout", "NCHW")
    if n.op in ("Conv", "DepthwiseConv", "ConvTranspose"):
        # "OIHW" names ONNX's native filter layout; for ConvTranspose that is [C_in, C_out/group, k...]
        # (the ConvTranspose kernel reads it so).
        n.attrs.setdefault("weight_layout", "OIHW")
    if n.op not in ("Conv", "DepthwiseConv", "ConvTranspose", "MaxPool", "AveragePool", "LpPool"):
        return
    k = _spatial_rank(n, ctx)
    if k is None:
        return
    n.attrs.setdefault("strides", [1] * k)
    if n.op != "LpPool":
        n.attrs.setdefault("dilations", [1] * k)
    if n.attrs.get("auto_pad", "NOTSET") == "NOTSET":
        n.attrs.setdefault("pads", [0] * (2 * k))
    if n.op == "ConvTranspose":
        n.attrs.setdefault("output_padding", [0] * k)


@rule("Conv")
def _conv(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    """Conv with one input channel per group (C_in/group == 1, group > 1) is a DepthwiseConv."""
    group = int(n.attrs.get("group", 1))
    ws = ctx.shape(n.inputs[1]) if len(n.inputs) > 1 else None
    if group > 1 and ws is not None and len(ws) >= 2 and ws[1] == 1 and ws[0] is not None:
        if ws[0] % group:
            raise ModelError(f"node '{n.name}' (Conv): {ws[0]} output channels not divisible by "
                             f"group {group}", ctx.where)
        n.op = "DepthwiseConv"
        n.attrs["group"] = group
        n.attrs["depth_multiplier"] = ws[0] // group
    return [n]


@rule("Scan")
def _scan(n: Node, opset: int, ctx: BuildContext) -> list[Node]:
    if opset < 9:  # opset 8: optional sequence_lens input, batch axis 0 on states and sequences
        n.attrs["batch_major"] = 1
    return [n]
