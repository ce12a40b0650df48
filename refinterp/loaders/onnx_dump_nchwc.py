"""ONNX Runtime's NCHWc tensors in its saved optimized model (x86 level ``all``): which tensors are
stored blocked, which tensor of the original model each stands for, and ORT's own ReorderOutput
node that gives them back in the model's layout (``optimized_with_outputs``).

ORT's NchwcTransformer (onnxruntime/core/optimizer/nchwc_transformer.cc) replaces Conv / FusedConv,
pools, BatchNormalization (as a depthwise 1x1 Conv) and nearest Resize by ``com.microsoft.nchwc`` ops
whose outputs are stored in channel blocks of 8 or 16 (MlasNchwcGetBlockSize: (N, C/b, H, W, b),
C padded to a multiple of b) under new tensor names.  Element-wise Add / Sum / Mul, Concat and
Relu / Sigmoid / Tanh on such tensors stay in the default domain, keep their node names and compute
on the blocked tensors.  Naming, read from the transformer:

* an NCHWc node is named ``<X>_nchwc`` (``<X>_bn_nchwc`` for a BatchNormalization), ``X`` the output
  it replaced, after the level-2 fusions (a FusedConv's output is its activation's);
* a Conv that took an Add (Conv/Sum fusion) has a 4th input and then outputs the Add's result;
* an Add / Sum of blocked tensors keeps its node name (also when ORT wraps it in Reshapes);
* an ``activation`` attribute the Conv did not have as a FusedConv was fused from the Relu / Sigmoid /
  Tanh that consumed it (after the Add, when there is one).

A blocked tensor is never read as it is stored: each captured one goes through an added
ReorderOutput (ORT's kernel, with the original tensor's channel count), so the block size never has
to be known here.
"""
from __future__ import annotations

import re
from collections.abc import Callable

NCHWC = "com.microsoft.nchwc"
_TOKEN = re.compile(r"(_token_\d+)+$")
_ON_BLOCKED = {"Add", "Sum", "Mul", "Concat", "Relu", "Sigmoid", "Tanh"}
_POOLS = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Upsample"}
_SUFFIX = re.compile(r"(_bn)?_nchwc$")


def classify(graph) -> tuple[set[str], set[str], dict[str, object]]:
    """(blocked, unknown, via) for the tensors of ORT's optimized graph.

    ``blocked``: stored in NCHWc blocks -- the outputs of NCHWc nodes (but ReorderOutput's), of the
    default-domain ops ORT runs on blocked inputs (all data inputs blocked), and of the Reshape that
    ends ORT's reshaped Add / Sum (shapes it could not prove equal, e.g. a symbolic batch: Reshape
    of each blocked input, the Add, a Reshape back to blocked; ``via`` maps that last Reshape's
    output to the Add node, which keeps the model's node name).  ``unknown``: derived from a blocked
    tensor in any other way (neither layout can be told): never captured."""
    inits = {t.name for t in graph.initializer}
    blocked: set[str] = set()
    unknown: set[str] = set()
    flat: set[str] = set()
    flat_sum: dict[str, object] = {}
    via: dict[str, object] = {}
    for n in graph.node:
        data = [i for i in n.input if i and i not in inits]
        outs = [o for o in n.output if o]
        if n.domain == NCHWC:
            if n.op_type != "ReorderOutput":
                blocked.update(outs)
            continue
        if not any(i in blocked or i in unknown for i in data):
            continue
        if n.op_type in _ON_BLOCKED and all(i in blocked for i in data):
            blocked.update(outs)
            continue
        unknown.update(outs)
        if n.op_type == "Reshape" and data and data[0] in blocked:
            flat.update(outs)
        elif n.op_type in ("Add", "Sum") and data and all(i in flat for i in data):
            flat_sum.update((o, n) for o in outs)
        elif n.op_type == "Reshape" and data and data[0] in flat_sum:
            via.update((o, flat_sum[data[0]]) for o in outs)
            blocked.update(outs)
            unknown.difference_update(outs)
    return blocked, unknown, via


def nchwc_target(node, producer: Callable[[str], object], consumers: Callable[[str], list],
                 original: set[str]) -> str | None:
    """The original model's tensor an NCHWc node's output stands for, or None when its name does not
    say (a node ORT created without a source, e.g. ReorderInput)."""
    if node.op_type != "Conv" and node.op_type not in _POOLS:
        return None
    base = _TOKEN.sub("", node.name)
    if not _SUFFIX.search(base):
        return None
    t = _SUFFIX.sub("", base)
    if t not in original:
        return None
    if node.op_type != "Conv":
        return t
    if len(node.input) > 3 and node.input[3]:  # Conv/Sum fusion: the output is the Add's
        t = single_consumer_output(consumers(t), ("Add", "Sum"))
        if t is None:
            return None
    act = next((a.s.decode() for a in node.attribute if a.name == "activation"), None)
    if act is not None:
        src = producer(t)
        if src is None or src.op_type != act:  # not fused before NCHWc: fused from its consumer
            t = single_consumer_output(consumers(t), (act,))
    return t


def single_consumer_output(cons: list, ops: tuple[str, ...]) -> str | None:
    """The output of the only consumer in ``cons`` when it is one of ``ops``, else None."""
    return cons[0].output[0] if len(cons) == 1 and cons[0].op_type in ops else None


def reorder_output(onnx, blocked: str, channels: int, name: str):
    """ORT's ReorderOutput of ``blocked`` (``channels`` logical channels) into ``name``, NCHW."""
    return onnx.helper.make_node("ReorderOutput", [blocked], [name], domain=NCHWC, channels=int(channels),
                                 channels_last=0, name=name)
