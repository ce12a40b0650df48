"""ONNX NonMaxSuppression and Einsum (float; the detection heads and attention blocks exporters
emit).

NonMaxSuppression (the spec; ONNX Runtime and onnx.reference compute it the same way): per batch
and class, candidates are the boxes whose score is > score_threshold (all boxes when that input is
absent), taken by score descending, equal scores by box index ascending; a candidate is dropped
when its IoU with an already selected box is > iou_threshold; at most max_output_boxes_per_class
(absent: 0, so nothing) per class.  IoU in float32 scalars: corner boxes may list either corner
first (``center_point_box`` 0) or be (x_center, y_center, width, height) (1); an empty intersection
or a non-positive area or union suppresses nothing.  Output: int64 [selected, 3] rows (batch,
class, box) in selection order.

Einsum: ``numpy.einsum`` in the inputs' dtype (float32 sums are not in a fixed order: equal to a
reference to float rounding, not bit for bit).
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError
from ..int.shape import BOTH
from ..registry import kernel

F32 = np.float32


def _prepare_nms(node, ctx) -> dict:
    cpb = int(node.attrs.get("center_point_box", 0))
    if cpb not in (0, 1):
        raise InputError(f"node '{node.name}' (NonMaxSuppression): center_point_box must be 0 or 1, got {cpb}")
    return {"center": cpb, "where": f"node '{node.name}' (NonMaxSuppression)"}


def _extent(b, center: int):
    """(x_min, x_max, y_min, y_max) in float32."""
    if center:
        hw, hh = b[2] / F32(2), b[3] / F32(2)
        return b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh
    return min(b[1], b[3]), max(b[1], b[3]), min(b[0], b[2]), max(b[0], b[2])


def _suppress(b1, b2, center: int, iou_threshold) -> bool:
    x1a, x1b, y1a, y1b = _extent(b1, center)
    x2a, x2b, y2a, y2b = _extent(b2, center)
    ix0, ix1 = max(x1a, x2a), min(x1b, x2b)
    if ix1 <= ix0:
        return False
    iy0, iy1 = max(y1a, y2a), min(y1b, y2b)
    if iy1 <= iy0:
        return False
    inter = (ix1 - ix0) * (iy1 - iy0)
    if inter <= 0:
        return False
    a1 = (x1b - x1a) * (y1b - y1a)
    a2 = (x2b - x2a) * (y2b - y2a)
    union = a1 + a2 - inter
    if a1 <= 0 or a2 <= 0 or union <= 0:
        return False
    return bool(inter / union > iou_threshold)


def _scalar(v, default, dtype):
    a = None if v is None else np.asarray(v)
    return default if a is None or a.size == 0 else dtype(a.reshape(-1)[0])


@kernel("NonMaxSuppression", "float", prepare=_prepare_nms)
def non_max_suppression(plan, boxes, scores, max_out=None, iou=None, score_threshold=None):
    boxes = np.asarray(boxes, F32)
    scores = np.asarray(scores, F32)
    if boxes.ndim != 3 or boxes.shape[2] != 4 or scores.ndim != 3 or scores.shape[0] != boxes.shape[0] \
            or scores.shape[2] != boxes.shape[1]:
        raise InputError(f"{plan['where']}: boxes {list(boxes.shape)} and scores {list(scores.shape)} must be "
                         f"[batch, boxes, 4] and [batch, classes, boxes]")
    limit = max(_scalar(max_out, 0, int), 0)
    iou_t = _scalar(iou, F32(0), F32)
    thr = None if score_threshold is None or np.asarray(score_threshold).size == 0 else \
        _scalar(score_threshold, F32(0), F32)
    rows: list[tuple[int, int, int]] = []
    for bi in range(boxes.shape[0]):
        bx = boxes[bi]
        for ci in range(scores.shape[1]):
            s = scores[bi, ci]
            cand = np.arange(s.size) if thr is None else np.flatnonzero(s > thr)
            order = cand[np.lexsort((cand, -s[cand]))]  # score descending, index ascending
            chosen: list[int] = []
            for k in order:
                if len(chosen) >= limit:
                    break
                if not any(_suppress(bx[k], bx[j], plan["center"], iou_t) for j in chosen):
                    chosen.append(int(k))
                    rows.append((bi, ci, int(k)))
    return np.array(rows, np.int64).reshape(-1, 3)


def _prepare_einsum(node, ctx) -> dict:
    eq = node.attrs.get("equation")
    if not isinstance(eq, (str, bytes)) or not eq:
        raise InputError(f"node '{node.name}' (Einsum): missing 'equation'")
    return {"equation": (eq.decode() if isinstance(eq, bytes) else eq).replace(" ", ""),
            "where": f"node '{node.name}' (Einsum)"}


@kernel("Einsum", BOTH, prepare=_prepare_einsum)
def einsum(plan, *xs):
    try:
        y = np.einsum(plan["equation"], *[np.asarray(x) for x in xs])
    except ValueError as e:
        raise InputError(f"{plan['where']}: {e}") from None
    return np.asarray(y).astype(np.result_type(*xs), copy=False)
