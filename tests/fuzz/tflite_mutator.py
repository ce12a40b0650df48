"""Structure-aware TFLite mutations through the flatbuffer object API of ``ai_edge_litert``: edit tensor
shapes, types, buffer references, quantization, operator indices and options, then repack, so the
mutated model is a well-formed flatbuffer that reaches the loader's and the kernels' checks."""
from __future__ import annotations

import flatbuffers
import numpy as np
from hypothesis import strategies as st

VALUES = (-(1 << 31), -2, -1, 0, 1, 2, 3, 4, 7, 8, 16, 255, 1 << 16, 1 << 20, (1 << 31) - 1)
FLOATS = (float("nan"), float("inf"), float("-inf"), 0.0, -1.0, 1e-45, 1e-38, 1e30, 3.0)
KINDS = ("shape", "shape_append", "shape_pop", "type", "buffer", "scale", "zero_point", "qdim", "op_input",
         "op_output", "opcode", "option", "buffer_trunc", "buffer_grow", "sg_input", "sg_output", "drop_op",
         "swap_ops", "builtin_code", "signature")

tflite_mutation = st.tuples(st.sampled_from(KINDS), st.integers(0, 1 << 16), st.integers(0, 1 << 16),
                            st.sampled_from(VALUES), st.sampled_from(FLOATS))
tflite_mutations = st.lists(tflite_mutation, min_size=1, max_size=4)


def _pick(seq, i):
    return seq[i % len(seq)] if seq is not None and len(seq) else None


def _set_item(arr, j, v, dtype):
    a = np.array(arr if arr is not None else [], dtype=np.int64)
    if a.size:
        a[j % a.size] = v
    return np.clip(a, np.iinfo(dtype).min, np.iinfo(dtype).max).astype(dtype)


def mutate_tflite(data: bytes, muts: list[tuple]) -> bytes:
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromPackedBuf(bytearray(data), 0)
    sg = m.subgraphs[0]
    for kind, i, j, v, f in muts:
        t = _pick(sg.tensors, i)
        op = _pick(sg.operators, i)
        if kind == "shape" and t is not None:
            t.shape = _set_item(t.shape, j, v, np.int32)
        elif kind == "shape_append" and t is not None:
            t.shape = np.append(np.asarray(t.shape if t.shape is not None else [], np.int32), np.int32(v))
        elif kind == "shape_pop" and t is not None and t.shape is not None and len(t.shape):
            t.shape = np.asarray(t.shape[:-1], np.int32)
        elif kind == "type" and t is not None:
            t.type = j % 20
        elif kind == "buffer" and t is not None:
            t.buffer = j % (len(m.buffers) + 3)
        elif kind in ("scale", "zero_point", "qdim") and t is not None and t.quantization is not None:
            q = t.quantization
            if kind == "scale" and q.scale is not None and len(q.scale):
                q.scale = np.asarray(q.scale, np.float32).copy()
                q.scale[j % len(q.scale)] = f
            elif kind == "zero_point" and q.zeroPoint is not None and len(q.zeroPoint):
                q.zeroPoint = _set_item(q.zeroPoint, j, v, np.int64)
            elif kind == "qdim":
                q.quantizedDimension = int(np.clip(v, -(1 << 31), (1 << 31) - 1))
        elif kind == "op_input" and op is not None:
            op.inputs = _set_item(op.inputs, j, v if v < 1 << 16 else j, np.int32)
        elif kind == "op_output" and op is not None:
            op.outputs = _set_item(op.outputs, j, v if v < 1 << 16 else j, np.int32)
        elif kind == "opcode" and op is not None:
            op.opcodeIndex = j % (len(m.operatorCodes) + 2)
        elif kind == "option" and op is not None and op.builtinOptions is not None:
            fields = sorted(k for k, x in vars(op.builtinOptions).items() if isinstance(x, (int, float, bool)))
            if fields:
                name = fields[j % len(fields)]
                old = getattr(op.builtinOptions, name)
                new = f if isinstance(old, float) else (bool(v & 1) if isinstance(old, bool) else v)
                setattr(op.builtinOptions, name, new)
                try:
                    op.builtinOptions.Pack(flatbuffers.Builder(64))
                except (TypeError, OverflowError):  # the field is narrower (int8 enum): wrap into it
                    setattr(op.builtinOptions, name, int(np.int8(np.int64(v) & 0x7F)) if not isinstance(
                        old, float) else old)
        elif kind in ("buffer_trunc", "buffer_grow"):
            b = _pick(m.buffers, i)
            if b is not None and b.data is not None and len(b.data):
                d = np.asarray(b.data, np.uint8)
                b.data = d[: j % len(d)] if kind == "buffer_trunc" else np.concatenate([d, d[: 1 + j % 8]])
        elif kind == "sg_input":
            sg.inputs = _set_item(sg.inputs, j, j % (len(sg.tensors) + 2), np.int32)
        elif kind == "sg_output":
            sg.outputs = _set_item(sg.outputs, j, j % (len(sg.tensors) + 2), np.int32)
        elif kind == "drop_op" and op is not None:
            sg.operators.remove(op)
        elif kind == "swap_ops" and sg.operators and len(sg.operators) > 1:
            a, c = i % len(sg.operators), j % len(sg.operators)
            sg.operators[a], sg.operators[c] = sg.operators[c], sg.operators[a]
        elif kind == "builtin_code":
            code = _pick(m.operatorCodes, i)
            if code is not None:
                code.builtinCode = j % 210
                code.deprecatedBuiltinCode = min(code.builtinCode, 127)
        elif kind == "signature" and m.signatureDefs:
            sd = _pick(m.signatureDefs, i)
            for tm in (sd.inputs or []) + (sd.outputs or []):
                tm.tensorIndex = v if 0 <= v < (1 << 31) else j
    b = flatbuffers.Builder(1024)
    try:
        b.Finish(m.Pack(b), file_identifier=b"TFL3")
    except (TypeError, OverflowError):  # a value out of its field's range: keep the model unmutated
        return data
    return bytes(b.Output())
