"""The two places where dump handling needs the ``onnx`` package (only loaders import it):

* ``read_tensorproto(path)``: one serialized ``onnx.TensorProto`` (ONNX Runtime's node I/O dumps,
  ``*.tensorproto``) -> (name, array).  External data is refused (no side files are opened).
* ``model_with_all_outputs(path)``: the model's bytes with every intermediate tensor (or those of some
  op types) made a graph output, so ONNX Runtime returns them (``refinterp capture --runtime
  onnxruntime`` / ``qnn-htp``).
* ``optimized_with_outputs(opt_bytes, orig_path)``: the same for ONNX Runtime's saved optimized model,
  with the correspondence of its tensors to the original model's (the QDQ capture at level all).
"""
from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ..errors import DumpError, ModelError
from . import onnx_dump_nchwc as nchwc


def read_tensorproto(path: str | Path) -> tuple[str, np.ndarray]:
    import onnx
    from onnx import numpy_helper

    p = Path(path)
    t = onnx.TensorProto()
    try:
        t.ParseFromString(p.read_bytes())
    except OSError as e:
        raise DumpError(f"cannot read ({e.strerror})", str(p)) from None
    except Exception as e:  # protobuf's DecodeError
        raise DumpError(f"not a serialized TensorProto ({e})", str(p)) from None
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise DumpError("tensor data is stored externally; not supported", str(p))
    from ..limits import check_shape

    if any(d < 0 for d in t.dims):
        raise DumpError(f"tensor '{t.name}' has a negative dimension in {list(t.dims)}", str(p))
    check_shape(list(t.dims), 1, f"tensor '{t.name}'", str(p))
    try:
        a = numpy_helper.to_array(t)
    except Exception as e:
        raise DumpError(f"cannot decode TensorProto ({e})", str(p)) from None
    if a.dtype.hasobject:
        raise DumpError("string tensors are not comparable", str(p))
    return t.name, np.asarray(a)


def write_tensorproto(path: str | Path, name: str, array: np.ndarray) -> None:
    """Write one tensor as ORT's dumper does (for hand-built test samples)."""
    from onnx import numpy_helper

    Path(path).write_bytes(numpy_helper.from_array(np.asarray(array), name).SerializeToString())


def model_with_all_outputs(path: str | Path, only_ops: frozenset[str] | None = None,
                           only: frozenset[str] | None = None) -> tuple[bytes, list[str]]:
    """Model bytes whose graph outputs are every node output (in execution order), and that list
    (``only_ops``: the outputs of nodes of those op types only; ``only``: those tensors only; besides the
    graph's own outputs)."""
    import onnx

    from .onnx import parse_model
    from .onnx_external import load_external

    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise ModelError(f"cannot read ({e.strerror or e})", str(path)) from None
    m = parse_model(data, str(path))
    load_external(m, Path(path).parent, str(path))  # validated locations only; onnx.load would follow any
    g = m.graph
    have = {o.name for o in g.output}
    names: list[str] = [i.name for i in g.input if i.name not in {x.name for x in g.initializer}]
    for n in g.node:
        if only_ops is not None and n.op_type not in only_ops:
            continue
        for o in n.output:
            if o and o not in names and (only is None or o in only):
                names.append(o)
                if o not in have:
                    g.output.append(onnx.ValueInfoProto(name=o))
                    have.add(o)
    names += [o.name for o in g.output if o.name not in names]
    return m.SerializeToString(), names


# ORT contrib ops that fuse a float op with its activation (or similar): the fused node carries the
# first op's name but outputs what the last op computed, so its output is not the named node's output.
_FLOAT_FUSIONS = {"FusedConv", "FusedGemm", "FusedMatMul", "BiasGelu", "FastGelu", "BiasSoftmax",
                  "SkipLayerNormalization", "LayerNormalization", "Attention", "MultiHeadAttention"}
_ACTIVATIONS = ("Relu", "Clip")  # ORT's ReluQuantFusion / ClipQuantFusion remove these before a Q
_TOKEN = re.compile(r"(_token_\d+)+$")
# Ops that compute element by element (or along an axis ORT rewrites with the layout): ORT's transpose
# optimizer moves layout Transposes through them, so their output has their data input's layout.
_LAYOUT_AGNOSTIC = {"QLinearAdd", "QLinearMul", "QLinearLeakyRelu", "QLinearSigmoid", "QuantizeLinear",
                    "DequantizeLinear", "Relu", "Clip", "Add", "Sub", "Mul", "Div", "Sigmoid", "LeakyRelu",
                    "HardSigmoid", "Identity", "QLinearConcat", "Concat"}


def _channels_last_op(n) -> bool:
    return n.op_type.startswith("Nhwc") or any(a.name == "channels_last" and a.i == 1 for a in n.attribute)


def _feeds_channels_last(graph) -> set[str]:
    """Tensors of ``graph`` read by a channels-last op directly or through layout-agnostic ops."""
    producer = {o: n for n in graph.node for o in n.output if o}
    out: set[str] = set()
    stack = [i for n in graph.node if _channels_last_op(n) for i in n.input if i]
    while stack:
        t = stack.pop()
        if t in out:
            continue
        out.add(t)
        p = producer.get(t)
        if p is not None and p.op_type in _LAYOUT_AGNOSTIC:
            stack.extend(i for i in p.input if i)
    return out


def _layouts(graph, model_transposes: frozenset[str] = frozenset()) -> dict[str, bool | None]:
    """Per tensor of ORT's optimized graph: True when it is laid out channels-last (N, spatial..., C),
    False when in the model's layout, None when unknown (a layout-sensitive op on a channels-last input).
    Channels-last comes from ``Nhwc*`` ops / ``channels_last = 1`` and from Transposes with perm
    (0, 2, ..., n-1, 1) that ORT inserted; (0, n-1, 1, ..., n-2) goes back.  ``model_transposes``: names
    of the model's own Transpose nodes (they permute data, not the layout)."""
    layout: dict[str, bool | None] = {}
    inits = {t.name for t in graph.initializer}
    feeds_nhwc = _feeds_channels_last(graph)
    for n in graph.node:
        data = [layout.get(i, False) for i in n.input if i and i not in inits]
        if _channels_last_op(n):
            out = True
        elif n.op_type == "Transpose" and _TOKEN.sub("", n.name) in model_transposes:
            out = False if not any(d is not False for d in data) else None
        elif n.op_type == "Transpose":
            perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), [])
            r = len(perm)
            # a layout Transpose reaches a channels-last op; ORT's transpose optimizer also merges the
            # model's own Transposes into new ones (e.g. (0, 2, 1, 3) then (0, 1, 3, 2) -> (0, 2, 3, 1))
            to_cl = r >= 3 and perm == [0] + list(range(2, r)) + [1] and n.output[0] in feeds_nhwc
            to_cf = r >= 3 and perm == [0, r - 1] + list(range(1, r - 1))
            src = data[0] if data else False
            out = True if (to_cl and src is False) else False if (to_cf and src is True) else \
                (None if src is not False else False)
        elif not any(d is not False for d in data):
            out = False
        elif n.op_type in _LAYOUT_AGNOSTIC and all(d is True for d in data):
            out = True
        else:
            out = None
        for o in n.output:
            if o:
                layout[o] = out
    return layout


def optimized_with_outputs(opt_bytes: bytes, orig_path: str | Path,
                           channels: Callable[[str], int | None] = lambda t: None
                           ) -> tuple[bytes, dict[str, tuple[str, bool]]]:
    """ONNX Runtime's saved optimized model (``SessionOptions.optimized_model_filepath``) with every node
    output made a graph output, and ``{optimized tensor: (original tensor, channels_last)}`` for the
    outputs that stand for a tensor of the original model (``channels_last``: laid out (N, spatial...,
    C), see ``_layouts``; a tensor whose layout cannot be told is not mapped).

    Correspondence (ORT keeps node names through its transformers, adding ``_token_N`` suffixes): a
    node's output is matched to (1) the original tensor of the same name, else (2) the output of the
    original node of the same name (suffixes removed), or the QuantizeLinear that ends a chain of
    single-consumer Relu / Clip after it (a fused DQ -> op -> Q unit outputs the Q's tensor; ORT
    moves the Q of data-movement ops such as MaxPool / Reshape before them, which gives the same
    integers).  Nodes ORT created (layout Transposes, moved Qs) match nothing and are not captured;
    a FusedConv / FusedGemm stands for the output of the activation it fused (the named node's
    single consumer of that op type), other float fusions match nothing.  Tensors ORT stores in
    NCHWc blocks (``onnx_dump_nchwc``) are mapped through a ReorderOutput node added here for each,
    given the original tensor's channel count by ``channels`` (None: not captured).  Values may
    still differ in storage from the original tensor (uint8 re-encoding of int8, NHWC layout); the
    caller reconciles them against the original tensor's dtype and shape."""
    import onnx

    from .onnx import parse_model
    from .onnx_external import load_external

    opt = parse_model(opt_bytes, "<onnxruntime optimized model>")
    try:
        data = Path(orig_path).read_bytes()
    except OSError as e:
        raise ModelError(f"cannot read ({e.strerror or e})", str(orig_path)) from None
    orig = parse_model(data, str(orig_path))
    load_external(orig, Path(orig_path).parent, str(orig_path))
    og = orig.graph
    orig_tensors = {i.name for i in og.input} | {o for n in og.node for o in n.output if o}
    by_name = {n.name: n for n in og.node if n.name}
    consumers: dict[str, list] = {}
    for n in og.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    graph_outs = {o.name for o in og.output}

    def follow(t: str) -> str:
        """``t``, or the QuantizeLinear output that ends a single-consumer chain of activations."""
        u = t
        for _ in range(len(_ACTIVATIONS) + 1):
            cons = consumers.get(u, [])
            if u in graph_outs or len(cons) != 1:
                return t
            c = cons[0]
            if c.op_type in _ACTIVATIONS:
                u = c.output[0]
                continue
            return c.output[0] if c.op_type == "QuantizeLinear" else t
        return t

    def fused_activation(n) -> str | None:
        src = by_name.get(_TOKEN.sub("", n.name))
        act = next((a.s.decode() for a in n.attribute if a.name == "activation"), None)
        if src is None or not src.output or act is None:
            return None
        return nchwc.single_consumer_output(consumers.get(src.output[0], []), (act,))

    g = opt.graph
    layout = _layouts(g, frozenset(n.name for n in og.node if n.op_type == "Transpose" and n.name))
    blocked, unknown, via = nchwc.classify(g)
    producer = {o: n for n in og.node for o in n.output if o}
    have = {o.name for o in g.output}
    mapping: dict[str, tuple[str, bool]] = {}
    taken: set[str] = set()
    reorders = []
    for n in list(g.node):
        for k, o in enumerate(n.output):
            if not o:
                continue
            if o not in have:
                g.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
            if o in unknown or (k > 0 and o not in orig_tensors):
                continue
            if o in orig_tensors:
                target = o
            elif o in via:
                src = by_name.get(_TOKEN.sub("", via[o].name))
                target = src.output[0] if src is not None and src.output else None
            elif n.domain == nchwc.NCHWC:
                target = nchwc.nchwc_target(n, producer.get, lambda t: consumers.get(t, []), orig_tensors)
            elif n.op_type in ("FusedConv", "FusedGemm"):
                target = fused_activation(n)
            elif n.op_type in _FLOAT_FUSIONS:
                continue
            else:
                src = by_name.get(_TOKEN.sub("", n.name))
                target = follow(src.output[0]) if src is not None and src.output and src.output[0] else None
            if target is None or target in taken:
                continue
            if o in blocked:  # read through ORT's own ReorderOutput, never as stored
                c = channels(target)
                if not c:
                    continue
                plain = f"{o}__refinterp_nchw"
                reorders.append(nchwc.reorder_output(onnx, o, c, plain))
                g.output.append(onnx.ValueInfoProto(name=plain))
                mapping[plain] = (target, False)
                taken.add(target)
            elif layout.get(o) is not None:
                mapping[o] = (target, bool(layout.get(o)))
                taken.add(target)
    g.node.extend(reorders)
    return opt.SerializeToString(), mapping
