"""HTP data movement (Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, DepthToSpace, Pad;
Slice, Gather, Split, SpaceToDepth): the generic ``int`` kernel moves the codes.

Where a quantized input and the output have different parameters, the HTP's result depends on the op
that made the input codes (``REQUANT_MEASURED``; elsewhere refused).  After the producers measured it
requantizes the input exactly as its QuantizeLinear of the dequantized value (refinterp/quant/htp.py ``quantize_float``):
y = quantize_float(f32((q - zp_in) * s_in), s_out, zp_out), a 256-entry table per input.  Evidence (graph inputs already on the input's grid, where every producer rule agrees with the table;
tests/conformance/test_qnn_htp_requant_moves.py has the producers on off-grid inputs):
every code at 10-12 random scale pairs through Concat, Reshape, Transpose and MaxPool, v68 and v73,
uint8 and int8: 0 differences (exact rounding of the real ratio differs on 63-86 of 6,144); the same
for DepthToSpace and edge / reflect Pad (3 scale pairs each, both types, both archs: 0 of 7,344 codes per arch).
The same on 16-bit tensors (the table then has 65,536 entries; ``quantize_float``'s 16-bit form): every
uint16 / int16 code at 3 scale pairs through Concat, Reshape, Transpose, edge Pad and (uint16) DepthToSpace,
v68 and v73: 0 differences (the exact ratio rounded half up: 0-46 of 65,536); an int16 DepthToSpace the QNN
EP does not take (refused); a 16-bit MaxPool or Slice that requantizes differs (11-3,176 codes: refused).

A requantizing Reshape, Flatten, Squeeze, Unsqueeze, Tile or Expand of a graph input's codes is folded
into that input's QuantizeLinear instead: y = quantize_float(clamp(x, (qmin - zp_in) s_in, (qmax - zp_in)
s_in), s_out, zp_out) from the float input x (passes/qdq_htp.py ``_input_folds`` hands the kernel x and
the float32 range).  Evidence: off-grid inputs with saturated ends, 3 parameter sets per op and type
(uint8, int8, uint16, int16), v68 and v73: 0 codes off, where the copy table of the input's codes misses
1,081-1,108 of 13,824 (tests/conformance/test_qnn_htp_requant_moves.py).

Measured to differ from that table, and refused when the parameters differ: Slice, Split and a
constant-mode Pad (uint8: 1-4 codes of 192-484, always a value a little below a half rounded up, by
up to 0.0124 LSB: no fixed-point or float16 form tried fits), a constant-mode int8 Pad (the padded
codes are neither the output zero point nor any requantized value: 41 for 0.0 with zero point -34),
SpaceToDepth (nearly every code differs from any rounding).  A requantizing Gather is not measured (the QNN
EP failed to finalize the one tried: QNN_COMMON_ERROR_MEM_ALLOC).  A constant Pad on equal parameters pads with the zero
point, i.e. a constant value of 0 (another value is refused: not measured).  Float data is refused
(the HTP would run it in float16)."""
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
from .common import ARCHS, SIXTEEN_BIT, require_8bit

REQUANTIZING = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Concat", "DepthToSpace", "Pad", "Tile",
                "Expand")
COPY_ONLY = ("Slice", "Gather", "Split", "SpaceToDepth")

# (the op that made the input codes, the requantizing op) where the copy table above is the HTP's result,
# by input type: measured on off-grid float inputs through every op in front (tests/conformance/
# test_qnn_htp_requant_moves.py).  Elsewhere the HTP folds the requantization into the producer (a graph
# input's QuantizeLinear, Conv, Add, MaxPool ...) in ways not characterised: refused.  "input": a graph
# input's QuantizeLinear.
_AFTER_SIGMOID = {("Sigmoid", op) for op in ("Reshape", "Flatten", "Unsqueeze", "Tile", "Expand", "MaxPool", "Resize")}
_EIGHT = {("input", "MaxPool"), ("input", "Resize")} | _AFTER_SIGMOID
# (uint8 Transpose of a graph input's codes and uint16 Reshape-likes after Conv / Add agreed with the table on
# some parameter sets, not on others: 7 and 99 codes in 512; not listed)
REQUANT_MEASURED = {"uint8": _EIGHT, "int8": _EIGHT}


def require_measured_requant(node, t_in) -> None:
    """A requantizing data movement is characterised only after the producers in ``REQUANT_MEASURED``
    (passes/qdq_htp.py ``_input_sources`` names the producer)."""
    kind = node.attrs.get("htp_input_from")
    if (kind, node.op) not in REQUANT_MEASURED.get(t_in.dtype, ()):
        imposed = (" (the QNN EP imposes a 16-bit Sigmoid's / Tanh's output encoding, so the move requantizes "
                   "from it even where the model declares the same parameters on both sides)"
                   if kind in ("Sigmoid", "Tanh") and t_in.dtype in SIXTEEN_BIT else "")
        raise UnsupportedOpError(f"{where(node)}: a requantizing {t_in.dtype} {node.op} of codes made by "
                                 f"{'a graph input' if kind == 'input' else kind or 'an unknown op'}: the HTP "
                                 f"folds the requantization into the producer there, not characterised{imposed}")


@dataclass(frozen=True)
class HtpMovePlan:
    kernel: Any  # the int kernel that moves the codes
    plan: Any  # its plan
    tables: tuple  # per data input: None (same parameters) or (table, input lo)


def requant_table(t_in, t_out, node, sixteen: bool = False) -> tuple[np.ndarray, int]:
    """The HTP's requantizing copy of every code of ``t_in`` onto ``t_out``'s parameters (a 65,536-entry
    table for 16-bit tensors where ``sixteen``: the data movement ops measured at 16 bits)."""
    if not (sixteen and t_in.dtype in SIXTEEN_BIT):
        require_8bit(node, [t_in, t_out])
    if t_in.dtype != t_out.dtype:
        raise UnsupportedOpError(f"{where(node)}: mixed input / output types are not characterised on the HTP")
    (si, zi), (so, zo) = qparams(t_in, node, "input"), qparams(t_out, node, "output")
    lo, hi = qrange(t_in.dtype)
    x = ((np.arange(lo, hi + 1) - zi).astype(np.float32) * np.float32(si)).astype(np.float32)
    return htp.quantize_float(x, float(so), zo, lo, hi).astype(t_out.dtype), lo


def exact_copy_table(t_in, t_out, node) -> tuple[np.ndarray, int]:
    """Every 8-bit code of ``t_in`` onto ``t_out``'s parameters, the exact value rounded half up (a requantizing
    Concat's input from a table activation on a Relu range: passes/htp_concat.py)."""
    require_8bit(node, [t_in, t_out])
    (si, zi), (so, zo) = qparams(t_in, node, "input"), qparams(t_out, node, "output")
    lo, hi = qrange(t_in.dtype)
    # |q - z| <= 255 and float32 scales: within a float64 ulp or two of the exact quotient; an exact tie rounds up
    # (ties themselves not measured apart)
    v = (np.arange(lo, hi + 1) - zi) * float(si) / float(so)
    return np.clip(np.floor(v + 0.5) + zo, lo, hi).astype(t_out.dtype), lo


def apply_table(tab, codes):
    """Codes through a ``requant_table`` result (None: unchanged)."""
    if tab is None:
        return codes
    table, lo = tab
    return table[np.asarray(codes).astype(np.int64) - lo]


@dataclass(frozen=True)
class HtpInputFoldPlan:
    kernel: Any  # the int kernel that moves the codes
    plan: Any
    lo: np.float32  # the graph input's QuantizeLinear range, float32
    hi: np.float32
    scale: float  # the output's parameters
    zero_point: int
    qmin: int
    qmax: int
    dtype: str


def _input_fold(node, ctx) -> HtpInputFoldPlan:
    """passes/qdq_htp.py ``_input_folds``: a requantizing Reshape-like on a graph input's codes, which the
    HTP folds into that input's QuantizeLinear: y = quantize_float(clamp(x, lo, hi)) on the output's
    parameters, then moved (the clamp and the quantization are elementwise, so they commute with the
    move)."""
    out = ctx.outputs[0]
    lo, hi = (np.float32(v) for v in node.attrs["htp_input_clamp"])
    s, z = qparams(out, node, "output")
    qmin, qmax = qrange(out.dtype)
    k = require(node.op, "int")
    inner = dataclasses.replace(ctx, inputs=[dataclasses.replace(ctx.inputs[0], dtype=out.dtype, quant=out.quant)]
                                + list(ctx.inputs[1:]))
    return HtpInputFoldPlan(k, k.prepare(node, inner), lo, hi, float(s), int(z), qmin, qmax, out.dtype)


def _prepare(node, ctx):
    x = ctx.inputs[0] if ctx.inputs else None
    if x is not None and x.dtype == "float32" and node.attrs.get("htp_input_clamp") is not None:
        return _input_fold(node, ctx)
    if x is not None and x.dtype in ("float32", "float16"):
        raise UnsupportedOpError(f"{where(node)}: a float {node.op} is not characterised on the HTP (it would run "
                                 "in float16 there)")
    if node.op == "DepthToSpace" and x is not None and x.dtype == "int16":  # measured: the EP leaves it unassigned
        raise UnsupportedOpError(f"{where(node)}: an int16 DepthToSpace: the QNN EP does not take it onto the HTP")
    if node.attrs.get("htp_concat_unmeasured"):  # passes/htp_concat.py
        raise UnsupportedOpError(f"{where(node)}: a requantizing Concat input made by another op than those "
                                 f"measured ({', '.join(node.attrs['htp_concat_unmeasured'])}): the HTP folds the "
                                 "requantization into the producer, not characterised for it")
    out = ctx.outputs[0] if ctx.outputs else None
    n_data = len(ctx.inputs) if node.op == "Concat" else 1
    tables = []
    constant_pad = node.op == "Pad" and str(node.attr("mode", "constant")).lower() == "constant"
    exact = node.attrs.get("htp_concat_exact_copy") or ()  # passes/htp_concat.py
    for t in ctx.inputs[:n_data]:
        if not (is_quantized(t) and is_quantized(out)) or same_params(t, out):
            tables.append(None)
        elif t.name in exact:
            tables.append(exact_copy_table(t, out, node))
        elif node.op in REQUANTIZING and not constant_pad:
            if node.op != "Concat":  # Concat: passes/htp_concat.py
                require_measured_requant(node, t)
            tables.append(requant_table(t, out, node, sixteen=True))
        else:
            raise UnsupportedOpError(f"{where(node)}: tensors '{t.name}' and '{out.name}' have different "
                                     f"quantization; the HTP's requantizing {node.op} is not characterised")
    if node.op == "Split" and any(not same_params(x, o) for o in ctx.outputs if is_quantized(o)):
        raise UnsupportedOpError(f"{where(node)}: Split outputs with other quantization are not characterised")
    k = require(node.op, "int")
    inner = _inputs_on_output_params(ctx) if any(tables) else ctx
    plan = k.prepare(node, inner)
    if constant_pad and is_quantized(out):
        plan = _zero_pad(node, ctx, plan)
    return HtpMovePlan(k, plan, tuple(tables))


def _zero_pad(node, ctx, plan):
    """A constant Pad on quantized codes pads with the output zero point: the constant (a float) must
    be 0, which every rounding maps to the zero point exactly; other constants are not measured."""
    has_value = len(node.inputs) > 2 and bool(node.inputs[2])
    value = ctx.const(2) if has_value else np.asarray(node.attr("value", 0.0))
    if value is None or (np.size(value) and float(np.asarray(value).ravel()[0]) != 0.0):
        raise UnsupportedOpError(f"{where(node)}: a constant Pad with a value other than a constant 0 is not "
                                 "characterised on the HTP")
    zp = int(qparams(ctx.outputs[0], node, "output")[1])
    return dataclasses.replace(plan, value=np.asarray(zp, ctx.outputs[0].dtype))


def _inputs_on_output_params(ctx):
    """The int kernel sees inputs already on the output's parameters (its own checks then pass)."""
    out = ctx.outputs[0]
    ins = [dataclasses.replace(t, quant=out.quant) if (t is not None and is_quantized(t)) else t
           for t in ctx.inputs]
    return dataclasses.replace(ctx, inputs=ins)


def _run(p, *args):
    if isinstance(p, HtpInputFoldPlan):
        x = np.clip(np.asarray(args[0], np.float32), p.lo, p.hi)
        codes = htp.quantize_float(x, p.scale, p.zero_point, p.qmin, p.qmax).astype(p.dtype)
        return p.kernel.run(p.plan, codes, *args[1:])
    moved = [apply_table(tab, a) for tab, a in zip(p.tables, args)]
    return p.kernel.run(p.plan, *moved, *args[len(moved):])


kernel(REQUANTIZING + COPY_ONLY, tuple(ARCHS), prepare=_prepare)(_run)
