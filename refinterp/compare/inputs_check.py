"""When the model input stored in a dump differs from the input the user gave, test the usual
preprocessing mistakes and report which one explains the difference.

Hypotheses (each a function of the given input, compared with the dump's input in real values):
channel order reversed (RGB/BGR); memory layout confusion (NHWC data read as NCHW and the reverse);
scaling ([0,1], [-1,1], [0,255], ImageNet mean/std, and any other affine a*x+b fitted by least
squares); rotations by 90/180/270 degrees; and channel reversal combined with each scaling.
A hypothesis explains the dump when it reproduces it within half an LSB of the input's scale
(quantized inputs, plus the rounding of the device's own quantization) or 1e-3 of its range (float).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..ir import Graph
from .align import model_layout
from .convert import to_real

_MEAN = np.array([0.485, 0.456, 0.406])
_STD = np.array([0.229, 0.224, 0.225])


def _chan_axis(layout: str | None, ndim: int) -> int | None:
    if ndim < 3 or not layout:
        return None
    return ndim - 1 if layout.upper().endswith("C") else 1


def _bshape(ndim: int, axis: int) -> list[int]:
    v = [1] * ndim
    v[axis] = -1
    return v


def _hypotheses(x: np.ndarray, layout: str | None) -> list[tuple[str, Callable[[np.ndarray], np.ndarray]]]:
    nd = x.ndim
    c = _chan_axis(layout, nd)
    hyps: list[tuple[str, Callable]] = []
    scalings: list[tuple[str, Callable]] = [
        ("scaled [0,255] -> [0,1] (x/255)", lambda a: a / 255.0),
        ("scaled [0,1] -> [0,255] (x*255)", lambda a: a * 255.0),
        ("scaled [0,255] -> [-1,1] (x/127.5-1)", lambda a: a / 127.5 - 1.0),
        ("scaled [-1,1] -> [0,255]", lambda a: (a + 1.0) * 127.5),
        ("scaled [0,1] -> [-1,1] (2x-1)", lambda a: 2.0 * a - 1.0),
        ("scaled [-1,1] -> [0,1]", lambda a: (a + 1.0) / 2.0),
    ]
    if c is not None and x.shape[c] == 3:
        mean, std = _MEAN.reshape(_bshape(nd, c)), _STD.reshape(_bshape(nd, c))
        scalings += [
            ("ImageNet mean/std applied to [0,1] input", lambda a: (a - mean) / std),
            ("ImageNet mean/std applied to [0,255] input", lambda a: (a - 255 * mean) / (255 * std)),
            ("ImageNet mean/std missing ([0,1])", lambda a: a * std + mean),
            ("ImageNet mean/std applied to [0,255] data scaled as [0,1]", lambda a: (a / 255.0 - mean) / std),
        ]
    if c is not None and x.shape[c] > 1:
        rev = lambda a: np.flip(a, axis=c)  # noqa: E731
        hyps.append(("channel order reversed (RGB <-> BGR)", rev))
        hyps += [(f"channel order reversed + {n}", (lambda f: lambda a: f(rev(a)))(f)) for n, f in scalings]
    hyps += scalings
    if nd >= 3 and c is not None:
        if c == 1:
            to_last = (0,) + tuple(range(2, nd)) + (1,)
            hyps.append(("layout: NHWC data fed as NCHW", lambda a: np.transpose(a, to_last).reshape(a.shape)))
            back = (0, nd - 1) + tuple(range(1, nd - 1))
            hyps.append(("layout: NCHW memory read as NHWC",
                         lambda a: np.transpose(a.reshape(tuple(a.shape[i] for i in to_last)), back)))
        else:
            to_first = (0, nd - 1) + tuple(range(1, nd - 1))
            hyps.append(("layout: NCHW data fed as NHWC", lambda a: np.transpose(a, to_first).reshape(a.shape)))
        sp = (2, 3) if c == 1 else (1, 2)
        if nd == 4:
            for k in (1, 2, 3):
                hyps.append((f"rotated {90 * k} degrees", (lambda k: lambda a: np.rot90(a, k, axes=sp))(k)))
                if c is not None and x.shape[c] > 1:
                    hyps.append((f"rotated {90 * k} degrees + channel order reversed",
                                 (lambda k: lambda a: np.flip(np.rot90(a, k, axes=sp), axis=c))(k)))
    return hyps


def _score(pred: np.ndarray, d: np.ndarray) -> tuple[float, float]:
    if pred.shape != d.shape:
        return math.inf, math.inf
    with np.errstate(all="ignore"):
        err = pred - d
        mx = float(np.nanmax(np.abs(err))) if err.size else 0.0
        rng = float(np.ptp(d)) if d.size else 0.0
        rmse = float(np.sqrt(np.nanmean(err * err))) if err.size else 0.0
    return mx, (rmse / rng if rng > 0 else (0.0 if rmse == 0 else math.inf))


def _affine(x: np.ndarray, d: np.ndarray) -> tuple[float, float] | None:
    xv, dv = x.ravel(), d.ravel()
    if xv.size < 2 or np.ptp(xv) == 0:
        return None
    a, b = np.polyfit(xv, dv, 1)
    return float(a), float(b)


def check_inputs(graph: Graph, samples: list[dict[str, np.ndarray]], aligned: dict[str, list[np.ndarray]],
                 dev_qp: dict[str, Any], policy) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name in graph.inputs:
        if name not in aligned:
            continue
        info = graph.tensors[name]
        qp = info.quant
        for si, feed in enumerate(samples):
            if si >= len(aligned[name]):
                break
            x = to_real(np.asarray(feed[name]), qp)
            dq = dev_qp.get(name) or (qp if aligned[name][si].dtype.kind in "iu" else None)
            d = to_real(aligned[name][si], dq)
            scale = float(np.max(dq.scale)) if dq is not None else 0.0
            tol = max(scale, 1e-3 * (float(np.ptp(d)) if d.size else 0.0), 1e-6)
            mx, nr = _score(x, d)
            entry: dict[str, Any] = {"input": name, "sample": si, "matches": mx <= tol, "max_abs_error": mx,
                                     "nrmse": nr, "explained_by": None, "candidates": []}
            if mx > tol:
                scored = []
                for label, f in _hypotheses(x, model_layout(graph, name, x.ndim)):
                    try:
                        pred = f(x)
                    except (ValueError, IndexError):
                        continue
                    pm, pn = _score(pred, d)
                    scored.append((pn, pm, label))
                ab = _affine(x, d) if x.shape == d.shape else None
                if ab is not None:
                    pm, pn = _score(ab[0] * x + ab[1], d)
                    scored.append((pn, pm, f"affine rescale a*x+b (a={ab[0]:.6g}, b={ab[1]:.6g})"))
                # explaining hypotheses first, named ones before the fitted affine, then by error
                scored.sort(key=lambda t: (t[1] > tol, t[2].startswith("affine"), t[0], t[1]))
                entry["candidates"] = [{"hypothesis": lbl, "nrmse": pn, "max_abs_error": pm}
                                       for pn, pm, lbl in scored[:3]]
                if scored and scored[0][1] <= tol:
                    entry["explained_by"] = scored[0][2]
            out.append(entry)
    return out
