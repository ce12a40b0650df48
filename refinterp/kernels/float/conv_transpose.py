"""Float ConvTranspose (ONNX NCHW with ``(C, M/G, *K)`` weights; TFLite TRANSPOSE_CONV NHWC with OHWI).

The full (uncropped) result has size ``(in-1)*s + (k-1)*d + 1`` per spatial dim; the output is the
window ``full[pad_begin : pad_begin + out]`` of it, zero (then + bias) where the window leaves it.
Padding rules:
* ONNX (as onnx.reference): SAME_* -> output_shape defaults to in*s and
  total = s*(in-1) + output_padding + ext - out, begin = total//2 (SAME_UPPER) or total - total//2;
  otherwise ``pads`` (default 0) and out = s*(in-1) + output_padding + ext - pads.
* TFLite (layout NHWC, ``output_shape`` given): TFLite's ComputePaddingHeightWidth run on the
  *output* size: o' = ceil(out/s) (SAME) or (out - ext + s)//s (VALID);
  begin = max((o'-1)*s + ext - out, 0) // 2.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError, ModelError
from ..spatial import compute_dtype, from_channels_last, ints, out_dtype, to_channels_last
from ..registry import kernel


@dataclass(frozen=True)
class ConvTransposePlan:
    name: str
    layout: str
    weight_layout: str
    group: int
    strides: tuple[int, ...] | None
    dilations: tuple[int, ...] | None
    pads: tuple[int, ...] | None
    output_padding: tuple[int, ...] | None
    output_shape: tuple[int, ...] | None
    auto_pad: str
    # TFLite TRANSPOSE_CONV whose output_shape is a run-time tensor: the shape the model declares for
    # the output (the kernel runs that geometry and refuses a run-time value that differs)
    declared_output: tuple[int, ...] | None = None


def _tup(v):
    return None if v is None else tuple(int(t) for t in np.asarray(v).ravel())


def prepare_node(node, ctx) -> ConvTransposePlan:
    a = node.attrs
    layout = a.get("layout") or "NCHW"
    return ConvTransposePlan(node.name, layout, a.get("weight_layout") or (
        "OHWI" if layout == "NHWC" else "OIHW"), int(a.get("group", 1) or 1), _tup(a.get("strides")),
        _tup(a.get("dilations")), _tup(a.get("pads")), _tup(a.get("output_padding")),
        _tup(a.get("output_shape")), str(a.get("auto_pad", "NOTSET") or "NOTSET"), _tup(a.get("declared_output")))


def check_output_shape(plan: ConvTransposePlan, given) -> None:
    """A run-time output_shape input must equal the declared output shape the plan was built for."""
    if given is None or plan.declared_output is None:
        return
    got = tuple(int(v) for v in np.asarray(given).ravel())
    if got != plan.declared_output:
        raise InputError(f"node '{plan.name}': run-time output_shape {list(got)} differs from the model's declared "
                         f"output shape {list(plan.declared_output)}; only the declared geometry is supported")


def _weights(w: np.ndarray, plan: ConvTransposePlan, group: int, nsp: int) -> np.ndarray:
    """-> (*K, G, Cg, Mg)."""
    if plan.weight_layout == "OIHW":  # ONNX ConvTranspose: (C, M/G, *K)
        c, mg = w.shape[:2]
        k = w.reshape((group, c // group, mg) + w.shape[2:])
        return np.moveaxis(k, (0, 1, 2), (-3, -2, -1))
    if plan.weight_layout == "OHWI":  # TFLite: (M, *K, C), one group
        if group != 1:
            raise ModelError(f"node '{plan.name}': OHWI ConvTranspose weights need group 1")
        return np.moveaxis(w, 0, -1)[..., None, :, :]
    raise ModelError(f"node '{plan.name}': unknown weight_layout '{plan.weight_layout}'")


def geometry(plan: ConvTransposePlan, in_sizes, kshape, nsp):
    """(strides, dilations, begin, out): output o is full-result position o + begin per spatial dim."""
    s = ints(plan.strides, nsp, 1)
    d = ints(plan.dilations, nsp, 1)
    op = ints(plan.output_padding, nsp, 0)
    ext = [(k - 1) * dd + 1 for k, dd in zip(kshape, d)]
    full = [(i - 1) * ss + e for i, ss, e in zip(in_sizes, s, ext)]
    auto = plan.auto_pad.upper()
    oshape = plan.output_shape
    if oshape is not None and len(oshape) == nsp + 2:
        oshape = oshape[1:-1] if plan.layout == "NHWC" else oshape[2:]
    if plan.layout == "NHWC" and oshape is not None:
        begin = []
        for i in range(nsp):
            if auto in ("SAME_UPPER", "SAME_LOWER"):
                o2 = -(-oshape[i] // s[i])
            else:
                o2 = (oshape[i] - ext[i] + s[i]) // s[i]
            begin.append(max((o2 - 1) * s[i] + ext[i] - oshape[i], 0) // 2)
        return s, d, begin, list(oshape)
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        out = list(oshape) if oshape is not None else [i * ss for i, ss in zip(in_sizes, s)]
        total = [f + o - t for f, o, t in zip(full, op, out)]
        begin = [t // 2 if auto == "SAME_UPPER" else t - t // 2 for t in total]
        return s, d, begin, out
    pads = ints(plan.pads, 2 * nsp, 0) if plan.pads is not None and auto != "VALID" else [0] * (2 * nsp)
    begin = pads[:nsp]
    if oshape is not None:
        out = list(oshape)
    else:
        out = [f + o - pads[i] - pads[i + nsp] for i, (f, o) in enumerate(zip(full, op))]
    return s, d, begin, out


@kernel("ConvTranspose", "float", prepare=prepare_node)
def conv_transpose(plan: ConvTransposePlan, x, w, b=None, output_shape=None):
    check_output_shape(plan, output_shape)
    cdt = compute_dtype(x)
    nsp = x.ndim - 2
    xc = to_channels_last(x, plan.layout).astype(cdt, copy=False)
    cin = xc.shape[-1]
    wk = _weights(np.asarray(w, dtype=cdt), plan, plan.group, nsp)
    g, cg, mg = wk.shape[-3:]
    if g * cg != cin:
        raise ModelError(f"node '{plan.name}': weights expect {g * cg} input channels, got {cin}")
    kshape = wk.shape[:nsp]
    in_sizes = xc.shape[1:-1]
    s, d, begin, out = geometry(plan, in_sizes, kshape, nsp)
    full = [(i - 1) * ss + (k - 1) * dd + 1 for i, ss, k, dd in zip(in_sizes, s, kshape, d)]
    lo = [min(0, bb) for bb in begin]
    hi = [max(f, bb + o) for f, bb, o in zip(full, begin, out)]
    n = xc.shape[0]
    buf = np.zeros((n,) + tuple(h - l for h, l in zip(hi, lo)) + (g, mg), dtype=cdt)
    xg = xc.reshape(xc.shape[:-1] + (g, 1, cg))
    x2 = xc.reshape(-1, cin)
    for kidx in np.ndindex(*kshape):
        if g == 1:  # one 2-D GEMM per kernel cell
            contrib = (x2 @ wk[kidx][0]).reshape(xc.shape[:-1] + (1, mg))
        else:
            contrib = (xg @ wk[kidx])[..., 0, :]  # (N, *S, G, Mg)
        sl = tuple(slice(k * dd - l, k * dd - l + (i - 1) * ss + 1, ss)
                   for k, dd, l, i, ss in zip(kidx, d, lo, in_sizes, s))
        buf[(slice(None),) + sl] += contrib
    crop = tuple(slice(bb - l, bb - l + o) for bb, l, o in zip(begin, lo, out))
    y = buf[(slice(None),) + crop]
    y = y.reshape(y.shape[:-2] + (g * mg,))
    if b is not None:
        y = y + np.asarray(b, dtype=cdt).reshape(-1)
    return from_channels_last(y, plan.layout).astype(out_dtype(x), copy=False)
