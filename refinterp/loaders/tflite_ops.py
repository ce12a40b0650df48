"""TFLite builtin operator -> canonical op (see ``refinterp/kernels/OPS.md``).

``convert(name, ctx)`` returns ``(canonical op, inputs, attrs)``.  ``ctx`` (an ``OpContext``) gives
the decoded options (snake_case field names of the op's ``*Options`` table), the input / output
tensor names, shapes and constant values, and ``new_const`` to add a derived constant (used where
TFLite and ONNX put the same information in different forms, e.g. PAD's ``[rank, 2]`` paddings vs
ONNX's flat ``pads``).  Builtins without an entry load as ``"TFLite:<NAME>"``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from ..errors import UnsupportedOpError

ACTIVATIONS = {0: None, 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}
_PADDING = {0: "SAME_UPPER", 1: "VALID"}  # TFLite SAME puts the odd cell at the end
INT64_MAX = np.iinfo(np.int64).max


# -- option decoding -------------------------------------------------------------------------------
_ACCESSOR_SKIP = re.compile(r"^(Init|GetRootAs.*|.*BufferHasIdentifier|.*AsNumpy|.*Length|.*IsNone)$")


def _snake(name: str) -> str:
    # DilationWFactor -> dilation_w_factor, StrideW -> stride_w, PotScaleInt16 -> pot_scale_int16
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def decode_options(table_cls: type, tab: Any) -> dict[str, Any]:
    """Every scalar, string and numeric-vector field of an options table, keyed in snake_case."""
    obj = table_cls()
    obj.Init(tab.Bytes, tab.Pos)
    out: dict[str, Any] = {}
    for attr in dir(table_cls):
        if attr.startswith("_") or _ACCESSOR_SKIP.match(attr):
            continue
        fn = getattr(obj, attr)
        if not callable(fn):
            continue
        if hasattr(obj, attr + "Length"):
            if getattr(obj, attr + "IsNone")():
                out[_snake(attr)] = []
            else:
                out[_snake(attr)] = [int(v) for v in np.asarray(getattr(obj, attr + "AsNumpy")()).ravel()]
            continue
        try:
            v = fn()
        except TypeError:  # accessor that needs arguments (nested tables): not used by any mapped op
            continue
        if isinstance(v, (bool, int, float, np.integer, np.floating)):
            out[_snake(attr)] = v.item() if isinstance(v, np.generic) else v
        elif isinstance(v, (bytes, bytearray)):  # string fields (VarHandleOptions shared_name)
            out[_snake(attr)] = v.decode("utf-8", errors="replace")
    return out


# -- conversion context ----------------------------------------------------------------------------
@dataclass
class OpContext:
    name: str  # TFLite builtin name, for messages
    node: str  # node name
    opts: dict[str, Any]
    inputs: list[str]
    outputs: list[str]
    shape_of: Callable[[str], tuple | None]
    const_of: Callable[[str], np.ndarray | None]
    new_const: Callable[[str, np.ndarray], str]  # (role, value) -> tensor name
    where: str

    def opt(self, key: str, default: Any = None) -> Any:
        return self.opts.get(key, default)

    def shape(self, i: int) -> tuple | None:
        return self.shape_of(self.inputs[i]) if i < len(self.inputs) and self.inputs[i] else None

    def const(self, i: int) -> np.ndarray | None:
        return self.const_of(self.inputs[i]) if i < len(self.inputs) and self.inputs[i] else None

    def need_const(self, i: int, what: str) -> np.ndarray:
        v = self.const(i)
        if v is None:
            raise UnsupportedOpError(f"{self.name} node '{self.node}' with a computed {what} input "
                                     f"is not supported (it must be a constant)", self.where)
        return v

    def activation(self) -> str | None:
        code = int(self.opts.get("fused_activation_function", 0))
        if code not in ACTIVATIONS:
            raise UnsupportedOpError(f"{self.name} node '{self.node}': unknown fused activation {code}", self.where)
        return ACTIVATIONS[code]

    def padding(self) -> str:
        code = int(self.opts.get("padding", 0))
        if code not in _PADDING:
            raise UnsupportedOpError(f"{self.name} node '{self.node}': unknown padding {code}", self.where)
        return _PADDING[code]


Result = tuple[str, list[str], dict[str, Any]]


def _hw(ctx: OpContext, h: str, w: str, default: int = 1) -> list[int]:
    return [int(ctx.opt(h, default) or default), int(ctx.opt(w, default) or default)]


def _spatial(ctx: OpContext, layout_extra: dict) -> dict[str, Any]:
    a = {"layout": "NHWC", "auto_pad": ctx.padding(), "strides": _hw(ctx, "stride_h", "stride_w"),
         "activation": ctx.activation()}
    a.update(layout_extra)
    return a


def _conv(ctx: OpContext) -> Result:
    w = ctx.shape(1)
    x = ctx.shape(0)
    a = _spatial(ctx, {"weight_layout": "OHWI",
                       "dilations": _hw(ctx, "dilation_h_factor", "dilation_w_factor")})
    if w is not None and len(w) == 4 and None not in w[1:3]:
        a["kernel_shape"] = [int(w[1]), int(w[2])]
    group = 1
    if x and w and x[-1] and w[-1]:
        if x[-1] % w[-1]:
            raise UnsupportedOpError(f"CONV_2D node '{ctx.node}': input channels {x[-1]} not a multiple "
                                     f"of filter channels {w[-1]}", ctx.where)
        group = int(x[-1] // w[-1])
    a["group"] = group
    return "Conv", list(ctx.inputs), a


def _depthwise(ctx: OpContext) -> Result:
    w = ctx.shape(1)
    x = ctx.shape(0)
    a = _spatial(ctx, {"weight_layout": "1HWO",
                       "dilations": _hw(ctx, "dilation_h_factor", "dilation_w_factor")})
    if w is not None and len(w) == 4:
        a["kernel_shape"] = [int(w[1]), int(w[2])]
    cin = int(x[-1]) if x and x[-1] else None
    mult = int(ctx.opt("depth_multiplier", 0) or 0)
    if cin and w and w[-1]:
        mult = int(w[-1]) // cin  # the filter shape is authoritative (LiteRT ignores a stale option)
    a["group"] = cin
    a["depth_multiplier"] = mult or 1
    return "DepthwiseConv", list(ctx.inputs), a


def _transpose_conv(ctx: OpContext) -> Result:
    """output_shape is normally a constant.  Computed (per-layer extractions feed it as a graph input):
    the output tensor's declared static shape gives the geometry, and the run-time value stays a fourth
    input the kernel checks against it."""
    out_shape = ctx.const(0)
    runtime = []
    if out_shape is None:
        declared = ctx.shape_of(ctx.outputs[0]) if ctx.outputs else None
        if declared is None or len(declared) != 4 or any(d is None or d < 0 for d in declared):
            ctx.need_const(0, "output_shape")  # raises: no static output shape to fall back on
        out_shape = np.asarray(declared)
        runtime = [ctx.inputs[0]]
    w = ctx.shape(1)
    a = _spatial(ctx, {"weight_layout": "OHWI", "dilations": [1, 1], "group": 1,
                       "output_shape": [int(v) for v in np.asarray(out_shape).ravel()[1:3]]})
    if runtime:
        a["declared_output"] = [int(v) for v in np.asarray(out_shape).ravel()]
    if w is not None and len(w) == 4:
        a["kernel_shape"] = [int(w[1]), int(w[2])]
    bias = ctx.inputs[3] if len(ctx.inputs) > 3 else ""
    return "ConvTranspose", [ctx.inputs[2], ctx.inputs[1], bias] + runtime, a


def _pool(op: str) -> Callable[[OpContext], Result]:
    def conv(ctx: OpContext) -> Result:
        a = _spatial(ctx, {"kernel_shape": _hw(ctx, "filter_height", "filter_width")})
        if op == "AveragePool":
            a["count_include_pad"] = 0
        if op == "LpPool":  # TFLite L2_POOL_2D: sqrt of the MEAN of squares over the in-bounds cells
            a["p"] = 2
            a["mean"] = 1
        return op, list(ctx.inputs), a
    return conv


def _fc(ctx: OpContext) -> Result:
    if int(ctx.opt("weights_format", 0)) != 0:
        raise UnsupportedOpError(f"FULLY_CONNECTED node '{ctx.node}': shuffled weights format is not "
                                 f"supported", ctx.where)
    return "FullyConnected", list(ctx.inputs), {"keep_num_dims": bool(ctx.opt("keep_num_dims", False)),
                                                "activation": ctx.activation(),
                                                # dynamic-range (float input, int8 filter) kernels only
                                                "asymmetric_quantize_inputs":
                                                    bool(ctx.opt("asymmetric_quantize_inputs", False))}


def _with_act(op: str, **extra: Any) -> Callable[[OpContext], Result]:
    def conv(ctx: OpContext) -> Result:
        a = {"activation": ctx.activation()}
        for k, v in extra.items():
            a[k] = ctx.opt(k, v) if not callable(v) else v(ctx)
        return op, list(ctx.inputs), a
    return conv


def _plain(op: str, **attrs: Any) -> Callable[[OpContext], Result]:
    def conv(ctx: OpContext) -> Result:
        return op, list(ctx.inputs), dict(attrs)
    return conv


def _reduce(op: str) -> Callable[[OpContext], Result]:
    def conv(ctx: OpContext) -> Result:
        return op, list(ctx.inputs), {"keepdims": int(bool(ctx.opt("keep_dims", False))),
                                      "noop_with_empty_axes": 0}
    return conv


def _softmax(ctx: OpContext) -> Result:
    return "Softmax", list(ctx.inputs), {"axis": -1, "beta": float(ctx.opt("beta", 1.0))}


def _resize(linear: bool) -> Callable[[OpContext], Result]:
    def conv(ctx: OpContext) -> Result:
        ac, hp = bool(ctx.opt("align_corners", False)), bool(ctx.opt("half_pixel_centers", False))
        if ac and hp:
            raise UnsupportedOpError(f"{ctx.name} node '{ctx.node}': align_corners and half_pixel_centers "
                                     f"both set", ctx.where)
        a: dict[str, Any] = {"layout": "NHWC", "axes": [1, 2], "mode": "linear" if linear else "nearest",
                             "align_corners": ac, "half_pixel_centers": hp}
        if ac:
            a["coordinate_transformation_mode"] = "align_corners"
        elif hp:
            a["coordinate_transformation_mode"] = "half_pixel" if linear else "tf_half_pixel_for_nn"
        else:
            a["coordinate_transformation_mode"] = "asymmetric"
        if not linear:
            a["nearest_mode"] = "round_prefer_ceil" if ac else "floor"
        return "Resize", [ctx.inputs[0], "", "", ctx.inputs[1]], a
    return conv


def _pad(ctx: OpContext) -> Result:
    p = np.asarray(ctx.need_const(1, "paddings"), dtype=np.int64).reshape(-1, 2)
    pads = ctx.new_const("pads", np.concatenate([p[:, 0], p[:, 1]]).astype(np.int64))
    ins = [ctx.inputs[0], pads]
    if len(ctx.inputs) > 2 and ctx.inputs[2]:
        ins.append(ctx.inputs[2])
    return "Pad", ins, {"mode": "constant"}


def _mirror_pad(ctx: OpContext) -> Result:
    op, ins, _ = _pad(ctx)
    mode = int(ctx.opt("mode", 0))
    if mode != 0:
        raise UnsupportedOpError(f"MIRROR_PAD node '{ctx.node}': SYMMETRIC mode is not supported", ctx.where)
    return op, ins, {"mode": "reflect"}


def _reshape(ctx: OpContext) -> Result:
    if len(ctx.inputs) > 1 and ctx.inputs[1]:
        return "Reshape", ctx.inputs[:2], {"allowzero": 1}
    shape = ctx.opt("new_shape") or []
    if not shape:
        out = ctx.shape_of(ctx.outputs[0])
        if out is None or None in out:
            raise UnsupportedOpError(f"RESHAPE node '{ctx.node}' has no shape input, no new_shape option "
                                     f"and a dynamic output shape", ctx.where)
        shape = list(out)
    return "Reshape", [ctx.inputs[0], ctx.new_const("shape", np.asarray(shape, np.int64))], {"allowzero": 1}


def _transpose(ctx: OpContext) -> Result:
    perm = ctx.need_const(1, "perm")
    return "Transpose", [ctx.inputs[0]], {"perm": [int(v) for v in np.asarray(perm).ravel()]}


def _space_depth(op: str) -> Callable[[OpContext], Result]:
    def conv(ctx: OpContext) -> Result:
        a: dict[str, Any] = {"blocksize": int(ctx.opt("block_size", 0)), "layout": "NHWC"}
        if op == "DepthToSpace":
            a["mode"] = "DCR"  # NHWC depth index = (row_in_block * bs + col_in_block) * C_out + c
        return op, list(ctx.inputs), a
    return conv


def _strided_slice(ctx: OpContext) -> Result:
    keys = ("begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")
    a: dict[str, Any] = {k: int(ctx.opt(k, 0)) for k in keys}
    a["offset"] = bool(ctx.opt("offset", False))
    return "StridedSlice", list(ctx.inputs), a


def _slice(ctx: OpContext) -> Result:
    begin = np.asarray(ctx.need_const(1, "begin"), np.int64).ravel()
    size = np.asarray(ctx.need_const(2, "size"), np.int64).ravel()
    end = np.where(size < 0, INT64_MAX, begin + size)
    return "Slice", [ctx.inputs[0], ctx.new_const("starts", begin), ctx.new_const("ends", end)], {}


def _concat(ctx: OpContext) -> Result:
    return "Concat", list(ctx.inputs), {"axis": int(ctx.opt("axis", 0)), "activation": ctx.activation()}


def _split(ctx: OpContext) -> Result:
    axis = int(np.asarray(ctx.need_const(0, "axis")).ravel()[0])
    return "Split", [ctx.inputs[1]], {"axis": axis, "num_outputs": len(ctx.outputs)}


def _split_v(ctx: OpContext) -> Result:
    axis = int(np.asarray(ctx.need_const(2, "axis")).ravel()[0])
    sizes = np.asarray(ctx.need_const(1, "size_splits"), np.int64).ravel()
    if (sizes < 0).any():
        shape = ctx.shape(0)
        if shape is None or shape[axis] is None:
            raise UnsupportedOpError(f"SPLIT_V node '{ctx.node}': -1 split with unknown input size", ctx.where)
        sizes = sizes.copy()
        sizes[sizes < 0] = int(shape[axis]) - int(sizes[sizes >= 0].sum())
    return "Split", [ctx.inputs[0], ctx.new_const("split", sizes)], {"axis": axis}


def _squeeze(ctx: OpContext) -> Result:
    dims = ctx.opt("squeeze_dims") or []
    if not dims:
        return "Squeeze", [ctx.inputs[0]], {}
    return "Squeeze", [ctx.inputs[0], ctx.new_const("axes", np.asarray(dims, np.int64))], {}


def _arg(op: str) -> Callable[[OpContext], Result]:
    def conv(ctx: OpContext) -> Result:
        axis = int(np.asarray(ctx.need_const(1, "axis")).ravel()[0])
        return op, [ctx.inputs[0]], {"axis": axis, "keepdims": 0, "select_last_index": 0}
    return conv


def _gather(ctx: OpContext) -> Result:
    if int(ctx.opt("batch_dims", 0)):
        raise UnsupportedOpError(f"GATHER node '{ctx.node}' with batch_dims is not supported", ctx.where)
    return "Gather", list(ctx.inputs), {"axis": int(ctx.opt("axis", 0))}


def _lrn(ctx: OpContext) -> Result:
    size = 2 * int(ctx.opt("radius", 0)) + 1
    # ONNX divides alpha by size; TFLite does not.
    return "LRN", list(ctx.inputs), {"size": size, "alpha": float(ctx.opt("alpha", 0.0)) * size,
                                     "beta": float(ctx.opt("beta", 0.0)), "bias": float(ctx.opt("bias", 0.0)),
                                     "layout": "NHWC"}


def _gelu(ctx: OpContext) -> Result:
    return "Gelu", list(ctx.inputs), {"approximate": "tanh" if ctx.opt("approximate") else "none"}


def _cast(ctx: OpContext) -> Result:
    return "Cast", list(ctx.inputs), {}


CONVERTERS: dict[str, Callable[[OpContext], Result]] = {
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _depthwise, "TRANSPOSE_CONV": _transpose_conv,
    "FULLY_CONNECTED": _fc,
    "BATCH_MATMUL": lambda c: ("BatchMatMul", list(c.inputs), {"adj_x": bool(c.opt("adj_x", False)),
                                                               "adj_y": bool(c.opt("adj_y", False)),
                                                               "asymmetric_quantize_inputs":
                                                               bool(c.opt("asymmetric_quantize_inputs",
                                                                          False))}),
    "ADD": _with_act("Add", pot_scale_int16=True), "SUB": _with_act("Sub", pot_scale_int16=True),
    "MUL": _with_act("Mul"), "DIV": _with_act("Div"),
    "SQUARED_DIFFERENCE": _plain("SquaredDifference"), "MAXIMUM": _plain("Max"), "MINIMUM": _plain("Min"),
    "POW": _plain("Pow"),
    "AVERAGE_POOL_2D": _pool("AveragePool"), "MAX_POOL_2D": _pool("MaxPool"), "L2_POOL_2D": _pool("LpPool"),
    "MEAN": _reduce("ReduceMean"), "SUM": _reduce("ReduceSum"), "REDUCE_MAX": _reduce("ReduceMax"),
    "REDUCE_MIN": _reduce("ReduceMin"), "REDUCE_PROD": _reduce("ReduceProd"),
    "SOFTMAX": _softmax, "LOG_SOFTMAX": _plain("LogSoftmax", axis=-1),
    "LOGISTIC": _plain("Sigmoid"), "TANH": _plain("Tanh"), "HARD_SWISH": _plain("HardSwish"),
    "LEAKY_RELU": lambda c: ("LeakyRelu", list(c.inputs), {"alpha": float(c.opt("alpha", 0.0))}),
    "RELU": _plain("Relu"), "RELU6": _plain("Relu6"), "RELU_N1_TO_1": _plain("ReluN1To1"),
    "PRELU": _plain("PRelu"), "ELU": _plain("Elu", alpha=1.0), "GELU": _gelu,
    "RSQRT": _plain("Rsqrt"), "SQRT": _plain("Sqrt"), "SQUARE": _plain("Square"), "EXP": _plain("Exp"),
    "LOG": _plain("Log"), "ABS": _plain("Abs"), "NEG": _plain("Neg"), "FLOOR": _plain("Floor"),
    "CEIL": _plain("Ceil"), "ROUND": _plain("Round"),
    "L2_NORMALIZATION": _with_act("L2Normalization", axis=-1),
    "LOCAL_RESPONSE_NORMALIZATION": _lrn,
    "QUANTIZE": _plain("Quantize"), "DEQUANTIZE": _plain("Dequantize"), "CAST": _cast,
    "RESIZE_BILINEAR": _resize(True), "RESIZE_NEAREST_NEIGHBOR": _resize(False),
    "PAD": _pad, "PADV2": _pad, "MIRROR_PAD": _mirror_pad,
    "RESHAPE": _reshape, "TRANSPOSE": _transpose,
    "DEPTH_TO_SPACE": _space_depth("DepthToSpace"), "SPACE_TO_DEPTH": _space_depth("SpaceToDepth"),
    "STRIDED_SLICE": _strided_slice, "SLICE": _slice, "CONCATENATION": _concat,
    "PACK": lambda c: ("Pack", list(c.inputs), {"axis": int(c.opt("axis", 0))}),
    "UNPACK": lambda c: ("Unpack", list(c.inputs), {"axis": int(c.opt("axis", 0)),
                                                    "num": int(c.opt("num", len(c.outputs)))}),
    "SPLIT": _split, "SPLIT_V": _split_v, "GATHER": _gather, "SQUEEZE": _squeeze,
    "EXPAND_DIMS": _plain("ExpandDims"), "SHAPE": _plain("Shape"),
    "ARG_MAX": _arg("ArgMax"), "ARG_MIN": _arg("ArgMin"),
    "TILE": _plain("Tile"), "BROADCAST_TO": _plain("Expand"), "SELECT": _plain("Where"),
    "SELECT_V2": _plain("Where"), "EQUAL": _plain("Equal"), "LESS": _plain("Less"),
    "GREATER": _plain("Greater"), "LOGICAL_NOT": _plain("Not"), "LOGICAL_AND": _plain("And"),
    "LOGICAL_OR": _plain("Or"),
    # resource variables (streaming state): run by the Session, which owns the variables (state.py)
    "VAR_HANDLE": lambda c: ("VarHandle", [], {"container": str(c.opt("container", "") or ""),
                                                "shared_name": str(c.opt("shared_name", "") or "")}),
    "READ_VARIABLE": _plain("ReadVariable"), "ASSIGN_VARIABLE": _plain("AssignVariable"),
    "DENSIFY": _plain("Identity"),
    "RFFT2D": _plain("RFFT2D"), "COMPLEX_ABS": _plain("ComplexAbs"), "REAL": _plain("Real"), "IMAG": _plain("Imag"),  # its sparse constant input is densified by the loader (tflite_sparse.py)
    "CALL_ONCE": lambda c: ("CallOnce", [], {"init_subgraph_index": int(c.opt("init_subgraph_index", 0))}),
}


def convert(ctx: OpContext) -> Result:
    from .tflite_ops_index import INDEX_CONVERTERS

    fn = CONVERTERS.get(ctx.name) or INDEX_CONVERTERS.get(ctx.name)
    if fn is None:
        return f"TFLite:{ctx.name}", list(ctx.inputs), {}
    return fn(ctx)
