"""QOperator ops (QLinearConv, com.microsoft QLinearAdd, ...) -> canonical float op + QuantParams.

Each spec lists, by input position, the quantized data inputs with their (scale, zero point)
inputs, the output's (scale, zero point), plain inputs kept as they are, and int32 bias inputs
whose scale is the product of the data scales (zero point 0).  Scales and zero points must be
constants; they leave ``node.inputs`` and live on the tensors' ``QuantParams``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..ir import Node, QuantParams
from .onnx_build import BuildContext


@dataclass(frozen=True)
class QSpec:
    op: str
    data: tuple[tuple[int, int, int], ...]  # (value, scale, zero point) input positions
    out: tuple[int, int] | None  # output (scale, zero point); None = variadic layout (QLinearConcat)
    plain: tuple[int, ...] = ()  # inputs kept as is, placed before the data inputs
    bias: int | None = None  # int32 bias input, scale = data scales product (x alpha for QGemm)


_BIN = ((0, 1, 2), (3, 4, 5))
_UN = ((0, 1, 2),)
SPECS: dict[str, QSpec] = {
    "QLinearConv": QSpec("Conv", _BIN, (6, 7), bias=8),
    "QLinearMatMul": QSpec("MatMul", _BIN, (6, 7)),
    "com.microsoft.QLinearConv": QSpec("Conv", _BIN, (6, 7), bias=8),
    "com.microsoft.QLinearMatMul": QSpec("MatMul", _BIN, (6, 7)),
    "com.microsoft.QLinearAdd": QSpec("Add", _BIN, (6, 7)),
    "com.microsoft.QLinearMul": QSpec("Mul", _BIN, (6, 7)),
    "com.microsoft.QLinearSigmoid": QSpec("Sigmoid", _UN, (3, 4)),
    "com.microsoft.QLinearLeakyRelu": QSpec("LeakyRelu", _UN, (3, 4)),
    "com.microsoft.QLinearAveragePool": QSpec("AveragePool", _UN, (3, 4)),
    "com.microsoft.QLinearGlobalAveragePool": QSpec("GlobalAveragePool", _UN, (3, 4)),
    "com.microsoft.QLinearSoftmax": QSpec("Softmax", _UN, (3, 4)),
    "com.microsoft.QLinearReduceMean": QSpec("ReduceMean", _UN, (3, 4)),
    "com.microsoft.QGemm": QSpec("Gemm", _BIN, (7, 8), bias=6),
    "com.microsoft.QLinearWhere": QSpec("Where", ((1, 2, 3), (4, 5, 6)), (7, 8), plain=(0,)),
    "com.microsoft.QLinearConcat": QSpec("Concat", (), None),
}


def _inp(n: Node, i: int) -> str:
    return n.inputs[i] if i < len(n.inputs) else ""


def _const_param(n: Node, ctx: BuildContext, name: str, what: str) -> np.ndarray:
    v = ctx.const(name)
    if v is None:
        raise ModelError(f"node '{n.name}' ({n.source_op}): {what} '{name}' must be a constant "
                         f"(initializer or Constant) to be read as quantization parameters", ctx.where)
    return np.asarray(v)


def _params(n: Node, ctx: BuildContext, value: str, s: str, z: str, axis_hint: int = -1) -> QuantParams:
    """Per-axis params use ``axis_hint`` (negative = from the end of ``value``'s shape)."""
    scale = _const_param(n, ctx, s, "scale").astype(np.float32).ravel()
    if z:
        zp = _const_param(n, ctx, z, "zero point").astype(np.int64).ravel()
    else:
        zp = np.zeros(1, np.int64)
    axis = None
    if scale.size > 1:
        rank = ctx.rank(value)
        if axis_hint < 0 and rank is None:
            raise ModelError(f"node '{n.name}' ({n.source_op}): per-axis scale '{s}' on '{value}' of unknown rank",
                             ctx.where)
        axis = axis_hint % rank if axis_hint < 0 else axis_hint
    return QuantParams(scale, zp, axis)


def _weight_axis(n: Node, op: str) -> int:
    """Per-channel axis of the second data input: output channels (Conv O, Gemm N, MatMul N)."""
    if op == "Conv":
        return 0
    if op == "Gemm":
        return 0 if int(n.attrs.get("transB", 0)) else 1
    return -1


def _storage_dtype(ctx: BuildContext, z: str, fallback: str) -> str:
    v = ctx.const(z) if z else None
    return str(v.dtype) if v is not None else fallback


_QTYPES = ("int8", "uint8", "int16", "uint16", "int4", "uint4")


def convert_qop(n: Node, ctx: BuildContext) -> Node | None:
    """Rewrite ``n`` in place when it is a QOperator op; returns it, or None for other ops."""
    spec = SPECS.get(n.op)
    if spec is None:
        return None
    if spec.out is None:
        return _concat(n, ctx)
    if spec.op in ("Conv", "MatMul") and spec.bias in (None, 8) and _runtime_params(n, ctx, spec):
        return _runtime(n, ctx, spec)
    data_qps = []
    for k, (v, s, z) in enumerate(spec.data):
        name = _inp(n, v)
        dt = ctx.dtype(name, "")
        if dt and dt not in _QTYPES:
            raise ModelError(f"node '{n.name}' ({n.source_op}): quantized input '{name}' has dtype {dt}; "
                             f"expected one of {', '.join(_QTYPES)}", ctx.where)
        qp = _params(n, ctx, name, _inp(n, s), _inp(n, z), _weight_axis(n, spec.op) if k == 1 else -1)
        ctx.set_quant(name, qp, n)
        data_qps.append(qp)
    new_inputs = [_inp(n, i) for i in spec.plain] + [_inp(n, v) for v, _, _ in spec.data]
    if spec.bias is not None:
        b = _inp(n, spec.bias)
        new_inputs.append(b)
        if b:
            scale = data_qps[0].scale[:1] * data_qps[1].scale
            if spec.op == "Gemm":
                scale = scale * np.float32(n.attrs.get("alpha", 1.0))
            axis = 0 if scale.size > 1 else None
            if spec.op == "Gemm" and axis is not None:
                axis = max(len(ctx.shape(b) or (0,)) - 1, 0)
            ctx.set_quant(b, QuantParams(scale, np.zeros(scale.shape, np.int64), axis), n)
    s, z = _inp(n, spec.out[0]), _inp(n, spec.out[1])
    out = n.outputs[0]
    if s:  # QGemm without y_scale produces float32
        dt = _storage_dtype(ctx, z, ctx.dtype(_inp(n, spec.data[0][0]), "uint8"))
        ctx.ensure(out, dt).dtype = dt
        ctx.set_quant(out, _params(n, ctx, out, s, z), n)
    else:
        ctx.ensure(out, "float32")
    while new_inputs and not new_inputs[-1]:
        new_inputs.pop()
    n.inputs = new_inputs
    n.op = spec.op
    if n.attrs.pop("channels_last", 0):
        n.attrs["layout"] = "NHWC"
    if spec.op == "ReduceMean" and "axes" in n.attrs:
        n.inputs.append(ctx.add_const(f"{n.name}:axes", n.attrs.pop("axes"), "int64"))
    if spec.op == "Gemm":
        n.attrs["beta"] = 1.0
    _fill_shape(n, ctx)
    return n


def _runtime_params(n: Node, ctx: BuildContext, spec: QSpec) -> bool:
    """Some scale or zero point of a QLinearConv / QLinearMatMul is not a constant."""
    idx = [i for v, s, z in spec.data for i in (s, z)] + list(spec.out)
    return any(_inp(n, i) and ctx.const(_inp(n, i)) is None for i in idx)


def _runtime(n: Node, ctx: BuildContext, spec: QSpec) -> Node:
    """Keep the node with its original inputs (``QLinearConvRuntime`` / ``QLinearMatMulRuntime``,
    kernels/onnxruntime/qlinear_runtime.py): the parameters are read at run time."""
    out = n.outputs[0]
    z = _inp(n, spec.out[1])
    dt = ctx.dtype(z, "") if z else ""
    dt = dt or ctx.dtype(out, "") or ctx.dtype(_inp(n, spec.data[0][0]), "uint8")
    ctx.ensure(out, dt).dtype = dt
    n.op = spec.op.replace("Conv", "QLinearConvRuntime").replace("MatMul", "QLinearMatMulRuntime")
    return n


def _broadcast(shapes: list) -> tuple | None:
    if any(s is None for s in shapes):
        return None
    rank = max(len(s) for s in shapes)
    out = []
    for dims in zip(*[(1,) * (rank - len(s)) + tuple(s) for s in shapes]):
        known = [d for d in dims if d != 1]
        out.append(None if None in known else (known[0] if known else 1))
    return tuple(out)


def _fill_shape(n: Node, ctx: BuildContext) -> None:
    """Output shapes that onnx shape inference cannot give for com.microsoft ops (best effort)."""
    info = ctx.info(n.outputs[0])
    if info is None or info.shape is not None:
        return
    shapes = [ctx.shape(i) for i in n.inputs if i]
    x = shapes[0] if shapes else None
    if n.op in ("Sigmoid", "LeakyRelu", "Softmax"):
        info.shape = x
    elif n.op in ("Add", "Mul", "Where"):
        info.shape = _broadcast(shapes)
    elif n.op == "GlobalAveragePool" and x is not None and len(x) >= 3:
        info.shape = (x[0], *([1] * (len(x) - 2)), x[-1]) if n.attrs.get("layout") == "NHWC" else \
            (x[0], x[1], *([1] * (len(x) - 2)))
    elif n.op == "Gemm" and x is not None and len(shapes) > 1 and shapes[1] is not None:
        m = x[1] if n.attrs.get("transA") else x[0]
        info.shape = (m, shapes[1][0] if n.attrs.get("transB") else shapes[1][1])
    elif n.op == "ReduceMean" and x is not None and len(n.inputs) > 1 and ctx.const(n.inputs[1]) is not None:
        axes = {int(a) % len(x) for a in ctx.const(n.inputs[1]).ravel()}
        keep = int(n.attrs.get("keepdims", 1))
        info.shape = tuple(1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes)


def _concat(n: Node, ctx: BuildContext) -> Node:
    # QLinearConcat: Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) per input.
    if (len(n.inputs) - 2) % 3 or len(n.inputs) < 5:
        raise ModelError(f"node '{n.name}' ({n.source_op}): expected Y_scale, Y_zero_point and "
                         f"(tensor, scale, zero point) triples, got {len(n.inputs)} inputs", ctx.where)
    values = []
    for i in range(2, len(n.inputs), 3):
        v, s, z = n.inputs[i:i + 3]
        ctx.set_quant(v, _params(n, ctx, v, s, z, 1), n)
        values.append(v)
    out = n.outputs[0]
    info = ctx.ensure(out, _storage_dtype(ctx, n.inputs[1], ctx.dtype(values[0], "uint8")))
    info.dtype = _storage_dtype(ctx, n.inputs[1], info.dtype)
    ctx.set_quant(out, _params(n, ctx, out, n.inputs[0], n.inputs[1], 1), n)
    n.inputs = values
    n.op = "Concat"
    shapes = [ctx.shape(v) for v in values]
    if info.shape is None and all(sh is not None for sh in shapes) and "axis" in n.attrs:
        ax = int(n.attrs["axis"]) % len(shapes[0])
        sizes = [sh[ax] for sh in shapes]
        info.shape = tuple((None if None in sizes else sum(sizes)) if i == ax else d
                           for i, d in enumerate(shapes[0]))
    return n
