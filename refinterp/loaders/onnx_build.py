"""Shared state while an ONNX graph is turned into the IR (no onnx import here)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import ModelError
from ..ir import Node, QuantParams, TensorInfo


class BuildContext:
    """Tensors being built, plus helpers the normalisers use to add constants and intermediates."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.tensors: dict[str, TensorInfo] = {}

    # -- queries -----------------------------------------------------------------------------
    def info(self, name: str) -> TensorInfo | None:
        return self.tensors.get(name) if name else None

    def const(self, name: str) -> np.ndarray | None:
        t = self.info(name)
        return None if t is None else t.const

    def shape(self, name: str) -> tuple[int | None, ...] | None:
        t = self.info(name)
        return None if t is None else t.shape

    def rank(self, name: str) -> int | None:
        s = self.shape(name)
        return None if s is None else len(s)

    def dtype(self, name: str, default: str = "float32") -> str:
        t = self.info(name)
        return t.dtype if t is not None and t.dtype else default

    # -- additions ---------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        name, k = hint, 1
        while name in self.tensors:
            name = f"{hint}_{k}"
            k += 1
        return name

    def add_const(self, hint: str, value: Any, dtype: str | None = None) -> str:
        arr = np.asarray(value, dtype=dtype) if dtype else np.asarray(value)
        name = self.fresh(hint)
        self.tensors[name] = TensorInfo(name, tuple(int(d) for d in arr.shape), str(arr.dtype), const=arr)
        return name

    def add_tensor(self, hint: str, shape: tuple[int | None, ...] | None, dtype: str) -> str:
        name = self.fresh(hint)
        self.tensors[name] = TensorInfo(name, shape, dtype)
        return name

    def ensure(self, name: str, dtype: str) -> TensorInfo:
        """TensorInfo for a node output that shape inference did not describe."""
        t = self.tensors.get(name)
        if t is None:
            t = self.tensors[name] = TensorInfo(name, None, dtype)
        return t

    def set_quant(self, name: str, qp: QuantParams, node: Node) -> None:
        t = self.tensors.get(name)
        if t is None:
            raise ModelError(f"node '{node.name}' ({node.source_op}): tensor '{name}' is not described",
                             self.where)
        if qp.axis is not None and qp.scale.size > 1 and not qp.block_size and t.shape is not None:
            ax = qp.axis + len(t.shape) if qp.axis < 0 else qp.axis
            if not 0 <= ax < len(t.shape) or t.shape[ax] not in (None, qp.scale.size):
                raise ModelError(f"node '{node.name}' ({node.source_op}): {qp.scale.size} per-axis scales for "
                                 f"tensor '{name}' do not match axis {qp.axis} of its shape {list(t.shape)}",
                                 self.where)
        old = t.quant
        if old is not None and not (old.axis == qp.axis and np.array_equal(old.scale, qp.scale)
                                    and np.array_equal(old.zero_point, qp.zero_point)):
            raise ModelError(f"node '{node.name}' ({node.source_op}): tensor '{name}' already has different "
                             f"quantization parameters (scale {old.scale.tolist()} vs {qp.scale.tolist()})",
                             self.where)
        t.quant = qp


def set_input(node: Node, pos: int, name: str) -> None:
    while len(node.inputs) <= pos:
        node.inputs.append("")
    node.inputs[pos] = name


def attr_to_input(node: Node, ctx: BuildContext, attr: str, pos: int, dtype: str) -> None:
    """Move attribute ``attr`` (if present) to input ``pos`` as a constant of ``dtype``."""
    if attr not in node.attrs:
        return
    value = node.attrs.pop(attr)
    set_input(node, pos, ctx.add_const(f"{node.name}:{attr}", value, dtype))
