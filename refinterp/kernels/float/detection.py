"""``TFLite_Detection_PostProcess`` (the SSD detectors' custom op), as LiteRT's
``kernels/detection_postprocess.cc`` computes it.  All arithmetic is float; quantized (uint8) box
encodings, scores and anchors arrive dequantized, ``(float(q) - zp) * scale`` in float32, which is
what the kernel's own dequantizers compute.

Decoding, per anchor, in double then rounded to float32 once per value (the C++ casts)::

    yc = f32(f64(ty) / f64(y_scale) * f64(ah) + f64(ay))        xc likewise with x, aw, ax
    hh = f32(0.5 * exp(f64(th) / f64(h_scale)) * f64(ah))       hw likewise with w, aw
    box = (yc - hh, xc - hw, yc + hh, xc + hw)                  float32 subtractions / additions

NMS (one class at a time): scores >= score threshold, kept in index order, sorted by a *stable*
descending sort; a candidate is dropped when its IoU with a selected box is > the IoU threshold.
IoU in float32: areas, intersection clamped at 0, ``inter / (area_i + area_j - inter)``, 0 when an
area is <= 0.  Decoded boxes with ymin > ymax or xmin > xmax make the kernel fail (InputError).

Class choice: ``use_regular_nms`` false ("fast"): each anchor's best ``max_classes_per_detection``
classes by ``std::partial_sort`` (1: the first maximum), NMS on the anchors' best scores.
``std::partial_sort`` is not stable: ties are ordered as libstdc++'s heap selection orders them
(the x86-64 / aarch64 Linux builds; an Android build with libc++ may order ties differently),
reproduced step for step in ``_partial_sort``.  True ("regular"): NMS per class, each class's picks
merged stably into a running best-``max_detections`` list (LiteRT 2.3 with one thread; with
several threads LiteRT hands classes to workers dynamically and merges their lists in worker order,
so equal scores can come out in a different order from run to run).

Outputs (float32): boxes [1, N, 4], classes [1, N], scores [1, N], num_detections [1], with
N = max_detections * max_classes_per_detection; unused rows are 0 in the regular form and left as
the kernel leaves them (0 in a fresh tensor) in the fast form.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError
from ..registry import kernel

F32 = np.float32


@dataclass(frozen=True)
class DetectionPlan:
    where: str
    max_detections: int
    max_classes_per_detection: int
    detections_per_class: int
    use_regular_nms: bool
    score_threshold: np.float32
    iou_threshold: np.float32
    num_classes: int
    scales: tuple[float, float, float, float]  # y, x, h, w: float32 options widened to double


def _prepare(node, ctx) -> DetectionPlan:
    a = node.attrs
    return DetectionPlan(
        where=f"node '{node.name}' ({node.source_op or node.op})",
        max_detections=int(a.get("max_detections", 0)),
        max_classes_per_detection=int(a.get("max_classes_per_detection", 1)),
        detections_per_class=int(a.get("detections_per_class", 100)),
        use_regular_nms=bool(a.get("use_regular_nms", False)),
        score_threshold=F32(a.get("nms_score_threshold", 0.0)),
        iou_threshold=F32(a.get("nms_iou_threshold", 0.0)),
        num_classes=int(a.get("num_classes", 0)),
        scales=tuple(float(F32(a.get(k, 1.0))) for k in ("y_scale", "x_scale", "h_scale", "w_scale")))


def decode(enc: np.ndarray, anchors: np.ndarray, scales: list[float]) -> np.ndarray:
    """[num_boxes, 4] corner boxes (ymin, xmin, ymax, xmax) from [num_boxes, >=4] encodings."""
    e = enc[:, :4].astype(np.float64)
    an = anchors[:, :4].astype(np.float64)
    sy, sx, sh, sw = scales
    yc = (e[:, 0] / sy * an[:, 2] + an[:, 0]).astype(F32)
    xc = (e[:, 1] / sx * an[:, 3] + an[:, 1]).astype(F32)
    hh = (0.5 * np.exp(e[:, 2] / sh) * an[:, 2]).astype(F32)
    hw = (0.5 * np.exp(e[:, 3] / sw) * an[:, 3]).astype(F32)
    return np.stack([yc - hh, xc - hw, yc + hh, xc + hw], axis=1).astype(F32)


def _iou(boxes: np.ndarray, i: int, js: np.ndarray) -> np.ndarray:
    bi, bj = boxes[i], boxes[js]
    area_i = F32((bi[2] - bi[0]) * (bi[3] - bi[1]))
    area_j = ((bj[:, 2] - bj[:, 0]) * (bj[:, 3] - bj[:, 1])).astype(F32)
    ih = np.maximum(np.minimum(bi[2], bj[:, 2]) - np.maximum(bi[0], bj[:, 0]), F32(0))
    iw = np.maximum(np.minimum(bi[3], bj[:, 3]) - np.maximum(bi[1], bj[:, 1]), F32(0))
    inter = (ih * iw).astype(F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        iou = (inter / ((area_i + area_j) - inter)).astype(F32)
    return np.where((area_i <= 0) | (area_j <= 0), F32(0), iou)


def _nms(boxes: np.ndarray, scores: np.ndarray, plan: dict, max_out: int) -> list[int]:
    """Indices (into ``scores``) selected by single-class NMS, best first."""
    keep = np.flatnonzero(scores >= plan.score_threshold)
    order = keep[np.argsort(-scores[keep], kind="stable")]
    active = np.ones(order.size, bool)
    selected: list[int] = []
    for i in range(order.size):
        if len(selected) >= max_out or not active[i:].any():
            break
        if not active[i]:
            continue
        selected.append(int(order[i]))
        active[i] = False
        rest = np.flatnonzero(active[i + 1:]) + i + 1
        if rest.size:
            drop = _iou(boxes, int(order[i]), order[rest]) > plan.iou_threshold
            active[rest[drop]] = False
    return selected


def _partial_sort(values: np.ndarray, k: int) -> list[int]:
    """The first ``k`` indices of libstdc++ ``std::partial_sort(idx, idx + k, idx + n, v[i] > v[j])``
    over ``idx = 0..n-1`` (heap selection, then heap sort of the first k), ties included; k == 1 is
    LiteRT's ``ArgMaxVector`` (the first maximum)."""
    n = len(values)
    if k <= 0 or n == 0:
        return []
    if k == 1:
        return [int(np.argmax(values))] if n else []
    v = [float(x) for x in values]
    a = list(range(n))

    def comp(i, j):
        return v[i] > v[j]

    def adjust(first_len, hole, value):
        top, child = hole, hole
        while child < (first_len - 1) // 2:
            child = 2 * (child + 1)
            if comp(a[child], a[child - 1]):
                child -= 1
            a[hole] = a[child]
            hole = child
        if first_len % 2 == 0 and child == (first_len - 2) // 2:
            child = 2 * (child + 1)
            a[hole] = a[child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and comp(a[parent], value):
            a[hole] = a[parent]
            hole = parent
            parent = (hole - 1) // 2
        a[hole] = value

    if k > 1:
        for parent in range((k - 2) // 2, -1, -1):
            adjust(k, parent, a[parent])
    for i in range(k, n):
        if comp(a[i], a[0]):
            value = a[i]
            a[i] = a[0]
            adjust(k, 0, value)
    for end in range(k - 1, 0, -1):
        value = a[end]
        a[end] = a[0]
        adjust(end, 0, value)
    return a[:k]


@kernel("DetectionPostProcess", "float", prepare=_prepare)
def detection_postprocess(plan, box_encodings, class_predictions, anchors):
    enc = np.asarray(box_encodings, F32)
    scores = np.asarray(class_predictions, F32)
    if enc.ndim != 3 or scores.ndim != 3 or enc.shape[0] != 1 or scores.shape[:2] != enc.shape[:2]:
        raise InputError(f"{plan.where}: box encodings {list(enc.shape)} and class predictions "
                         f"{list(scores.shape)} must be [1, boxes, 4+] and [1, boxes, classes]")
    boxes = decode(enc[0], np.asarray(anchors, F32), plan.scales)
    if np.any(boxes[:, 0] > boxes[:, 2]) or np.any(boxes[:, 1] > boxes[:, 3]):
        raise InputError(f"{plan.where}: a decoded box has ymin > ymax or xmin > xmax (LiteRT fails the node)")
    n_cls, with_bg = plan.num_classes, scores.shape[2]
    offset = with_bg - n_cls
    if not 0 <= offset <= 1:
        raise InputError(f"{plan.where}: {with_bg} score columns for {n_cls} classes")
    s = scores[0][:, offset:offset + n_cls]
    max_det, per_det = plan.max_detections, plan.max_classes_per_detection
    n_out = max_det * per_det
    out_boxes = np.zeros((1, n_out, 4), F32)
    out_cls = np.zeros((1, n_out), F32)
    out_scores = np.zeros((1, n_out), F32)
    if plan.use_regular_nms:
        count = _regular(plan, boxes, s, max_det, out_boxes, out_cls, out_scores)
    else:
        count = _fast(plan, boxes, s, out_boxes, out_cls, out_scores)
    return out_boxes, out_cls, out_scores, np.array([count], F32)


def _fast(plan, boxes, s, out_boxes, out_cls, out_scores) -> int:
    per_det = plan.max_classes_per_detection
    k = min(per_det, s.shape[1])
    top = [_partial_sort(row, k) for row in s]
    best = np.array([s[r, top[r][0]] for r in range(s.shape[0])], F32)
    selected = _nms(boxes, best, plan, plan.max_detections)
    for n, a in enumerate(selected):
        for col in range(k):
            j = per_det * n + col
            out_boxes[0, j] = boxes[a]
            out_cls[0, j] = top[a][col]
            out_scores[0, j] = s[a, top[a][col]]
    return len(selected)


def _regular(plan, boxes, s, max_det, out_boxes, out_cls, out_scores) -> int:
    """Per class NMS (at most min(detections_per_class, max_detections) picks), each class's picks
    merged stably into the running list (the running entries first among equal scores, as
    ``std::inplace_merge``), which is then cut to ``max_detections``."""
    per_class = min(plan.detections_per_class, max_det)
    run: list[tuple[float, int, int]] = []  # (score, anchor, class), best first
    for c in range(s.shape[1]):
        picked = [(float(s[a, c]), a, c) for a in _nms(boxes, s[:, c], plan, per_class)]
        run = sorted(run + picked, key=lambda t: -t[0])[:max_det]  # stable: a merge of two sorted lists
    for j, (v, a, c) in enumerate(run):
        out_boxes[0, j] = boxes[a]
        out_cls[0, j] = c
        out_scores[0, j] = v
    return len(run)
