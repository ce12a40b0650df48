"""TFLite builtins that index, generate, compare or rearrange (no arithmetic on quantized values):
the converter-made shape subgraphs and lookup ops real models carry.  Part of the TFLite loader
(``tflite_ops.convert`` consults this table after the main one); kernels in
refinterp/kernels/float/index.py, float/reduce.py and int/space_batch.py."""
from __future__ import annotations

from typing import Callable

from .tflite_ops import OpContext, Result, _plain, _reduce


def _one_hot(ctx: OpContext) -> Result:
    # TFLite: (indices, depth, on_value, off_value); ONNX OneHot takes values = [off, on]: the kernel
    # reads the four-input form directly.
    return "OneHot", list(ctx.inputs), {"axis": int(ctx.opt("axis", -1))}


INDEX_CONVERTERS: dict[str, Callable[[OpContext], Result]] = {
    "GATHER_ND": _plain("GatherND"), "RANGE": _plain("Range"), "FILL": _plain("Fill"),
    "ZEROS_LIKE": _plain("ZerosLike"), "REVERSE_V2": _plain("Reverse"),
    "BROADCAST_ARGS": _plain("BroadcastArgs"),
    "CUMSUM": lambda c: ("CumSum", list(c.inputs), {"exclusive": int(bool(c.opt("exclusive", False))),
                                                    "reverse": int(bool(c.opt("reverse", False)))}),
    "TOPK_V2": _plain("TopK", axis=-1, largest=1, sorted=1),
    "EMBEDDING_LOOKUP": lambda c: ("Gather", [c.inputs[1], c.inputs[0]], {"axis": 0}),
    "NOT_EQUAL": _plain("NotEqual"), "GREATER_EQUAL": _plain("GreaterOrEqual"),
    "LESS_EQUAL": _plain("LessOrEqual"), "FLOOR_DIV": _plain("FloorDiv"), "FLOOR_MOD": _plain("Mod", fmod=0),
    "SIN": _plain("Sin"), "COS": _plain("Cos"),
    "ONE_HOT": _one_hot,
    "REDUCE_ANY": _reduce("ReduceAny"), "REDUCE_ALL": _reduce("ReduceAll"),
    "WHERE": _plain("ArgWhere"),
    "SCATTER_ND": _plain("ScatterNdToShape"),
    "SPACE_TO_BATCH_ND": _plain("SpaceToBatchND"), "BATCH_TO_SPACE_ND": _plain("BatchToSpaceND"),
}


_DETECTION_KEYS = {"max_detections": int, "max_classes_per_detection": int, "detections_per_class": int,
                   "use_regular_nms": bool, "nms_score_threshold": float, "nms_iou_threshold": float,
                   "num_classes": int, "y_scale": float, "x_scale": float, "h_scale": float, "w_scale": float}


def detection_options(raw: bytes) -> dict:
    """The flexbuffer map of ``TFLite_Detection_PostProcess`` custom options as node attributes
    (LiteRT's defaults: detections_per_class 100, use_regular_nms false); ValueError if unreadable."""
    from flatbuffers import flexbuffers

    try:
        m = flexbuffers.Loads(raw) if raw else None
    except Exception as e:  # noqa: BLE001 - any decoding failure of untrusted bytes
        raise ValueError(f"unreadable custom options ({type(e).__name__})") from None
    if not isinstance(m, dict):
        raise ValueError("custom options are not a flexbuffer map")
    out = {"detections_per_class": 100, "use_regular_nms": False, "max_classes_per_detection": 1}
    for key, typ in _DETECTION_KEYS.items():
        if m.get(key) is not None:
            try:
                out[key] = typ(m[key])
            except (TypeError, ValueError):
                raise ValueError(f"option {key!r} is not a {typ.__name__}") from None
    missing = [k for k in ("max_detections", "num_classes", "nms_iou_threshold") if k not in out]
    if missing:
        raise ValueError(f"missing option(s) {', '.join(missing)}")
    return out
