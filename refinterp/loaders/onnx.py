"""ONNX -> Graph.  The only module (with its ``onnx_*`` helpers) that imports onnx.

Steps: parse the protobuf without following external data; validate and read external data
(``onnx_external``); run onnx shape inference; turn initializers and Constant nodes into const
tensors; check topological order; convert each node (QOperator ops -> canonical op + QuantParams,
``onnx_qop``) and normalise it to the latest opset form (``onnx_normalize``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import AttributeProto, ModelProto, helper, numpy_helper

from ..errors import ModelError, ResourceError
from ..ir import Graph, Node, TensorInfo
from ..limits import ABSURD_BYTES, check_alloc, element_count
from .onnx_build import BuildContext
from .onnx_external import load_external
from .onnx_normalize import SPATIAL_OPS, normalize
from .onnx_order import topological_order
from .onnx_qop import convert_qop

DEFAULT_DOMAINS = ("", "ai.onnx")
_CONTRIB_QDQ = ("QuantizeLinear", "DequantizeLinear")  # com.microsoft forms, read as the ONNX ops
_CONTRIB_QDQ_OPSET = 21  # their attributes and types (int16 / uint16, int4) are the opset-21 ones
LATEST_OPSET = 1000


def load_onnx(path: Path) -> Graph:
    path = Path(path)
    where = str(path)
    try:
        check_alloc(path.stat().st_size, 1, "model file", where)
        data = path.read_bytes()
    except IsADirectoryError:
        raise ModelError("is a folder, not a model file", where) from None
    except FileNotFoundError:
        raise ModelError("no such file", where) from None
    except OSError as e:
        raise ModelError(f"cannot read ({e.strerror})", where) from None
    model = parse_model(data, where)
    load_external(model, path.parent, where)
    return convert_model(model, where, name=path.stem)


def load_onnx_model(model: ModelProto, base_dir: Path | None = None, where: str = "<in-memory ONNX model>"
                    ) -> Graph:
    """Convert an in-memory ModelProto; external data is read from ``base_dir`` after validation."""
    m = ModelProto()
    m.CopyFrom(model)
    load_external(m, Path(base_dir) if base_dir is not None else None, where)
    return convert_model(m, where, name=m.graph.name or "model")


def parse_model(data: bytes, where: str) -> ModelProto:
    m = ModelProto()
    try:
        m.ParseFromString(data)
    except (DecodeError, ValueError, RuntimeError) as e:
        why = (str(e).splitlines() or ["invalid data"])[0]
        raise ModelError(f"not an ONNX model (protobuf parse failed: {why})", where) from None
    if not m.HasField("graph") or (m.ir_version <= 0 and not m.opset_import):
        raise ModelError("not an ONNX model (no graph / ir_version in the protobuf)", where)
    return m


def _infer(model: ModelProto) -> ModelProto:
    try:
        return onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception:  # noqa: BLE001 - inference is best effort; declared shapes are used instead
        return model


def _np_dtype(elem_type: int) -> str:
    if elem_type == 0:
        return ""
    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except (KeyError, TypeError, ValueError):
        return "object"


def _value_info(vi: onnx.ValueInfoProto, where: str) -> TensorInfo:
    t = vi.type
    kind = t.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(t, kind)
        shape = None
        if tt.HasField("shape"):
            # a declared dim of -1 (PaddlePaddle's exporter, hand-built graphs) means unknown, as in ORT;
            # other negative dims stay malformed (_check_size refuses them)
            shape = tuple(int(d.dim_value) if d.HasField("dim_value") and d.dim_value != -1 else None
                          for d in tt.shape.dim)
            _check_size(shape, _itemsize(tt.elem_type), f"tensor '{vi.name}'", where)
            params = tuple(d.dim_param if d.HasField("dim_param") and d.dim_param else None for d in tt.shape.dim)
            if any(params):
                return TensorInfo(vi.name, shape, _np_dtype(tt.elem_type), dim_params=params)
        return TensorInfo(vi.name, shape, _np_dtype(tt.elem_type))
    return TensorInfo(vi.name, None, "object")


def _itemsize(elem_type: int) -> int:
    try:
        return max(int(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).itemsize), 1)
    except (KeyError, TypeError, ValueError):
        return 1


def _check_size(shape, itemsize: int, what: str, where: str) -> None:
    """Declared dims non-negative, the size sane (ModelError) and within the memory budget (ResourceError)."""
    for d in shape:
        if d is not None and d < 0:
            raise ModelError(f"{what} has a negative dimension in shape {list(shape)}", where)
    n = element_count(shape, what, where)
    # a zero dim makes the product 0, but NumPy still cannot form strides for [0, 2**62, 2**62]
    if element_count([max(int(d), 1) for d in shape if d is not None], what, where) * itemsize > ABSURD_BYTES:
        raise ModelError(f"{what} has an absurd shape {list(shape)}", where)
    check_alloc(n, itemsize, f"{what} (shape {list(shape)})", where)


def _to_array(t: onnx.TensorProto, what: str, where: str) -> np.ndarray:
    """numpy_helper.to_array after checking the data type, the dims and the budget."""
    try:
        np_dtype = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type))
    except (KeyError, TypeError, ValueError):
        raise ModelError(f"{what} has unknown data type {t.data_type}", where) from None
    _check_size(tuple(int(d) for d in t.dims), max(np_dtype.itemsize, 1), what, where)
    if t.data_location == onnx.TensorProto.EXTERNAL:
        raise ModelError(f"{what}: external data was not resolved", where)
    return numpy_helper.to_array(t)


def _const_info(name: str, arr: np.ndarray) -> TensorInfo:
    return TensorInfo(name, tuple(int(d) for d in arr.shape), str(arr.dtype), const=arr)


def _constant_value(n: onnx.NodeProto, where: str) -> np.ndarray:
    if len(n.attribute) != 1:
        raise ModelError(f"Constant node '{n.name or n.output[0]}' needs exactly one value attribute", where)
    a = n.attribute[0]
    if a.name == "value":
        return _to_array(a.t, f"Constant node '{n.name or n.output[0]}' value", where)
    if a.name == "value_float":
        return np.array(a.f, np.float32)
    if a.name == "value_floats":
        return np.array(list(a.floats), np.float32)
    if a.name == "value_int":
        return np.array(a.i, np.int64)
    if a.name == "value_ints":
        return np.array(list(a.ints), np.int64)
    if a.name == "value_string":
        return np.array(a.s.decode("utf-8", "replace"), dtype=object)
    if a.name == "value_strings":
        return np.array([s.decode("utf-8", "replace") for s in a.strings], dtype=object)
    raise ModelError(f"Constant node '{n.name or n.output[0]}': attribute '{a.name}' is not supported "
                     f"(sparse constants are not)", where)


def _attr(a: AttributeProto, where: str, outer: set[str], opsets: dict[str, int]) -> Any:
    if a.type == AttributeProto.GRAPH:
        return _convert_graph(a.g, where, outer, opsets)
    if a.type == AttributeProto.GRAPHS:
        return [_convert_graph(g, where, outer, opsets) for g in a.graphs]
    if a.type == AttributeProto.TENSOR:
        return _to_array(a.t, f"attribute '{a.name}'", where)
    if a.type == AttributeProto.TENSORS:
        return [_to_array(t, f"attribute '{a.name}'", where) for t in a.tensors]
    v = helper.get_attribute_value(a)
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, (list, tuple)):
        return [x.decode("utf-8", "replace") if isinstance(x, bytes) else x for x in v]
    return v


def convert_model(model: ModelProto, where: str, name: str = "model") -> Graph:
    opsets = {(o.domain if o.domain not in DEFAULT_DOMAINS else ""): int(o.version) for o in model.opset_import}
    opsets.setdefault("", 1)
    inferred = _infer(model)
    try:
        g = _convert_graph(inferred.graph, where, set(), opsets)
    except MemoryError:
        raise ResourceError("out of memory while converting the ONNX graph", where) from None
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, ZeroDivisionError, OverflowError,
            RecursionError, UnicodeDecodeError) as e:
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise ModelError(f"malformed ONNX model ({type(e).__name__}: {first})", where) from None
    g.name = model.graph.name or name
    g.path = None if where.startswith("<") else where
    g.metadata.update({"ir_version": int(model.ir_version), "opset_import": dict(opsets),
                       "producer_name": model.producer_name, "producer_version": model.producer_version,
                       "doc_string": model.doc_string,
                       "metadata_props": {p.key: p.value for p in model.metadata_props},
                       # initializers the model also lists as graph inputs (overridable from IR 4 on)
                       "initializer_inputs": sorted({t.name for t in model.graph.initializer}
                                                   & {i.name for i in model.graph.input})})
    return g


def _convert_graph(gp: onnx.GraphProto, where: str, outer: set[str], opsets: dict[str, int]) -> Graph:
    ctx = BuildContext(where)
    for vi in list(gp.value_info) + list(gp.input) + list(gp.output):
        ctx.tensors[vi.name] = _value_info(vi, where)
    init_names = set()
    for t in gp.initializer:
        arr = _to_array(t, f"initializer '{t.name}'", where)
        declared = ctx.tensors.get(t.name)
        ctx.tensors[t.name] = _const_info(t.name, arr)
        if declared is not None and declared.dtype and declared.dtype != str(arr.dtype):
            raise ModelError(f"initializer '{t.name}' has dtype {arr.dtype} but is declared {declared.dtype}",
                             where)
        init_names.add(t.name)
    if gp.sparse_initializer:
        raise ModelError("sparse initializers are not supported", where)
    inputs = [vi.name for vi in gp.input if vi.name not in init_names]
    available = set(outer) | set(inputs) | init_names
    nodes: list[Node] = []
    names = _node_names(gp)
    for idx in topological_order(gp, available, names, where):
        n = gp.node[idx]
        label = names[idx]
        for i in n.input:
            if i and i not in available:
                raise ModelError(f"node '{label}' ({n.op_type}) input '{i}' is not a graph input, "
                                 f"initializer or node output", where)
        available.update(o for o in n.output if o)
        default = n.domain in DEFAULT_DOMAINS
        if default:
            _check_required_inputs(n, opsets.get("", 1), label, where)
        if default and n.op_type == "Constant":
            arr = _constant_value(n, where)
            ctx.tensors[n.output[0]] = _const_info(n.output[0], arr)
            continue
        op = n.op_type if default else f"{n.domain}.{n.op_type}"
        source_op = op
        if n.domain == "com.microsoft" and n.op_type in _CONTRIB_QDQ:
            # ONNX Runtime's contrib Q / DQ (its quantizer's use_qdq_contrib_ops, 16-bit QDQ before opset 21):
            # the same kernels and attributes as the ONNX ops (axis, default 1)
            op, default = n.op_type, True
        attrs = {a.name: _attr(a, where, available, opsets) for a in n.attribute}
        node = Node(label, op, list(n.input), list(n.output), attrs, source_op=source_op, index=idx)
        first_dtype = next((ctx.dtype(i, "") for i in node.inputs if i and ctx.dtype(i, "")), "float32")
        if source_op != op:  # shape inference does not type the contrib ops: DQ gives the scale's type,
            # Q the zero point's (uint8 without one), as the ONNX ops
            ins = node.inputs + ["", ""]
            first_dtype = (ctx.dtype(ins[1], "float32") if op == "DequantizeLinear"
                           else ctx.dtype(ins[2], "uint8") if ins[2] else "uint8")
        if convert_qop(node, ctx) is not None:
            # QOperator attributes follow the latest op forms; QLinearSoftmax names its Softmax opset.
            opset = int(node.attrs.pop("opset", LATEST_OPSET))
        elif source_op != op:
            opset = _CONTRIB_QDQ_OPSET
        else:
            opset = opsets.get("" if default else n.domain, 1)
        for o in node.outputs:
            if o:
                info = ctx.ensure(o, first_dtype)
                if not info.dtype:
                    info.dtype = first_dtype
        if op in _CONTRIB_QDQ and node.outputs and node.inputs:  # elementwise: the input's shape where
            # inference left it out (it does on some 16-bit opset-21 QDQ models), so a Conv reading DQ(weights)
            # still sees their shape (onnx_normalize: a depthwise Conv is told by it)
            out = ctx.info(node.outputs[0])
            if out is not None and out.shape is None and ctx.shape(node.inputs[0]) is not None:
                out.shape = ctx.shape(node.inputs[0])
        if default or node.op != op:
            nodes.extend(normalize(node, opset, ctx))
        else:
            nodes.append(node)
    for node in nodes:
        _mark_layout(node, ctx)
    outputs = [vi.name for vi in gp.output]
    for o in outputs:
        if o not in available:
            raise ModelError(f"graph output '{o}' is not produced by any node, initializer or input", where)
    return Graph(gp.name, "onnx", ctx.tensors, nodes, inputs, outputs)


def _check_required_inputs(n: onnx.NodeProto, opset: int, label: str, where: str) -> None:
    """Every non-optional, non-variadic input of a standard op is named (kernels take "" as absent)."""
    try:
        schema = onnx.defs.get_schema(n.op_type, max(int(opset), 1), "")
    except Exception:  # noqa: BLE001 - unknown op or opset: the kernel lookup reports it
        return
    single = onnx.defs.OpSchema.FormalParameterOption.Single
    for k, formal in enumerate(schema.inputs):
        if formal.option != single:
            continue
        if k >= len(n.input) or not n.input[k]:
            raise ModelError(f"node '{label}' ({n.op_type}) lacks its required input {k} ('{formal.name}')", where)
    for a in n.attribute:  # an attribute of the wrong kind (a STRING "axis") would reach int() in a kernel
        declared = schema.attributes.get(a.name)
        if declared is not None and int(a.type) != int(declared.type):
            raise ModelError(f"node '{label}' ({n.op_type}) attribute '{a.name}' has type "
                             f"{AttributeProto.AttributeType.Name(a.type)}, expected "
                             f"{AttributeProto.AttributeType.Name(int(declared.type))}", where)


def _node_names(gp: onnx.GraphProto) -> list[str]:
    """The node's own name, else "<op>_<index>"; explicit names are kept, clashes get "_<k>"."""
    taken = {n.name for n in gp.node if n.name}
    seen: set[str] = set()
    out = []
    for idx, n in enumerate(gp.node):
        base = n.name or f"{n.op_type}_{idx}"
        name, k = base, 1
        while name in seen or (not n.name and name in taken):
            name = f"{base}_{k}"
            k += 1
        seen.add(name)
        out.append(name)
    return out


def _mark_layout(node: Node, ctx: BuildContext) -> None:
    if node.op not in SPATIAL_OPS:
        return
    layout = node.attrs.get("layout")
    for name in (node.inputs[:1] + node.outputs[:1]):
        t = ctx.info(name)
        if t is not None and t.layout is None and t.shape is not None and len(t.shape) >= 3:
            t.layout = layout
