"""``ort_nchwc16`` / ``ort_nchwc8``: mark the float Conv and Resize nodes ONNX Runtime's
NchwcTransformer (ORT_ENABLE_ALL, CPU EP, x86-64) rewrites into ``com.microsoft.nchwc.Conv`` /
``Upsample``, and fold the Adds it fuses into an NCHWc Conv (Conv/Sum fusion).

Those rewrites change the arithmetic: an NCHWc Conv sums in MLAS's NCHWc order
(kernels/onnxruntime/float_conv_nchwc.py) and accumulates a fused Add's other operand before its
partial sums; a bilinear Resize runs ``MlasNchwcUpsampleLinear``, whose weights and summation order
differ from upsample.cc (kernels/onnxruntime/float_resize.py); so the kernels must know which nodes
ORT converts.  A Resize is converted only when its data input is
already in NCHWc layout, i.e. produced by a node the transformer converted before it.  The
propagation follows onnxruntime/core/optimizer/nchwc_transformer.cc (block size: MLAS's NCHWc
block, 16 floats with AVX-512F, 8 with AVX2), restricted to float32 tensors:

* MaxPool / AveragePool (one output, 4-D input with a static channel count divisible by the block)
  convert from any input (ORT inserts a ReorderInput);
* Conv with a constant float32 4-D filter (and constant bias) whose group / channel counts the
  transformer accepts converts from any input, and is marked;
* an Add of two NCHWc tensors of equal static shape whose first (else second) input comes from a
  marked Conv used only by this Add is fused into that Conv (the Conv gets the other operand as a
  fourth input, the Sum, and the Add's output); a Relu / Sigmoid / Tanh after it is fused by ORT too,
  which does not change a bit (the same MLAS activation), so it stays a node here;
* a Clip (constant bounds) / LeakyRelu / HardSigmoid / HardSwish that is the only user of a marked Conv is
  fused into it by ORT's ConvActivationFusion before the NCHWc rewrite, so its output stays NCHWc
  (numerically the same activation; the node stays);
* GlobalMaxPool / GlobalAveragePool (channel count divisible by the block), Relu / Sigmoid / Tanh,
  BatchNormalization, Add / Sum / Mul (all
  inputs NCHWc, one channel count, equal static shapes) and Concat (axis 1, every input NCHWc with
  a block-aligned channel count) stay in NCHWc when their inputs are; a GlobalAveragePool there is
  marked (MLAS's NCHWc pool order, kernels/onnxruntime/float_pool.py), a BatchNormalization with
  constant parameters becomes the marked depthwise 1x1 NCHWc Conv ORT replaces it with (scale and
  bias folded in float32; ORT also requires an explicit epsilon attribute, which the loader's
  defaults hide: a BatchNormalization without one is converted here, not by ORT);
* Resize / Upsample (linear with half_pixel, align_corners or asymmetric; nearest with asymmetric
  and floor) with a constant 4-D integral scale (or sizes an exact multiple of a static input
  shape), batch and channel unscaled, on an NCHWc input: converted, and marked ``_ort_nchwc``.

Whether the inputs of an Add / Sum / Mul have equal shapes is decided as the transformer does, so that
models with symbolic (unknown) dimensions fuse the same Adds: every NCHWc tensor carries, per dimension,
the tensor that dimension was first produced by and (spatial dimensions) how many stride-2 halvings it
went through since.  A Conv (unless it reads NCHW: a plain Conv of fewer input channels than the block) or
pool on an NCHWc input copies that input's batch dimension and each spatial dimension whose
padding keeps the size (pads summing to kernel - 1, or SAME auto-padding; stride 1 or 2, no dilation);
an activation, BatchNormalization, Sum-fused Conv or matching binary op keeps its input's dimensions; a
Concat its first input's but the channels; anything else starts its own.  Dimensions of other origins
still match when shape inference gives both the same positive size or the same symbolic name.  An Add /
Sum whose shapes cannot be shown equal still runs in NCHWc (ORT reshapes both operands), unfused; such a
Mul leaves NCHWc.

Measured with onnxruntime 1.32.0: opset-19 AveragePool and Resize convert too (the mirror's source
lists older versions only), and a Resize without a coordinate_transformation_mode attribute (the
half_pixel default) converts.  Nodes not listed (e.g. a Conv fused with its activation into one
NCHWc Conv, which keeps NCHWc as well) are treated as leaving NCHWc; a Resize after them runs ORT's
ordinary kernel here.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from ..ir import Graph, Node
from .ort_fold import bn_scale_shift
from .rewrite import add_const

MARK = "_ort_nchwc"
_KEEP_UNARY = ("GlobalMaxPool", "GlobalAveragePool", "Relu", "Sigmoid", "Tanh", "BatchNormalization")
_GLOBAL_POOLS = ("GlobalMaxPool", "GlobalAveragePool")
_FUSED_ACTIVATIONS = ("Clip", "LeakyRelu", "HardSigmoid", "HardSwish")
_LINEAR_CTMS = ("half_pixel", "align_corners", "asymmetric")


def _float4d(graph: Graph, name: str):
    t = graph.tensors.get(name) if name else None
    if t is None or t.dtype != "float32" or t.shape is None or len(t.shape) != 4:
        return None
    return t


def _pool_channels(graph: Graph, n: Node, block: int) -> int | None:
    t = _float4d(graph, n.inputs[0] if n.inputs else "")
    if t is None or len([o for o in n.outputs if o]) != 1 or not t.shape[1] or t.shape[1] % block:
        return None
    return int(t.shape[1])


def _conv_channels(graph: Graph, n: Node, block: int) -> int | None:
    """The Conv's output channels when TransformConv converts it (a constant float32 4-D filter decides;
    ORT does not look at the input's shape, which shape inference may not know)."""
    x = graph.tensors.get(n.inputs[0]) if n.inputs else None
    if len(n.inputs) < 2 or x is None or x.dtype != "float32" or (x.shape is not None and len(x.shape) != 4) \
            or (n.attr("layout") or "NCHW") != "NCHW" or (n.attr("weight_layout") or "OIHW") != "OIHW":
        return None
    w = graph.tensors.get(n.inputs[1])
    if w is None or w.const is None or w.dtype != "float32" or np.ndim(w.const) != 4:
        return None
    if len(n.inputs) > 2 and n.inputs[2]:
        b = graph.tensors.get(n.inputs[2])
        if b is None or b.const is None or b.dtype != "float32" or np.shape(b.const) != (w.const.shape[0],):
            return None
    out_c, in_c = int(w.const.shape[0]), int(w.const.shape[1])
    group = int(n.attr("group", 1) or 1)
    if group > 1:
        if out_c % 4:
            return None
        depthwise = in_c == 1 and out_c == group
        if not depthwise and (in_c % block or out_c % group or (out_c // group) % block):
            return None
    elif in_c >= block and in_c % 4:
        return None
    return out_c


def _resize_ok(graph: Graph, n: Node) -> bool:
    mode = str(n.attr("mode", "nearest"))
    ctm = str(n.attr("coordinate_transformation_mode", "half_pixel"))
    if mode == "linear":
        if ctm not in _LINEAR_CTMS:
            return False
    elif mode != "nearest" or ctm != "asymmetric" or str(n.attr("nearest_mode", "round_prefer_floor")) != "floor":
        return False
    x = _float4d(graph, n.inputs[0])
    scales = graph.tensors.get(n.inputs[2]) if len(n.inputs) > 2 and n.inputs[2] else None
    sizes = graph.tensors.get(n.inputs[3]) if len(n.inputs) > 3 and n.inputs[3] else None
    if sizes is not None:
        if sizes.const is None or np.shape(sizes.const) != (4,) or x is None or any(not d for d in x.shape):
            return False
        sz = [int(v) for v in np.asarray(sizes.const)]
        if any(s % int(d) for s, d in zip(sz, x.shape)):
            return False
        factors = [s // int(d) for s, d in zip(sz, x.shape)]
    elif scales is not None and scales.const is not None and scales.dtype == "float32" \
            and np.shape(scales.const) == (4,):
        sc = np.asarray(scales.const, np.float32)
        factors = [int(v) for v in sc]
        if any(f <= 0 or np.float32(f) != v for f, v in zip(factors, sc)):
            return False
    else:
        return False
    return factors[0] == 1 and factors[1] == 1 and min(factors) >= 1


# per NCHWc tensor and dimension: (the tensor that dimension was first produced by, stride-2 halvings)
Dims = tuple[tuple[str, int], ...]


def _own_dims(name: str) -> Dims:
    return ((name, 0),) * 4


def _conv_pool_dims(n: Node, src: Dims, out: str, kernel: list[int] | None) -> Dims:
    """ORT's ConvPoolShapeInference: the batch dimension always, a spatial one when its padding keeps
    the size before a stride of 1 or 2 (the stride-2 count goes up by one).  ``kernel``: None for a
    pool without kernel_shape (the global pools)."""
    dims = [src[0], (out, 0), (out, 0), (out, 0)]
    pads, strides, dilations = n.attr("pads"), n.attr("strides"), n.attr("dilations")
    if (pads is not None and len(pads) != 4) or (strides is not None and len(strides) != 2) \
            or (dilations is not None and len(dilations) != 2) or kernel is None or len(kernel) != 2:
        return tuple(dims)
    auto_pad = str(n.attr("auto_pad", "NOTSET") or "NOTSET")
    same = auto_pad in ("SAME_UPPER", "SAME_LOWER")
    if auto_pad not in ("NOTSET", "VALID") and not same:
        return tuple(dims)
    if auto_pad != "NOTSET":
        pads = None
    for i in range(2):
        stride = int(strides[i]) if strides is not None else 1
        if (dilations is not None and int(dilations[i]) != 1) or stride not in (1, 2):
            continue
        padding = int(pads[i]) + int(pads[i + 2]) if pads is not None else 0
        if padding + 1 == int(kernel[i]) or same:
            origin, shifts = src[2 + i]
            dims[2 + i] = (origin, shifts + stride - 1)
    return tuple(dims)


def _dim_known_equal(a, b, i: int) -> bool:
    """The transformer's fallback: shape inference gives dimension ``i`` of both tensors the same
    positive size, or the same symbolic name."""
    if a is None or b is None or a.shape is None or b.shape is None or len(a.shape) != 4 or len(b.shape) != 4:
        return False
    if a.shape[i] and a.shape[i] > 0 and a.shape[i] == b.shape[i]:
        return True
    pa, pb = a.dim_params, b.dim_params
    return bool(pa and pb and pa[i] and pa[i] == pb[i])


def _dims_match(graph: Graph, ins: list[str], dims: dict[str, Dims]) -> bool:
    first = dims[ins[0]]
    for name in ins[1:]:
        other = dims[name]
        for i in range(4):
            same = first[i] == other[i] if i >= 2 else first[i][0] == other[i][0]
            if not same and not _dim_known_equal(graph.tensors.get(ins[0]), graph.tensors.get(name), i):
                return False
    return True


def _bn_as_conv(graph: Graph, n: Node, channels: int, block: int, tensors: dict) -> Node | None:
    """The NCHWc depthwise 1x1 Conv ORT replaces a BatchNormalization on an NCHWc input with
    (nchwc_transformer.cc TransformBatchNormalization): w = scale / sqrt(var + eps), b = bias - mean * w,
    float32 constants (one rounding per operation); None when ORT keeps the BatchNormalization."""
    if any(o for o in n.outputs[1:]) or int(n.attr("spatial", 1) or 1) != 1 or int(n.attr("training_mode", 0) or 0) \
            or len(n.inputs) < 5:
        return None
    params = []
    for name in n.inputs[1:5]:
        t = graph.tensors.get(name) if name else None
        if t is None or t.const is None or t.dtype != "float32" or np.shape(t.const) != (channels,):
            return None
        params.append(np.asarray(t.const, np.float32))
    w, b = bn_scale_shift(n, *params)
    names = [add_const(tensors, n.name + "_nchwc_W", w.reshape(channels, 1, 1, 1)),
             add_const(tensors, n.name + "_nchwc_B", b)]
    attrs = {"group": channels, "kernel_shape": [1, 1], "strides": [1, 1], "dilations": [1, 1],
             "pads": [0, 0, 0, 0], "layout": "NCHW", "weight_layout": "OIHW", MARK: block}
    return Node(name=n.name, op="Conv", inputs=[n.inputs[0]] + names, outputs=[n.outputs[0]], attrs=attrs,
                source_op=n.source_op or n.op, index=n.index)


def _fused_activation(graph: Graph, n: Node, nodes: list, where: dict[str, int], consumers) -> bool:
    """True when ORT's ConvActivationFusion (level 2, before the NchwcTransformer) folds this Clip /
    LeakyRelu / HardSigmoid / HardSwish into the NCHWc Conv producing its input, whose output then stays NCHWc:
    the Conv's output feeds only this node and is not a graph output; a Clip's bounds are constants.
    (The activation itself computes the same as the separate node: MlasActivation.)"""
    src = n.inputs[0]
    i = where.get(src)
    p = nodes[i] if i is not None else None
    if p is None or p.op not in ("Conv", "DepthwiseConv") or not p.attr(MARK) or len(p.inputs) > 3 \
            or len(consumers.get(src, [])) != 1 or src in graph.outputs:
        return False
    if n.op == "Clip":
        return all(graph.tensors.get(b) is not None and graph.tensors[b].const is not None
                   for b in n.inputs[1:] if b)
    return True


def _sum_fusion(graph: Graph, n: Node, nodes: list, where: dict[str, int], consumers) -> int | None:
    """Index in ``nodes`` of the NCHWc Conv ORT fuses this two-input Add into (Conv/Sum fusion:
    nchwc_transformer.cc TransformBinary), or None.  The first input whose producer is an NCHWc Conv
    used once (by this Add, not a graph output) and not fused with a Sum already is taken."""
    if n.op != "Add" or len(n.inputs) != 2 or not all(n.inputs) or n.inputs[0] == n.inputs[1]:
        return None
    for name in n.inputs:
        i = where.get(name)
        p = nodes[i] if i is not None else None
        if (p is not None and p.op in ("Conv", "DepthwiseConv") and p.attr(MARK) and len(p.inputs) < 4
                and len(consumers.get(name, [])) == 1 and name not in graph.outputs):
            return i
    return None


def mark_nchwc(graph: Graph, block: int) -> Graph:
    """A copy of ``graph`` whose Conv and Resize nodes ORT converts to NCHWc carry ``_ort_nchwc =
    block``; an Add ORT fuses into an NCHWc Conv is removed and its other input becomes the Conv's
    fourth input (the Sum the Conv accumulates onto), the Conv taking the Add's place and output."""
    nchwc: dict[str, int] = {}  # float tensor in NCHWc layout -> logical channel count
    dims: dict[str, Dims] = {}  # NCHWc tensor -> where its dimensions come from (module docstring)
    consumers = graph.consumers()
    tensors = dict(graph.tensors)
    nodes: list = []
    where: dict[str, int] = {}  # output name -> index in nodes
    for n in graph.nodes:
        out = n.outputs[0] if n.outputs else ""
        ins = [i for i in n.inputs if i]
        channels, out_dims = None, _own_dims(out)
        if n.op in ("MaxPool", "AveragePool"):
            channels = _pool_channels(graph, n, block)
            if ins and ins[0] in nchwc:
                out_dims = _conv_pool_dims(n, dims[ins[0]], out, n.attr("kernel_shape"))
        elif n.op in ("Conv", "DepthwiseConv"):
            channels = _conv_channels(graph, n, block)
            if channels is not None:
                n = dataclasses.replace(n, attrs={**n.attrs, MARK: block})
                w = np.shape(graph.tensors[n.inputs[1]].const)
                # a plain Conv of fewer input channels than the block reads NCHW (no shape inference)
                if ins[0] in nchwc and (int(n.attr("group", 1) or 1) > 1 or w[1] >= block):
                    out_dims = _conv_pool_dims(n, dims[ins[0]], out, list(w[2:]))
        elif n.op in _FUSED_ACTIVATIONS and ins and ins[0] in nchwc and _fused_activation(graph, n, nodes, where, consumers):
            channels, out_dims = nchwc[ins[0]], dims[ins[0]]
        elif n.op in _KEEP_UNARY and ins and ins[0] in nchwc \
                and (n.op not in _GLOBAL_POOLS or nchwc[ins[0]] % block == 0):  # TransformPool's check
            channels = nchwc[ins[0]]
            if n.op in _GLOBAL_POOLS:
                out_dims = _conv_pool_dims(n, dims[ins[0]], out, None)
            else:
                out_dims = dims[ins[0]]
            if n.op == "GlobalAveragePool":
                n = dataclasses.replace(n, attrs={**n.attrs, MARK: block})
            elif n.op == "BatchNormalization":
                n = _bn_as_conv(graph, n, channels, block, tensors) or n
        elif n.op in ("Add", "Sum", "Mul") and ins and all(i in nchwc for i in ins) \
                and len({nchwc[i] for i in ins}) == 1:
            if _dims_match(graph, ins, dims):
                channels, out_dims = nchwc[ins[0]], dims[ins[0]]
                k = _sum_fusion(graph, n, nodes, where, consumers)
                if k is not None:
                    conv = nodes[k]
                    other = n.inputs[1] if conv.outputs[0] == n.inputs[0] else n.inputs[0]
                    bias = conv.inputs[2] if len(conv.inputs) > 2 else ""
                    out_dims = dims[conv.outputs[0]]
                    n = dataclasses.replace(conv, inputs=conv.inputs[:2] + [bias, other], outputs=[out])
                    nodes[k] = None
            elif n.op != "Mul":  # ORT reshapes both operands and adds in NCHWc, unfused
                channels = nchwc[ins[0]]
        elif n.op == "Concat" and int(n.attr("axis", 0)) == 1 and ins and all(i in nchwc for i in ins) \
                and all(nchwc[i] % block == 0 for i in ins):
            channels = sum(nchwc[i] for i in ins)
            out_dims = (dims[ins[0]][0], (out, 0)) + dims[ins[0]][2:]
        elif n.op == "Resize" and ins and ins[0] in nchwc and _resize_ok(graph, n):
            channels = nchwc[ins[0]]
            n = dataclasses.replace(n, attrs={**n.attrs, MARK: block})
        if channels is not None and out and graph.tensors.get(out) is not None \
                and graph.tensors[out].dtype == "float32":
            nchwc[out], dims[out] = channels, out_dims
        for o in n.outputs:
            where[o] = len(nodes)
        nodes.append(n)
    return graph.replace(nodes=[n for n in nodes if n is not None], tensors=tensors)


def _pass(block: int) -> Callable[[Graph], Graph]:
    def run(graph: Graph) -> Graph:
        return mark_nchwc(graph, block)
    run.__name__ = f"ort_nchwc{block}"
    return run


ort_nchwc16 = _pass(16)  # MLAS NCHWc block with AVX-512F
ort_nchwc8 = _pass(8)  # with AVX2
