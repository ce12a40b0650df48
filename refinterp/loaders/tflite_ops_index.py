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
    # control flow: the subgraph indices become Graph attributes once every subgraph is loaded
    # (tflite.Reader.graph -> link_subgraphs)
    "WHILE": lambda c: ("While", list(c.inputs), {"cond_subgraph": int(c.opt("cond_subgraph_index", -1)),
                                                   "body_subgraph": int(c.opt("body_subgraph_index", -1))}),
    "IF": lambda c: ("If", list(c.inputs), {"then_subgraph": int(c.opt("then_subgraph_index", -1)),
                                             "else_subgraph": int(c.opt("else_subgraph_index", -1)),
                                             "branch_inputs": 1}),
}

def _lstm(ctx: OpContext) -> Result:
    """UNIDIRECTIONAL_SEQUENCE_LSTM: 24 inputs (absent optional ones ""); the output-state and
    cell-state inputs (18, 19) are variable tensors, whose values after the run the node also
    returns as ``<state>#next`` (runtime.py carries them to the next run)."""
    ins = list(ctx.inputs) + [""] * (24 - len(ctx.inputs))
    states = [(f"{ins[k]}#next", ins[k]) for k in (18, 19) if ins[k]]
    return "UnidirectionalSequenceLSTM", ins, {
        "cell_activation": ctx.activation(), "cell_clip": float(ctx.opt("cell_clip", 0.0)),
        "proj_clip": float(ctx.opt("proj_clip", 0.0)), "time_major": bool(ctx.opt("time_major", False)),
        "asymmetric_quantize_inputs": bool(ctx.opt("asymmetric_quantize_inputs", False)),
        "_state_outputs": states}


INDEX_CONVERTERS["UNIDIRECTIONAL_SEQUENCE_LSTM"] = _lstm


def _bilstm(ctx: OpContext) -> Result:
    """BIDIRECTIONAL_SEQUENCE_LSTM: 48 inputs; states 35-38 are variable tensors (``<state>#next``
    outputs after the one or two sequence outputs)."""
    ins = list(ctx.inputs) + [""] * (48 - len(ctx.inputs))
    states = [(f"{ins[k]}#next", ins[k]) for k in (35, 36, 37, 38) if ins[k]]
    if len(states) != 4:
        states = []  # the kernel returns all four: without all of them, none is carried
    return "BidirectionalSequenceLSTM", ins, {
        "cell_activation": ctx.activation(), "cell_clip": float(ctx.opt("cell_clip", 0.0)),
        "proj_clip": float(ctx.opt("proj_clip", 0.0)), "time_major": bool(ctx.opt("time_major", True)),
        "merge_outputs": bool(ctx.opt("merge_outputs", False)),
        "asymmetric_quantize_inputs": bool(ctx.opt("asymmetric_quantize_inputs", False)), "_state_outputs": states}


INDEX_CONVERTERS["BIDIRECTIONAL_SEQUENCE_LSTM"] = _bilstm


def _svdf(ctx: OpContext) -> Result:
    """SVDF: input 4 is the activation-state variable tensor; its new value is ``<state>#next``."""
    ins = list(ctx.inputs)
    states = [(f"{ins[4]}#next", ins[4])] if len(ins) > 4 and ins[4] else []
    return "SVDF", ins, {"rank": int(ctx.opt("rank", 1)), "svdf_activation": ctx.activation(),
                         "_state_outputs": states}


INDEX_CONVERTERS["SVDF"] = _svdf

# canonical op -> ((index attribute, Graph attribute), ...)
SUBGRAPH_ATTRS = {"While": (("cond_subgraph", "cond"), ("body_subgraph", "body")),
                  "If": (("then_subgraph", "then_branch"), ("else_subgraph", "else_branch"))}


def link_subgraphs(graphs: dict[int, "object"]) -> str | None:
    """Replace WHILE / IF subgraph indices by the subgraphs themselves, in every graph; returns a
    message for the first index that names no subgraph (or the main one), else None."""
    for g in graphs.values():
        for node in g.nodes:
            for idx_key, graph_key in SUBGRAPH_ATTRS.get(node.op, ()):
                if idx_key not in node.attrs:
                    continue
                k = node.attrs.pop(idx_key)
                if k not in graphs or k == 0:
                    return f"node '{node.name}' ({node.source_op or node.op}): {idx_key} index {k} names no subgraph"
                node.attrs[graph_key] = graphs[k]
    return _cycle(graphs)


def _cycle(graphs: dict) -> str | None:
    """A subgraph that (through WHILE / IF) contains itself would be prepared forever."""
    def children(g):
        return [v for n in g.nodes if n.op in SUBGRAPH_ATTRS for v in n.attrs.values() if hasattr(v, "nodes")]

    for k, g in graphs.items():
        seen, todo = set(), list(children(g))
        while todo:
            c = todo.pop()
            if c is g:
                return f"subgraph {k} ('{g.name}') calls itself through WHILE / IF"
            if id(c) not in seen:
                seen.add(id(c))
                todo += children(c)
    return None


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
