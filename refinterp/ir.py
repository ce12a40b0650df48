"""One intermediate representation for ONNX and TFLite models.

Contract (shared by loaders, kernels and the runtime):

* Tensor names are exactly the names stored in the model file.  TFLite tensors that share a
  name are disambiguated by the loader (suffix ``:<index>``) and the original kept in
  ``TensorInfo.source_name``.
* ``TensorInfo.dtype`` is the *storage* dtype as a NumPy dtype string (``"int8"``, ``"float32"``...).
* Quantization lives on the tensor: ``QuantParams`` holds float32 scales and int64 zero points
  (one entry for per-tensor, one per slice of ``axis`` for per-axis, and ``block_size`` > 0 for
  blocked ONNX quantization).
* ``Node.op`` is a canonical op name (see ``refinterp/kernels/OPS.md``).  Attributes follow
  ONNX's names and meaning for that op (latest opset form: values that newer opsets take as
  inputs are inputs), plus the canonical extras ``layout`` (``"NCHW"`` / ``"NHWC"``),
  ``activation`` (fused activation) and ``weight_layout``.
* Missing optional inputs are the empty string ``""``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np

FUSED_ACTIVATIONS = ("RELU", "RELU6", "RELU_N1_TO_1", "TANH", "SIGN_BIT")

# Sub-byte types are held one value per byte in the next wider NumPy integer type.
_CONTAINERS = {"int4": "int8", "uint4": "uint8", "int2": "int8", "uint2": "uint8"}


def storage_dtype(name: str) -> np.dtype:
    """NumPy dtype that holds a tensor declared as ``name`` (int4 values live in int8, range [-8, 7])."""
    return np.dtype(_CONTAINERS.get(str(name), name))


@dataclass
class QuantParams:
    """Affine quantization: real = scale * (q - zero_point).

    scale: float32[k] (k = 1 per-tensor, else the size of ``axis`` or the number of blocks).
    zero_point: int64[k].
    axis: None for per-tensor, else the quantized dimension (non-negative).
    block_size: 0 unless ONNX blocked quantization.
    """

    scale: np.ndarray
    zero_point: np.ndarray
    axis: int | None = None
    block_size: int = 0

    def __post_init__(self) -> None:
        self.scale = np.atleast_1d(np.asarray(self.scale, dtype=np.float32))
        self.zero_point = np.atleast_1d(np.asarray(self.zero_point, dtype=np.int64))
        if self.zero_point.size == 1 and self.scale.size > 1:
            self.zero_point = np.full(self.scale.shape, int(self.zero_point.ravel()[0]), np.int64)

    @property
    def per_tensor(self) -> bool:
        return self.axis is None or (self.scale.size == 1 and self.block_size == 0)

    def broadcast(self, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
        """Scale and zero point shaped to broadcast against an array of ``shape``."""
        if self.per_tensor:
            return self.scale[:1].reshape(()), self.zero_point[:1].reshape(())
        axis = self.axis % len(shape)
        if self.block_size:  # scale/zero_point keep the tensor's rank; dim ``axis`` is ceil(n/block)
            idx = [slice(None)] * len(shape)
            idx[axis] = slice(0, shape[axis])
            s = np.repeat(self.scale, self.block_size, axis=axis)[tuple(idx)]
            z = np.repeat(self.zero_point, self.block_size, axis=axis)[tuple(idx)]
            return s, z
        view = [1] * len(shape)
        view[axis] = -1
        return self.scale.reshape(view), self.zero_point.reshape(view)

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"scale": [float(s) for s in self.scale.ravel()],
                             "zero_point": [int(z) for z in self.zero_point.ravel()],
                             "axis": self.axis}
        if self.block_size:
            d["block_size"] = self.block_size
        return d


def dequantize(q: np.ndarray, qp: QuantParams) -> np.ndarray:
    """float32(scale * (q - zp)); the product is formed in float32 as most runtimes do."""
    s, z = qp.broadcast(q.shape)
    return ((q.astype(np.int64) - z).astype(np.float32) * s).astype(np.float32)


@dataclass
class TensorInfo:
    name: str
    shape: tuple[int | None, ...] | None  # None entries = unknown / dynamic dims; None = unknown rank
    dtype: str
    quant: QuantParams | None = None
    const: np.ndarray | None = None
    layout: str | None = None  # "NHWC", "NCHW" or None when not an image tensor
    source_name: str | None = None
    index: int | None = None  # TFLite tensor index
    dim_params: tuple[str | None, ...] | None = None  # ONNX symbolic dim names (dim_param), where named

    @property
    def is_const(self) -> bool:
        return self.const is not None


@dataclass
class Node:
    name: str
    op: str  # canonical op name
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, Any] = field(default_factory=dict)
    source_op: str = ""  # op name in the source format, e.g. "CONV_2D" or "com.microsoft.QLinearAdd"
    index: int = 0  # execution index in the source graph

    def attr(self, key: str, default: Any = None) -> Any:
        return self.attrs.get(key, default)


@dataclass
class Graph:
    name: str
    format: str  # "onnx" or "tflite"
    tensors: dict[str, TensorInfo]
    nodes: list[Node]
    inputs: list[str]
    outputs: list[str]
    path: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    subgraphs: dict[str, "Graph"] = field(default_factory=dict)

    def producer(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    out.setdefault(i, []).append(n)
        return out

    def const(self, name: str) -> np.ndarray | None:
        t = self.tensors.get(name)
        return None if t is None else t.const

    def replace(self, **kw: Any) -> "Graph":
        return dataclasses.replace(self, **kw)
