"""HTP data movement (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat; Slice, Gather, Split,
DepthToSpace, SpaceToDepth, Pad): the generic ``int`` kernel moves the codes.

Where a quantized input and the output have different parameters, the HTP requantizes the input
exactly as its QuantizeLinear of the dequantized value (refinterp/quant/htp.py ``quantize_float``):
y = quantize_float(f32((q - zp_in) * s_in), s_out, zp_out), a 256-entry table per input.  Evidence:
every code at 10-12 random scale pairs through Concat, Reshape, Transpose and MaxPool, v68 and v73,
uint8 and int8: 0 differences (exact rounding of the real ratio differs on 63-86 of 6,144).  The
requantizing form of Slice, Gather, Split, DepthToSpace, SpaceToDepth and Pad is not measured: those
nodes are refused when the parameters differ.  Float data is refused (the HTP would run it in
float16)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp
from ..int.shape_quant import same_params
from ..onnxruntime.common import is_quantized
from ..registry import kernel, require
from ..tflite.common import qparams, qrange, where
from .common import ARCHS, require_8bit

REQUANTIZING = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat")
COPY_ONLY = ("Slice", "Gather", "Split", "DepthToSpace", "SpaceToDepth", "Pad")


@dataclass(frozen=True)
class HtpMovePlan:
    kernel: Any  # the int kernel that moves the codes
    plan: Any  # its plan
    tables: tuple  # per data input: None (same parameters) or (table, input lo)


def requant_table(t_in, t_out, node) -> tuple[np.ndarray, int]:
    """The HTP's requantizing copy of every code of ``t_in`` onto ``t_out``'s parameters."""
    require_8bit(node, [t_in, t_out])
    if t_in.dtype != t_out.dtype:
        raise UnsupportedOpError(f"{where(node)}: mixed input / output types are not characterised on the HTP")
    (si, zi), (so, zo) = qparams(t_in, node, "input"), qparams(t_out, node, "output")
    lo, hi = qrange(t_in.dtype)
    x = ((np.arange(lo, hi + 1) - zi).astype(np.float32) * np.float32(si)).astype(np.float32)
    return htp.quantize_float(x, float(so), zo, lo, hi).astype(t_out.dtype), lo


def apply_table(tab, codes):
    """Codes through a ``requant_table`` result (None: unchanged)."""
    if tab is None:
        return codes
    table, lo = tab
    return table[np.asarray(codes).astype(np.int64) - lo]


def _prepare(node, ctx) -> HtpMovePlan:
    x = ctx.inputs[0] if ctx.inputs else None
    if x is not None and x.dtype in ("float32", "float16"):
        raise UnsupportedOpError(f"{where(node)}: a float {node.op} is not characterised on the HTP (it would run "
                                 "in float16 there)")
    out = ctx.outputs[0] if ctx.outputs else None
    n_data = len(ctx.inputs) if node.op == "Concat" else 1
    tables = []
    for t in ctx.inputs[:n_data]:
        if not (is_quantized(t) and is_quantized(out)) or same_params(t, out):
            tables.append(None)
        elif node.op in REQUANTIZING:
            tables.append(requant_table(t, out, node))
        else:
            raise UnsupportedOpError(f"{where(node)}: tensors '{t.name}' and '{out.name}' have different "
                                     f"quantization; the HTP's requantizing {node.op} is not characterised")
    if node.op == "Split" and any(not same_params(x, o) for o in ctx.outputs if is_quantized(o)):
        raise UnsupportedOpError(f"{where(node)}: Split outputs with other quantization are not characterised")
    k = require(node.op, "int")
    inner = _inputs_on_output_params(ctx) if any(tables) else ctx
    return HtpMovePlan(k, k.prepare(node, inner), tuple(tables))


def _inputs_on_output_params(ctx):
    """The int kernel sees inputs already on the output's parameters (its own checks then pass)."""
    out = ctx.outputs[0]
    ins = [dataclasses.replace(t, quant=out.quant) if (t is not None and is_quantized(t)) else t
           for t in ctx.inputs]
    return dataclasses.replace(ctx, inputs=ins)


def _run(p: HtpMovePlan, *args):
    moved = [apply_table(tab, a) for tab, a in zip(p.tables, args)]
    return p.kernel.run(p.plan, *moved, *args[len(moved):])


kernel(REQUANTIZING + COPY_ONLY, tuple(ARCHS), prepare=_prepare)(_run)
