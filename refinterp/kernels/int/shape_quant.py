"""Prepare-time quantization-parameter rules of the integer data-movement kernels.

Data-movement kernels copy stored codes; what a backend does when a node's input and output carry
different (scale, zero point) is a backend property and reaches the kernels as op settings:

* ``requires_equal_params: true`` -- the backend refuses the node in Prepare (LiteRT EXPAND_DIMS,
  PACK, UNPACK, MIRROR_PAD); refinterp raises ModelError when the Session is built.  Otherwise the
  codes are copied and the output parameters are ignored (LiteRT RESHAPE, TRANSPOSE, SQUEEZE,
  SLICE, STRIDED_SLICE, GATHER, SPLIT, TILE, DEPTH_TO_SPACE, ...; TFLM for all of these).
* Concat ``impl``: ``rescale`` (default: inputs whose params differ from the output's are
  requantized with LiteRT's uint8 ``ConcatenationWithScaling`` formula) or ``tflite`` (the
  TFLite/TFLM Prepare rules: int8 needs every input on the output's params, int16 needs zero points
  of 0 and copies codes whatever the scales, uint8 rescales, other types copy).
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import ModelError, UnsupportedOpError
from refinterp.ir import Node, QuantParams, TensorInfo
from ..registry import PrepareContext


def _where(node: Node) -> str:
    return f"node '{node.name}' ({node.source_op or node.op})"


def _params(q: QuantParams | None) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """Scales and zero points as compared by the C++ (float32 ==); no quantization = (0, 0)."""
    if q is None:
        return (0.0,), (0,)
    return tuple(float(s) for s in q.scale.ravel()), tuple(int(z) for z in q.zero_point.ravel())


def _fmt(t: TensorInfo) -> str:
    s, z = _params(t.quant)
    one = len(s) == 1
    sc = np.float32(s[0]) if one else [np.float32(v) for v in s]
    return f"'{t.name}' (scale {sc}, zero point {z[0] if one else list(z)})"


def same_params(a: TensorInfo, b: TensorInfo) -> bool:
    return _params(a.quant) == _params(b.quant)


def check_equal_params(node: Node, ctx: PrepareContext, inputs: list[int] | None = None) -> None:
    """With the ``requires_equal_params`` setting: every integer data input (``inputs``: indices,
    default all) and every output must share the first output's quantization parameters."""
    if not (ctx.settings or {}).get("requires_equal_params") or not ctx.outputs:
        return
    ref = ctx.outputs[0]
    if np.dtype(ref.dtype).kind not in "iu":
        return
    idx = range(len(ctx.inputs)) if inputs is None else inputs
    tensors = [ctx.inputs[i] for i in idx if i < len(ctx.inputs)] + list(ctx.outputs[1:])
    for t in tensors:
        if t is not None and not same_params(t, ref):
            raise ModelError(f"{_where(node)}: {_fmt(t)} and {_fmt(ref)} have different quantization "
                             f"parameters; the backend's kernel refuses this node in Prepare (no rescaling)")


CONCAT_IMPLS = ("rescale", "tflite")


def concat_rescale_plan(node: Node, ctx: PrepareContext) -> list:
    """Per input: None (codes copied) or the LiteRT uint8 rescale ``(s, b)`` with
    ``s = f32(in_scale * f32(1 / out_scale))`` and ``b = f32(-in_zp * s)``."""
    impl = (ctx.settings or {}).get("impl", "rescale")
    if impl not in CONCAT_IMPLS:
        raise UnsupportedOpError(f"{_where(node)}: impl '{impl}' is not one of {', '.join(CONCAT_IMPLS)}")
    out = ctx.outputs[0] if ctx.outputs else None
    oq = None if out is None else out.quant
    ins = [t for t in ctx.inputs if t is not None]
    if impl == "tflite" and out is not None:
        if out.dtype == "int8":
            for t in ins:
                if not same_params(t, out):
                    raise ModelError(f"{_where(node)}: int8 input {_fmt(t)} differs from output {_fmt(out)}; "
                                     f"TFLite int8 CONCATENATION needs equal quantization parameters "
                                     f"(LiteRT and TFLM fail in Prepare)")
        if out.dtype == "int16":
            for t in ins + [out]:
                if any(_params(t.quant)[1]):
                    raise ModelError(f"{_where(node)}: int16 tensor {_fmt(t)} has a non-zero zero point; "
                                     f"TFLite int16 CONCATENATION needs zero points of 0")
            return [None] * len(ctx.inputs)  # codes copied, scales ignored
    rescale: list = []
    for info in ctx.inputs:
        q = None if info is None else info.quant
        if oq is None or q is None or not q.per_tensor or not oq.per_tensor or (
                q.scale[0] == oq.scale[0] and q.zero_point[0] == oq.zero_point[0]):
            rescale.append(None)
            continue
        s = np.float32(q.scale[0] * (np.float32(1.0) / oq.scale[0]))
        rescale.append((s, np.float32(-np.float32(q.zero_point[0]) * s)))
    return rescale
