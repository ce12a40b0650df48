"""fuse_qdq_torch: fuse_qdq's units plus DQ -> HardSwish / Elu -> Q."""
from __future__ import annotations

import numpy as np

from refinterp.ir import Graph, Node, TensorInfo
from refinterp.passes import PASSES, fuse_qdq


def _graph(op: str, in_dtype="uint8", out_dtype="uint8") -> Graph:
    t = {
        "x": TensorInfo("x", (1, 4), in_dtype),
        "s": TensorInfo("s", (), "float32", const=np.float32(0.05)),
        "z": TensorInfo("z", (), in_dtype, const=np.zeros((), in_dtype)),
        "zo": TensorInfo("zo", (), out_dtype, const=np.zeros((), out_dtype)),
        "d": TensorInfo("d", (1, 4), "float32"),
        "h": TensorInfo("h", (1, 4), "float32"),
        "y": TensorInfo("y", (1, 4), out_dtype),
    }
    nodes = [Node("dq", "DequantizeLinear", ["x", "s", "z"], ["d"]), Node("op", op, ["d"], ["h"]),
             Node("q", "QuantizeLinear", ["h", "s", "zo"], ["y"])]
    return Graph("g", "onnx", t, nodes, ["x"], ["y"])


def test_hardswish_and_elu_units_are_fused():
    for op in ("HardSwish", "Elu"):
        g = PASSES["fuse_qdq_torch"](_graph(op))
        assert [(n.op, n.source_op) for n in g.nodes] == [(op, f"QDQ:{op}")]
        assert g.nodes[0].inputs == ["x"] and g.nodes[0].outputs == ["y"]
        assert g.tensors["x"].quant is not None and g.tensors["y"].quant is not None
        assert [n.op for n in fuse_qdq(_graph(op)).nodes] == ["DequantizeLinear", op, "QuantizeLinear"]


def test_mixed_storage_types_are_not_fused():
    g = PASSES["fuse_qdq_torch"](_graph("HardSwish", "uint8", "int8"))
    assert [n.op for n in g.nodes] == ["DequantizeLinear", "HardSwish", "QuantizeLinear"]


def test_ort_units_still_fused():
    g = PASSES["fuse_qdq_torch"](_graph("Sigmoid"))
    assert [n.op for n in g.nodes] == ["Sigmoid"]
