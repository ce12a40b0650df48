"""Structure-aware ONNX mutations: edit protobuf fields (dims, data types, attributes, names, external
data locations, node order) so the mutated model still parses and reaches the loader's checks."""
from __future__ import annotations

from hypothesis import strategies as st
from onnx import AttributeProto, ModelProto, TensorProto

VALUES = (-(1 << 63), -(1 << 31), -2, -1, 0, 1, 2, 3, 4, 7, 8, 255, 1 << 16, (1 << 31) - 1, 1 << 32, 1 << 40,
          (1 << 62))
FLOATS = (float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1e-38, 1e30, 3.0)
LOCATIONS = ("../outside.bin", "/etc/hostname", "sub/../../outside.bin", "missing.bin", "", "a\\..\\..\\x",
             "fields_data.bin")
OP_TYPES = ("Conv", "Relu", "Add", "MatMul", "Gemm", "Reshape", "Transpose", "QuantizeLinear", "DequantizeLinear",
            "QLinearConv", "Softmax", "MaxPool", "Concat", "Gather", "Slice", "Resize", "Pad", "Tile", "Expand",
            "ConstantOfShape", "Range", "NoSuchOp")
KINDS = ("dims", "dims_append", "dims_pop", "data_type", "raw_trunc", "external", "attr", "input_name",
         "elem_type", "input_dim", "op_type", "drop_node", "swap_nodes", "drop_output", "opset")

field_mutation = st.tuples(st.sampled_from(KINDS), st.integers(0, 1 << 16), st.integers(0, 1 << 16),
                           st.sampled_from(VALUES), st.sampled_from(FLOATS), st.sampled_from(LOCATIONS),
                           st.sampled_from(OP_TYPES))
field_mutations = st.lists(field_mutation, min_size=1, max_size=5)


def _pick(seq, i):
    return seq[i % len(seq)] if len(seq) else None


def mutate_onnx(data: bytes, muts: list[tuple]) -> bytes:
    m = ModelProto()
    m.ParseFromString(data)
    g = m.graph
    names = [t.name for t in g.initializer] + [o for n in g.node for o in n.output] + [""]
    for kind, i, j, v, f, loc, op in muts:
        init = _pick(g.initializer, i)
        node = _pick(g.node, i)
        if kind == "dims" and init is not None and len(init.dims):
            init.dims[j % len(init.dims)] = v
        elif kind == "dims_append" and init is not None:
            init.dims.append(v)
        elif kind == "dims_pop" and init is not None and len(init.dims):
            del init.dims[-1]
        elif kind == "data_type" and init is not None:
            init.data_type = j % 27
        elif kind == "raw_trunc" and init is not None and init.raw_data:
            init.raw_data = init.raw_data[: j % (len(init.raw_data) + 1)]
        elif kind == "external" and init is not None:
            init.data_location = TensorProto.EXTERNAL
            del init.external_data[:]
            init.external_data.add(key="location", value=loc)
            init.external_data.add(key="offset", value=str(v))
            init.external_data.add(key="length", value=str(j))
            init.ClearField("raw_data")
        elif kind == "attr" and node is not None and len(node.attribute):
            a = node.attribute[j % len(node.attribute)]
            if a.type == AttributeProto.INT:
                a.i = v
            elif a.type == AttributeProto.INTS and len(a.ints):
                a.ints[j % len(a.ints)] = v
            elif a.type == AttributeProto.FLOAT:
                a.f = f
            elif a.type == AttributeProto.FLOATS and len(a.floats):
                a.floats[j % len(a.floats)] = f
            elif a.type == AttributeProto.STRING:
                a.s = loc.encode()
        elif kind == "input_name" and node is not None and len(node.input):
            node.input[j % len(node.input)] = _pick(names, j // 7) or ""
        elif kind == "elem_type" and len(g.input):
            _pick(g.input, i).type.tensor_type.elem_type = j % 27
        elif kind == "input_dim" and len(g.input):
            dims = _pick(g.input, i).type.tensor_type.shape.dim
            if len(dims):
                dims[j % len(dims)].dim_value = v
        elif kind == "op_type" and node is not None:
            node.op_type = op
        elif kind == "drop_node" and node is not None:
            g.node.remove(node)
        elif kind == "swap_nodes" and len(g.node) > 1:
            a, b = i % len(g.node), j % len(g.node)
            na, nb = ModelProto().graph.node.add(), ModelProto().graph.node.add()
            na.CopyFrom(g.node[a])
            nb.CopyFrom(g.node[b])
            g.node[a].CopyFrom(nb)
            g.node[b].CopyFrom(na)
        elif kind == "drop_output" and len(g.output):
            del g.output[i % len(g.output)]
        elif kind == "opset" and len(m.opset_import):
            m.opset_import[i % len(m.opset_import)].version = v if -(1 << 63) <= v < (1 << 63) else 1
    try:
        return m.SerializeToString()
    except ValueError:  # an out-of-range field value for its protobuf type: keep the model unmutated
        return data
