"""HTP pooling on 8-bit activations (v68 and v73 alike):

* GlobalAveragePool: refinterp/quant/htp_pool.py ``average`` -- the exact window sum times a 15-bit
  fixed-point s_x / (s_y * n), rounded half up, zero point after; the same on uint16, rounded twice below
  A = 1/2 (measured; int16: the QNN EP does not take it, refused).
* MaxPool: the maximum of the stored codes (also on uint16 / int16 with unchanged parameters: 0 of 10,832
  codes per arch and type, padded or not; a 16-bit MaxPool that requantizes differs from the copy table:
  refused); with other output parameters and no padding the max is
  then requantized as the HTP's data movement does (kernels/qnn_htp/shape.py ``requant_table``: a
  monotone table, so it commutes with the max).  A padded MaxPool that requantizes is refused (with
  pads the HTP differs from this on 52 of 256 codes, not characterised).

* Resize, mode nearest with whole-number spatial upscale factors, half_pixel coordinates with
  round_prefer_floor or asymmetric ones with floor (each output cell a copy of input cell
  floor(i / factor)): the copy, requantized as data movement when the output parameters differ.  On
  uint16 the copy with unchanged parameters (0 of 8,192 codes per arch; int16: the QNN EP does not take it).
  Mode linear: kernels/qnn_htp/resize.py.  Other Resize forms (cubic, nearest downscaling or
  fractional factors, align_corners) are refused.

AveragePool: kernels/qnn_htp/avgpool.py.  ReduceMean is not registered: a model using it is refused
when the Session is built.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from refinterp.errors import UnsupportedOpError
from refinterp.quant import htp_pool
from ..onnxruntime import pool as ort_pool
from ..registry import require
from ..tflite.common import qparams, where
from . import resize as bilinear
from .common import ARCHS, SIXTEEN_BIT, htp_kernel, require_8bit
from .shape import apply_table, require_measured_requant, requant_table


def _gap_prepare(node, ctx) -> ort_pool.AvgPoolPlan:
    x, y = ctx.inputs[0], ctx.outputs[0]
    if x is not None and x.dtype == "int16":  # measured: the QNN EP leaves it unassigned (the session fails)
        raise UnsupportedOpError(f"{where(node)}: an int16 GlobalAveragePool: the QNN EP does not take it onto the HTP")
    if x is None or y is None or x.dtype != "uint16" or y.dtype != "uint16":
        require_8bit(node, [x, y])  # 8-bit, or uint16 in and out (the same rule, measured)
    return ort_pool.gap_prepare(node, ctx)


@dataclass(frozen=True)
class CodesThenTablePlan:
    inner: Any  # the ort plan that moves the stored codes (MaxPool's max, Resize's nearest selection)
    table: Any  # None, or (table, lo): the requantizing copy onto the output's parameters


def _require_16bit_copy(node, ctx, types) -> None:
    """A 16-bit MaxPool / nearest Resize is the max / copy of the codes on unchanged parameters (measured);
    8-bit ones go on to their rules, other 16-bit forms are refused."""
    x, y = ctx.inputs[0], ctx.outputs[0]
    if x is None or y is None or (x.dtype not in SIXTEEN_BIT and y.dtype not in SIXTEEN_BIT):
        require_8bit(node, [x, y])
        return
    if x.dtype not in types:
        raise UnsupportedOpError(f"{where(node)}: an {x.dtype} {node.op}: the QNN EP does not take it onto the HTP")
    if x.dtype != y.dtype or qparams(x, node, "X") != qparams(y, node, "Y"):
        raise UnsupportedOpError(f"{where(node)}: a 16-bit {node.op} that requantizes is not characterised on the "
                                 "HTP (MaxPool measured to differ from the copy table)")


def _maxpool_prepare(node, ctx):
    _require_16bit_copy(node, ctx, SIXTEEN_BIT)
    table = None
    if qparams(ctx.inputs[0], node, "X") != qparams(ctx.outputs[0], node, "Y"):
        padded = any(int(v) for v in (node.attrs.get("pads") or ())) or \
            str(node.attrs.get("auto_pad") or "NOTSET").upper() not in ("NOTSET", "VALID")
        if padded:  # measured: 52 of 256 codes differ from the table after the max (not characterised)
            raise UnsupportedOpError(f"{where(node)}: a padded MaxPool that requantizes is not characterised on "
                                     "the HTP")
        require_measured_requant(node, ctx.inputs[0])
        table = requant_table(ctx.inputs[0], ctx.outputs[0], node)
    return CodesThenTablePlan(require("MaxPool", "ort").prepare(node, ctx), table)


def _maxpool(p: CodesThenTablePlan, x):
    return apply_table(p.table, ort_pool.ort_max_pool(p.inner, x))


def _resize_prepare(node, ctx):
    _require_16bit_copy(node, ctx, ("uint16",))  # int16: the QNN EP leaves it unassigned (measured)
    x, out = ctx.inputs[0], ctx.outputs[0]
    mode = str(node.attrs.get("mode") or "nearest")
    if x.dtype in SIXTEEN_BIT and mode != "nearest":
        raise UnsupportedOpError(f"{where(node)}: a 16-bit {mode} Resize is not characterised on the HTP")
    ctm = str(node.attrs.get("coordinate_transformation_mode") or "half_pixel")
    nm = str(node.attrs.get("nearest_mode") or "round_prefer_floor")
    if qparams(x, node, "X") != qparams(out, node, "Y"):
        require_measured_requant(node, x)
    if mode == "linear":
        return bilinear.prepare(node, ctx)
    # the pairs measured (the QNN EP itself refuses asymmetric with round_prefer_floor)
    ok = mode == "nearest" and (ctm, nm) in (("half_pixel", "round_prefer_floor"), ("asymmetric", "floor")) \
        and x.shape is not None and out.shape is not None \
        and len(x.shape) == len(out.shape) == 4 and all(isinstance(v, int) for v in (*x.shape, *out.shape))
    if ok:
        f = [o / i if i else 0 for i, o in zip(x.shape, out.shape)]
        ok = f[0] == f[1] == 1 and all(v >= 1 and float(v).is_integer() for v in f[2:])
    if not ok:
        raise UnsupportedOpError(f"{where(node)}: Resize (mode {mode}, {ctm}, {nm}, {x.shape} -> {out.shape}) is "
                                 "characterised on the HTP for nearest whole-number upscaling only")
    table = None if qparams(x, node, "X") == qparams(out, node, "Y") else requant_table(x, out, node)
    return CodesThenTablePlan(require("Resize", "ort").prepare(node, ctx), table)


def _resize(p, x, *rest):
    if isinstance(p, bilinear.BilinearPlan):
        return bilinear.run(p, x)
    return apply_table(p.table, ort_pool.ort_resize(p.inner, x, *rest))


for _variant in ARCHS:
    htp_kernel("Resize", _variant, _resize_prepare)(_resize)

    @htp_kernel("GlobalAveragePool", _variant, _gap_prepare)
    def htp_global_average_pool(p: ort_pool.AvgPoolPlan, x):
        s, n = ort_pool.gap_window_sum(p, x)
        try:  # A = s_x / (s_y * n) in float64 of the float32 scales
            params = htp_pool.average_params(float(p.xs) / (float(p.ys) * n))
        except ValueError as e:
            raise UnsupportedOpError(f"GlobalAveragePool: {e}") from None
        return htp_pool.average(s, params, p.zy, p.lo, p.hi, n if p.dtype == "uint16" else 0).astype(p.dtype)

    htp_kernel("MaxPool", _variant, _maxpool_prepare)(_maxpool)
