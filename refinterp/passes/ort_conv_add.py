"""``ort_conv_add_fusion16`` / ``ort_conv_add_fusion8``: ONNX Runtime's level-2 ConvAddActivationFusion
(onnxruntime/core/optimizer/conv_add_act_fusion.cc) for the float Convs its NchwcTransformer then leaves
alone (run-time weights, channel counts it refuses): Conv -> Add becomes a com.microsoft FusedConv whose
fourth input Z is the Add's other operand.  MLAS then copies Z into the output and runs the convolution
with Beta 1 -- every K chunk of products accumulated onto Z -- and adds the bias after, where the
unfused graph rounds conv + bias first and adds Z last (kernels/onnxruntime/float_conv.py).

Conditions (ORT's): the Add has two inputs of rank 4 whose dimensions are all known and equal (or the
same symbolic name); its first input made by a qualifying Conv is taken (a float Conv with a bias, no
fused activation, one consumer: this Add, not a graph output).  The activation ORT also folds in
(Relu, Sigmoid, Tanh, LeakyRelu, Clip, HardSigmoid after the Add) computes the same as its own node,
which stays.  A Conv the NCHWc rewrite converts keeps that pass's Sum fusion (passes/ort_nchwc.py),
which ORT's NCHWc FusedConv computes alike.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from ..ir import Graph, Node
from .ort_nchwc import _conv_channels, _dim_known_equal
from .rewrite import splice


def _dims_ok(graph: Graph, a: str, b: str) -> bool:
    """Both rank 4, every dimension the same positive size or the same symbolic name (as ORT's selector)."""
    ta, tb = graph.tensors.get(a), graph.tensors.get(b)
    return all(_dim_known_equal(ta, tb, i) for i in range(4))


def _conv_add(graph: Graph, block: int) -> Graph:
    producer = graph.producer()
    consumers = graph.consumers()
    replace: dict[str, list[Node]] = {}
    drop: set[str] = set()
    for add in graph.nodes:
        if add.op != "Add" or len(add.inputs) != 2 or not all(add.inputs) or add.inputs[0] == add.inputs[1]:
            continue
        if not _dims_ok(graph, add.inputs[0], add.inputs[1]):
            continue
        for j, name in enumerate(add.inputs):
            conv = producer.get(name)
            if conv is None or conv.op not in ("Conv", "DepthwiseConv") or conv.name in drop:
                continue
            t = graph.tensors.get(conv.inputs[0])
            if (t is None or t.dtype != "float32" or len(conv.inputs) != 3 or not conv.inputs[2]
                    or len(consumers.get(name, [])) != 1 or name in graph.outputs
                    or _conv_channels(graph, conv, block) is not None):
                continue
            other = add.inputs[1 - j]
            # the fused node takes the Add's place: Z may be computed after the Conv
            replace[add.name] = [dataclasses.replace(conv, inputs=list(conv.inputs) + [other], outputs=[add.outputs[0]],
                                                     source_op=f"{conv.source_op or conv.op}+Add (ConvAddActivationFusion)")]
            drop.add(conv.name)
            break
    return splice(graph, replace, drop) if replace else graph


def _pass(block: int) -> Callable[[Graph], Graph]:
    def run(graph: Graph) -> Graph:
        return _conv_add(graph, block)
    run.__name__ = f"ort_conv_add_fusion{block}"
    return run


ort_conv_add_fusion16 = _pass(16)
ort_conv_add_fusion8 = _pass(8)
