"""Single-op IR graphs for sweeps: the same canonical nodes the TFLite loader produces.

Attribute dictionaries mirror refinterp/loaders/tflite_ops.py exactly (tests round-trip them through
tflite_writer + the loader), so a sweep case and a case made from a converter model look alike.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ..ir import Graph, Node, QuantParams, TensorInfo
from ..kernels.spatial import resolve_window


def qtensor(name: str, shape: Sequence[int], dtype: str, scale: Any, zero_point: Any = 0,
            axis: int | None = None, const: np.ndarray | None = None) -> TensorInfo:
    q = QuantParams(np.asarray(scale, np.float32), np.asarray(zero_point, np.int64), axis)
    if const is not None:
        const = np.asarray(const).astype(dtype).reshape(tuple(shape))
    return TensorInfo(name, tuple(int(d) for d in shape), dtype, q, const=const,
                      layout="NHWC" if len(shape) == 4 else None)


def graph_of(op: str, source_op: str, name: str, inputs: list[TensorInfo | None], outputs: list[TensorInfo],
             attrs: dict[str, Any]) -> Graph:
    tensors = {t.name: t for t in inputs if t is not None}
    tensors.update({t.name: t for t in outputs})
    node = Node(name, op, [t.name if t is not None else "" for t in inputs], [t.name for t in outputs],
                dict(attrs), source_op, 0)
    g_inputs = [t.name for t in inputs if t is not None and t.const is None]
    return Graph(name, "tflite", tensors, [node], list(dict.fromkeys(g_inputs)), [t.name for t in outputs])


def spatial_out(hw: Sequence[int], kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                padding: str) -> tuple[int, int]:
    w = resolve_window(list(hw), list(kernel), list(strides), list(dilations), None, padding)
    return int(w.out[0]), int(w.out[1])


def _spatial_attrs(padding: str, strides, activation) -> dict[str, Any]:
    return {"layout": "NHWC", "auto_pad": padding, "strides": [int(s) for s in strides],
            "activation": activation}


def conv_attrs(padding: str, strides, dilations, activation, kernel, group: int = 1) -> dict[str, Any]:
    a = _spatial_attrs(padding, strides, activation)
    a.update({"weight_layout": "OHWI", "dilations": [int(d) for d in dilations],
              "kernel_shape": [int(k) for k in kernel], "group": int(group), "op_version": 3})
    return a


def depthwise_attrs(padding: str, strides, dilations, activation, kernel, cin: int, mult: int) -> dict[str, Any]:
    a = _spatial_attrs(padding, strides, activation)
    a.update({"weight_layout": "1HWO", "dilations": [int(d) for d in dilations],
              "kernel_shape": [int(k) for k in kernel], "group": int(cin), "depth_multiplier": int(mult),
              "op_version": 3})
    return a


def pool_attrs(padding: str, strides, kernel, activation) -> dict[str, Any]:
    a = _spatial_attrs(padding, strides, activation)
    a.update({"kernel_shape": [int(k) for k in kernel], "count_include_pad": 0, "op_version": 2})
    return a


def fc_attrs(activation, keep_num_dims: bool = False) -> dict[str, Any]:
    return {"keep_num_dims": bool(keep_num_dims), "asymmetric_quantize_inputs": False, "activation": activation,
            "op_version": 4}


def binary_attrs(op: str, activation) -> dict[str, Any]:
    a: dict[str, Any] = {"activation": activation, "op_version": 2}
    if op in ("Add", "Sub"):
        a["pot_scale_int16"] = True
    return a


def softmax_attrs(beta: float) -> dict[str, Any]:
    return {"axis": -1, "beta": float(beta), "op_version": 2}
