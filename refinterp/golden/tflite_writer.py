"""A golden case as a one-operator ``.tflite`` model, so a real TFLite runtime can re-run it.

Only used by ``--verify`` (it needs ``ai_edge_litert``, imported lazily, for the flatbuffer schema).
Tensors are named ``in<k>`` / ``out<k>``; constant inputs become buffers, the others graph inputs.
The canonical attributes are mapped back to the builtin options the TFLite loader reads
(refinterp/loaders/tflite_ops.py), which a unit test checks by loading the bytes back.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import GoldenError
from .case import Case, from_jsonable

# canonical op -> (builtin operator, options table or None)
OPS: dict[str, tuple[str, str | None]] = {
    "Conv": ("CONV_2D", "Conv2DOptions"), "DepthwiseConv": ("DEPTHWISE_CONV_2D", "DepthwiseConv2DOptions"),
    "FullyConnected": ("FULLY_CONNECTED", "FullyConnectedOptions"), "Add": ("ADD", "AddOptions"),
    "Sub": ("SUB", "SubOptions"), "Mul": ("MUL", "MulOptions"), "AveragePool": ("AVERAGE_POOL_2D", "Pool2DOptions"),
    "MaxPool": ("MAX_POOL_2D", "Pool2DOptions"), "Softmax": ("SOFTMAX", "SoftmaxOptions"),
    "Sigmoid": ("LOGISTIC", None), "Tanh": ("TANH", None), "HardSwish": ("HARD_SWISH", None),
    "ReduceMean": ("MEAN", "ReducerOptions"), "BatchMatMul": ("BATCH_MATMUL", "BatchMatMulOptions"),
}
_PADDING = {"SAME_UPPER": "SAME", "VALID": "VALID"}


def supported(case: Case) -> str | None:
    """None when the case can be written, else the reason it cannot."""
    op = case.meta["op"]
    if op not in OPS:
        return f"no single-op TFLite writer for {op}"
    if case.meta.get("model_format", "tflite") != "tflite":
        return "case does not come from a TFLite graph"
    pad = (case.meta.get("attrs") or {}).get("auto_pad")
    if pad is not None and pad not in _PADDING:
        return f"padding {pad} has no TFLite equivalent"
    return None


def _options(fb, op: str, table: str, attrs: dict[str, Any]):
    o = getattr(fb, table + "T")()
    act = attrs.get("activation") or "NONE"
    if hasattr(o, "fusedActivationFunction"):
        o.fusedActivationFunction = int(getattr(fb.ActivationFunctionType, act))
    if hasattr(o, "padding"):
        o.padding = int(getattr(fb.Padding, _PADDING[attrs.get("auto_pad", "VALID")]))
        o.strideH, o.strideW = (int(s) for s in attrs.get("strides", [1, 1]))
    if hasattr(o, "dilationHFactor"):
        o.dilationHFactor, o.dilationWFactor = (int(d) for d in attrs.get("dilations", [1, 1]))
    if op == "DepthwiseConv":
        o.depthMultiplier = int(attrs.get("depth_multiplier", 1))
    if op in ("AveragePool", "MaxPool"):
        o.filterHeight, o.filterWidth = (int(k) for k in attrs["kernel_shape"])
    if op == "FullyConnected":
        o.keepNumDims = bool(attrs.get("keep_num_dims", False))
        o.asymmetricQuantizeInputs = bool(attrs.get("asymmetric_quantize_inputs", False))
    if op in ("Add", "Sub") and "pot_scale_int16" in attrs:
        o.potScaleInt16 = bool(attrs["pot_scale_int16"])
    if op == "Softmax":
        o.beta = float(attrs.get("beta", 1.0))
    if op == "ReduceMean":
        o.keepDims = bool(attrs.get("keepdims", 0))
    if op == "BatchMatMul":
        o.adjX, o.adjY = bool(attrs.get("adj_x", False)), bool(attrs.get("adj_y", False))
    return int(getattr(fb.BuiltinOptions, table)), o


def _tensor(fb, name: str, arr_or_spec, spec: dict[str, Any], buffer: int):
    t = fb.TensorT()
    t.name = name
    t.shape = [int(d) for d in spec["shape"]]
    t.type = int(getattr(fb.TensorType, np.dtype(spec["dtype"]).name.upper()))
    t.buffer = buffer
    q = spec.get("quant")
    if q:
        qp = fb.QuantizationParametersT()
        qp.scale = [float(s) for s in q["scale"]]
        qp.zeroPoint = [int(z) for z in q["zero_point"]]
        qp.quantizedDimension = int(q.get("axis") or 0)
        t.quantization = qp
    return t


def case_to_tflite(case: Case) -> tuple[bytes, dict[str, np.ndarray], list[str]]:
    """(model bytes, feeds by input name, output names in case order)."""
    import flatbuffers
    from ai_edge_litert import schema_py_generated as fb

    why = supported(case)
    if why:
        raise GoldenError(why, str(case.path) if case.path else None)
    m = case.meta
    builtin, table = OPS[m["op"]]
    attrs = from_jsonable(m.get("attrs") or {})
    buffers = [fb.BufferT()]
    tensors, op_inputs, feeds = [], [], {}
    for s in m["inputs"]:
        if not s.get("present", True):
            op_inputs.append(-1)
            continue
        arr = case.arrays[f"input.{s['key']}"]
        name = f"in{s['key']}"
        buf = 0
        if s.get("const"):
            b = fb.BufferT()
            b.data = np.frombuffer(np.ascontiguousarray(arr.astype(arr.dtype.newbyteorder("<"))).tobytes(),
                                   np.uint8).copy()
            buffers.append(b)
            buf = len(buffers) - 1
        else:
            feeds[name] = arr
        tensors.append(_tensor(fb, name, arr, dict(s, shape=list(arr.shape)), buf))
        op_inputs.append(len(tensors) - 1)
    out_names, op_outputs = [], []
    for s in m["outputs"]:
        name = f"out{s['key']}"
        tensors.append(_tensor(fb, name, None, s, 0))
        op_outputs.append(len(tensors) - 1)
        out_names.append(name)
    code = fb.OperatorCodeT()
    bc = int(getattr(fb.BuiltinOperator, builtin))
    code.builtinCode = bc
    code.deprecatedBuiltinCode = min(bc, int(fb.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES))
    code.version = int(attrs.get("op_version", 1))
    op = fb.OperatorT()
    op.opcodeIndex = 0
    op.inputs, op.outputs = op_inputs, op_outputs
    if table is not None:
        op.builtinOptionsType, op.builtinOptions = _options(fb, m["op"], table, attrs)
    sg = fb.SubGraphT()
    sg.tensors, sg.operators = tensors, [op]
    sg.inputs = [i for i, t in enumerate(tensors) if t.name in feeds]
    sg.outputs = op_outputs
    sg.name = "main"
    model = fb.ModelT()
    model.version = 3
    model.operatorCodes, model.subgraphs, model.buffers = [code], [sg], buffers
    model.description = f"refinterp golden case {case.name}"
    b = flatbuffers.Builder(1024)
    b.Finish(model.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output()), feeds, out_names
