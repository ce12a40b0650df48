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
