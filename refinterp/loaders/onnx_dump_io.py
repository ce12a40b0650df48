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
from pathlib import Path

import numpy as np

from ..errors import DumpError, ModelError


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


def model_with_all_outputs(path: str | Path, only_ops: frozenset[str] | None = None) -> tuple[bytes, list[str]]:
    """Model bytes whose graph outputs are every node output (in execution order), and that list
    (``only_ops``: the outputs of nodes of those op types only, besides the graph's own outputs)."""
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
            if o and o not in names:
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


def _layouts(graph, model_transposes: frozenset[str] = frozenset()) -> dict[str, bool | None]:
    """Per tensor of ORT's optimized graph: True when it is laid out channels-last (N, spatial..., C),
    False when in the model's layout, None when unknown (a layout-sensitive op on a channels-last input).
    Channels-last comes from ``Nhwc*`` ops / ``channels_last = 1`` and from Transposes with perm
    (0, 2, ..., n-1, 1) that ORT inserted; (0, n-1, 1, ..., n-2) goes back.  ``model_transposes``: names
    of the model's own Transpose nodes (they permute data, not the layout)."""
    layout: dict[str, bool | None] = {}
    inits = {t.name for t in graph.initializer}
    for n in graph.node:
        data = [layout.get(i, False) for i in n.input if i and i not in inits]
        if n.op_type.startswith("Nhwc") or any(a.name == "channels_last" and a.i == 1 for a in n.attribute):
            out = True
        elif n.op_type == "Transpose" and _TOKEN.sub("", n.name) in model_transposes:
            out = False if not any(d is not False for d in data) else None
        elif n.op_type == "Transpose":
            perm = next((list(a.ints) for a in n.attribute if a.name == "perm"), [])
            r = len(perm)
            to_cl = r >= 3 and perm == [0] + list(range(2, r)) + [1]
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


def optimized_with_outputs(opt_bytes: bytes, orig_path: str | Path) -> tuple[bytes, dict[str, tuple[str, bool]]]:
    """ONNX Runtime's saved optimized model (``SessionOptions.optimized_model_filepath``) with every node
    output made a graph output, and ``{optimized tensor: (original tensor, channels_last)}`` for the
    outputs that stand for a tensor of the original model (``channels_last``: laid out (N, spatial...,
    C), see ``_layouts``; a tensor whose layout cannot be told is not mapped).

    Correspondence (ORT keeps node names through its transformers, adding ``_token_N`` suffixes): a
    node's output is matched to (1) the original tensor of the same name, else (2) the output of the
    original node of the same name (suffixes removed), followed through a single-consumer Relu/Clip
    and a single QuantizeLinear when they follow it (a fused DQ -> op -> Q unit outputs the Q's
    tensor; ORT moves the Q of data-movement ops such as MaxPool / Reshape before them, which gives the
    same integers).  Nodes ORT created (layout Transposes, moved Qs) and float fusions (``FusedConv``
    ...: the output is the activation's, not the named node's) match nothing and are not captured.
    Values may still differ in storage from the original tensor (uint8 re-encoding of int8, NHWC
    layout); the caller reconciles them against the original tensor's dtype and shape."""
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
        for _ in range(len(_ACTIVATIONS) + 1):
            cons = consumers.get(t, [])
            if t in graph_outs or len(cons) != 1:
                return t
            c = cons[0]
            if c.op_type in _ACTIVATIONS:
                t = c.output[0]
                continue
            return c.output[0] if c.op_type == "QuantizeLinear" else t
        return t

    g = opt.graph
    layout = _layouts(g, frozenset(n.name for n in og.node if n.op_type == "Transpose" and n.name))
    have = {o.name for o in g.output}
    mapping: dict[str, tuple[str, bool]] = {}
    taken: set[str] = set()
    for n in g.node:
        for k, o in enumerate(n.output):
            if not o:
                continue
            if o not in have:
                g.output.append(onnx.ValueInfoProto(name=o))
                have.add(o)
            if o in orig_tensors:
                target = o
            elif n.op_type in _FLOAT_FUSIONS or k > 0:
                continue
            else:
                src = by_name.get(_TOKEN.sub("", n.name))
                if src is None or not src.output or not src.output[0]:
                    continue
                target = follow(src.output[0])
            if target not in taken and layout.get(o) is not None:
                mapping[o] = (target, bool(layout.get(o)))
                taken.add(target)
    return opt.SerializeToString(), mapping
