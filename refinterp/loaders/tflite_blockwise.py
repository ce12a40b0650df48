"""TFLite ``BlockwiseQuantization`` (ai-edge-quantizer's int4 weight-only layers): reading it, and
attaching it to the one operand that takes it.

``BlockwiseQuantization {scales: int; zero_points: int; block_size: int}`` (schema slots 4, 6, 8; the
``tflite`` package predates it): the scales live in another tensor (float16, ``[O, K / block]``),
one per block of the last axis.  LiteRT ignores ``zero_points``.  Only FULLY_CONNECTED's filter takes
them: the node gets ``blockwise`` = the block size and the scales tensor as its fourth input.  A
blockwise operand anywhere else is refused, since it would otherwise run as unscaled integer codes.
"""
from __future__ import annotations

from typing import Any, Callable

import flatbuffers

from ..errors import UnsupportedOpError

BLOCKWISE = 2  # QuantizationDetails.BlockwiseQuantization


def details(q: Any, name: str, fail: Callable[[str], Exception]) -> tuple[int, int] | None:
    """(scales tensor index, block size) of a blockwise-quantized tensor, None for any other."""
    if int(q.DetailsType()) != BLOCKWISE:
        return None
    t = flatbuffers.table.Table(q.Details().Bytes, q.Details().Pos)

    def field(slot: int) -> int:
        off = t.Offset(slot)
        return int(t.Get(flatbuffers.number_types.Int32Flags, t.Pos + off)) if off else 0

    scales, block = field(4), field(8)
    if block <= 0:
        raise fail(f"tensor '{name}': blockwise quantization with block size {block}")
    return scales, block


def attach(bname: str, node: str, canon: str, ins: list[str], attrs: dict, blockwise: dict[str, tuple[int, int]],
           tensor_name: Callable[[int, str], str], where: str) -> tuple[list[str], dict]:
    used = [(i, n) for i, n in enumerate(ins) if n in blockwise]
    if not used:
        return ins, attrs
    if canon != "FullyConnected" or [i for i, _ in used] != [1]:
        raise UnsupportedOpError(f"{bname} node '{node}': blockwise-quantized operand '{used[0][1]}' is not "
                                 f"supported (only a FULLY_CONNECTED filter)", where)
    scales_index, block = blockwise[ins[1]]
    ins = ins + [""] * (3 - len(ins)) + [tensor_name(scales_index, "blockwise scales")]
    attrs["blockwise"] = block
    return ins, attrs
