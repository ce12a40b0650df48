"""Build small ``.tflite`` models in code, for loader tests and LiteRT conformance tests.

Uses the flatbuffer object API in ``ai_edge_litert.schema_py_generated`` (no TensorFlow).

Example: one int8 per-channel convolution::

    from tests.tflite_builder import TFLiteBuilder

    b = TFLiteBuilder()
    x = b.tensor("x", [1, 8, 8, 3], "int8", scale=0.05, zero_point=-3)
    w = b.const("w", w_int8, scale=[0.01, 0.02, 0.03, 0.04], zero_point=0, axis=0)   # OHWI
    bias = b.const("b", bias_int32, scale=[...], zero_point=0)                        # int32
    y = b.tensor("y", [1, 8, 8, 4], "int8", scale=0.1, zero_point=5)
    b.op("CONV_2D", [x, w, bias], [y],
         options=dict(padding="SAME", stride_w=1, stride_h=1, fused_activation="RELU"), version=3)
    data: bytes = b.build(inputs=[x], outputs=[y])

Tensors
    ``tensor(name, shape, dtype, scale=None, zero_point=None, axis=None, shape_signature=None)``
    declares an activation and returns its index (an ``int``).  ``const(name, array, dtype=None, ...)``
    declares a constant backed by a buffer; ``dtype`` defaults to the array's dtype.  Special dtypes:
    ``"int4"`` (values in [-8, 7], packed two per byte, low nibble first, as TFLite stores them) and
    ``"float16"``.  Quantization: ``scale`` / ``zero_point`` are a number or a list; a list longer
    than one needs ``axis`` (TFLite ``quantized_dimension``).  ``zero_point`` defaults to 0 when a
    scale is given.  ``shape_signature`` (with -1 for dynamic dims) is stored as given.
    Names need not be unique (useful for testing name disambiguation).

Operators
    ``op(name, inputs, outputs, options=None, version=1, custom_options=None)``.  ``name`` is a
    BuiltinOperator name (``"CONV_2D"``, ``"MEAN"`` ...) or ``"CUSTOM:<code>"`` for a custom op.
    Use ``-1`` in ``inputs`` for an omitted optional input (e.g. a conv without bias).
    ``options`` is a dict of the op's ``*Options`` table fields, in snake_case or in the schema's
    camelCase (``stride_w`` / ``strideW``).  Conveniences:

    * ``padding``: ``"SAME"`` / ``"VALID"``; ``fused_activation`` (or ``activation``):
      ``"NONE"``, ``"RELU"``, ``"RELU6"``, ``"RELU_N1_TO_1"``, ``"TANH"``, ``"SIGN_BIT"``;
    * ``dilation_w`` / ``dilation_h`` for ``dilation_w_factor`` / ``dilation_h_factor``;
    * ``filter_w`` / ``filter_h`` for pool ``filter_width`` / ``filter_height``;
    * ``keep_dims`` (MEAN/SUM/REDUCE_*), ``new_shape`` (RESHAPE), ``squeeze_dims`` (SQUEEZE);
    * dtype-valued fields (``out_type`` of SHAPE, ``output_type`` of ARG_MAX/ARG_MIN) take a NumPy
      dtype name such as ``"int32"``; MIRROR_PAD ``mode`` takes ``"REFLECT"`` / ``"SYMMETRIC"``.

    Defaults filled when not given: strides 1 (conv, depthwise, transpose conv, pools),
    ``depth_multiplier`` = out channels / in channels (DEPTHWISE_CONV_2D), ``beta`` 1.0 (SOFTMAX),
    ``values_count`` = number of inputs (PACK), ``num`` = number of outputs (UNPACK),
    ``num_splits`` = number of outputs (SPLIT, SPLIT_V).  Unknown option keys raise ``ValueError``.

    Input order is TFLite's: CONV_2D/DEPTHWISE_CONV_2D/FULLY_CONNECTED ``[x, w, bias]``,
    TRANSPOSE_CONV ``[output_shape, w, x, bias]``, SPLIT ``[axis, x]``, PAD ``[x, paddings]``,
    RESIZE_* ``[x, size]``, MEAN/SUM ``[x, axes]``, GATHER ``[params, indices]`` ...
    Operator versions: 1 is accepted for most float ops; int8 per-channel conv/depthwise wanted 3,
    FULLY_CONNECTED int8 4, TRANSPOSE_CONV int8 4 (with bias), BATCH_MATMUL int8 4, RESIZE_* int8 3.

Model
    ``build(inputs, outputs, external_buffers=False) -> bytes``.  With ``external_buffers=True``
    constant data is written after the flatbuffer and referenced by ``Buffer.offset`` / ``size``
    (the >2 GB model layout), which lets loader tests cover that path on small models.
    ``save(path, inputs, outputs)`` writes the file and returns the path.

    ``builder.name_of(index)`` returns a tensor's name, ``builder.tensors`` the TensorT list.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as fb

_TYPES = {
    "float32": fb.TensorType.FLOAT32, "float16": fb.TensorType.FLOAT16, "float64": fb.TensorType.FLOAT64,
    "int32": fb.TensorType.INT32, "uint8": fb.TensorType.UINT8, "int64": fb.TensorType.INT64,
    "bool": fb.TensorType.BOOL, "int16": fb.TensorType.INT16, "int8": fb.TensorType.INT8,
    "uint32": fb.TensorType.UINT32, "uint16": fb.TensorType.UINT16, "uint64": fb.TensorType.UINT64,
    "int4": fb.TensorType.INT4, "complex64": fb.TensorType.COMPLEX64,
}

# Ops whose options table is not named after the op (CamelCase(op) + "Options").
_OPTIONS_NAME = {
    "AVERAGE_POOL_2D": "Pool2DOptions", "MAX_POOL_2D": "Pool2DOptions", "L2_POOL_2D": "Pool2DOptions",
    "CONV_2D": "Conv2DOptions", "DEPTHWISE_CONV_2D": "DepthwiseConv2DOptions",
    "MEAN": "ReducerOptions", "SUM": "ReducerOptions", "REDUCE_MAX": "ReducerOptions",
    "REDUCE_MIN": "ReducerOptions", "REDUCE_PROD": "ReducerOptions", "REDUCE_ANY": "ReducerOptions",
    "REDUCE_ALL": "ReducerOptions",
    "MAXIMUM": "MaximumMinimumOptions", "MINIMUM": "MaximumMinimumOptions",
    "L2_NORMALIZATION": "L2NormOptions", "PADV2": "PadV2Options", "BATCH_MATMUL": "BatchMatMulOptions",
    "LOCAL_RESPONSE_NORMALIZATION": "LocalResponseNormalizationOptions",
    "SELECT_V2": "SelectV2Options", "SPLIT_V": "SplitVOptions", "TOPK_V2": "TopKV2Options",
    "BATCH_TO_SPACE_ND": "BatchToSpaceNDOptions", "SPACE_TO_BATCH_ND": "SpaceToBatchNDOptions",
    "UNIDIRECTIONAL_SEQUENCE_LSTM": "UnidirectionalSequenceLSTMOptions",
    "BIDIRECTIONAL_SEQUENCE_LSTM": "BidirectionalSequenceLSTMOptions", "LSTM": "LSTMOptions",
    "RFFT2D": "Rfft2dOptions", "GATHER_ND": "GatherNdOptions", "REVERSE_V2": "ReverseV2Options",
    "ADD_N": "AddNOptions", "ATAN2": "ATan2Options", "PRELU": None, "RELU": None, "RELU6": None,
    "RELU_N1_TO_1": None, "RELU_0_TO_1": None, "LOGISTIC": None, "TANH": None, "RSQRT": None,
    "SQRT": None, "LOG": None, "ELU": None, "FLOOR": None, "CEIL": None, "ROUND": None, "SIN": None,
}

_ALIASES = {
    "fused_activation": "fusedActivationFunction", "activation": "fusedActivationFunction",
    "fused_activation_function": "fusedActivationFunction",
    "dilation_w": "dilationWFactor", "dilation_h": "dilationHFactor",
    "filter_w": "filterWidth", "filter_h": "filterHeight",
}


def _camel(key: str) -> str:
    if key in _ALIASES:
        return _ALIASES[key]
    parts = key.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _enum_value(enum_cls: type, value: Any, what: str) -> int:
    if isinstance(value, str):
        try:
            return int(getattr(enum_cls, value.upper()))
        except AttributeError:
            names = [k for k in vars(enum_cls) if not k.startswith("_")]
            raise ValueError(f"{what}: unknown value {value!r}; expected one of {names}") from None
    return int(value)


def tensor_type(dtype: Any) -> int:
    """TFLite TensorType code of a NumPy dtype name (or ``"int4"``)."""
    key = dtype if dtype == "int4" else np.dtype(dtype).name
    if key not in _TYPES:
        raise ValueError(f"unsupported TFLite tensor dtype {dtype!r}")
    return _TYPES[key]


def _pack_int4(values: np.ndarray) -> bytes:
    v = np.asarray(values).astype(np.int64).ravel()
    if v.size and (v.min() < -8 or v.max() > 7):
        raise ValueError("int4 constant values must lie in [-8, 7]")
    nib = (v & 0xF).astype(np.uint8)
    if nib.size % 2:
        nib = np.append(nib, np.uint8(0))
    return (nib[0::2] | (nib[1::2] << 4)).astype(np.uint8).tobytes()


class TFLiteBuilder:
    """Accumulates tensors, buffers and operators of one subgraph; ``build`` serialises them."""

    def __init__(self, description: str = "refinterp test model") -> None:
        self.description = description
        self.tensors: list[Any] = []
        self.buffers: list[Any] = [fb.BufferT()]  # buffer 0: the empty sentinel
        self.operators: list[Any] = []
        self.opcodes: list[Any] = []
        self._opcode_index: dict[tuple[int, str | None, int], int] = {}
        self._subgraphs: list[tuple["TFLiteBuilder", list[int], list[int], str]] = []

    def subgraph(self, name: str = "") -> "TFLiteBuilder":
        """A builder for another subgraph of the same model (WHILE / IF bodies): it shares the
        model's buffers and operator codes; declare its inputs/outputs with ``set_io``.  Subgraph
        indices follow creation order, starting at 1."""
        child = TFLiteBuilder(self.description)
        child.buffers, child.opcodes, child._opcode_index = self.buffers, self.opcodes, self._opcode_index
        self._subgraphs.append((child, [], [], name or f"subgraph{len(self._subgraphs) + 1}"))
        return child

    def set_io(self, sub: "TFLiteBuilder", inputs: Sequence[int], outputs: Sequence[int]) -> int:
        """Inputs and outputs of subgraph ``sub``; returns its subgraph index."""
        for k, (b, _, _, name) in enumerate(self._subgraphs):
            if b is sub:
                self._subgraphs[k] = (b, [int(i) for i in inputs], [int(o) for o in outputs], name)
                return k + 1
        raise ValueError("not a subgraph of this builder")

    # -- tensors -----------------------------------------------------------------------------
    def tensor(self, name: str, shape: Sequence[int], dtype: Any = "float32", scale: Any = None,
               zero_point: Any = None, axis: int | None = None,
               shape_signature: Sequence[int] | None = None) -> int:
        """Declare a non-constant tensor; returns its index."""
        t = fb.TensorT()
        t.name = name
        t.shape = [int(d) for d in shape]
        t.type = tensor_type(dtype)
        t.buffer = 0
        if shape_signature is not None:
            t.shapeSignature = [int(d) for d in shape_signature]
        t.quantization = self._quant(scale, zero_point, axis)
        self.tensors.append(t)
        return len(self.tensors) - 1

    def const(self, name: str, value: Any, dtype: Any = None, scale: Any = None, zero_point: Any = None,
              axis: int | None = None, shape: Sequence[int] | None = None) -> int:
        """Declare a constant tensor holding ``value``; returns its index."""
        arr = np.asarray(value)
        if dtype is None:
            dtype = arr.dtype.name
        if dtype == "int4":
            data = _pack_int4(arr)
        else:
            arr = np.array(arr, dtype=np.dtype(dtype), order="C")  # keeps rank 0 (ascontiguousarray would not)
            data = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        idx = self.tensor(name, arr.shape if shape is None else shape, dtype, scale, zero_point, axis)
        buf = fb.BufferT()
        buf.data = np.frombuffer(data, np.uint8).copy() if data else None
        self.buffers.append(buf)
        self.tensors[idx].buffer = len(self.buffers) - 1
        return idx

    @staticmethod
    def _quant(scale: Any, zero_point: Any, axis: int | None) -> Any:
        if scale is None:
            return None
        q = fb.QuantizationParametersT()
        q.scale = [float(s) for s in np.atleast_1d(np.asarray(scale, dtype=np.float64))]
        zp = np.atleast_1d(np.asarray(0 if zero_point is None else zero_point, dtype=np.int64))
        if zp.size == 1 and len(q.scale) > 1:
            zp = np.full(len(q.scale), int(zp[0]), np.int64)
        q.zeroPoint = [int(z) for z in zp]
        if len(q.scale) > 1 and axis is None:
            raise ValueError("per-channel quantization needs axis=")
        q.quantizedDimension = int(axis or 0)
        return q

    def name_of(self, index: int) -> str:
        return self.tensors[index].name

    # -- operators ---------------------------------------------------------------------------
    def _opcode(self, op: str, version: int) -> int:
        if op.upper().startswith("CUSTOM:"):
            code, custom = int(fb.BuiltinOperator.CUSTOM), op.split(":", 1)[1]
        else:
            code = _enum_value(fb.BuiltinOperator, op, "operator")
            custom = None
        key = (code, custom, version)
        if key not in self._opcode_index:
            oc = fb.OperatorCodeT()
            oc.builtinCode = code
            oc.deprecatedBuiltinCode = min(code, int(fb.BuiltinOperator.PLACEHOLDER_FOR_GREATER_OP_CODES))
            oc.customCode = custom
            oc.version = int(version)
            self.opcodes.append(oc)
            self._opcode_index[key] = len(self.opcodes) - 1
        return self._opcode_index[key]

    def op(self, op: str, inputs: Iterable[int], outputs: Iterable[int], options: dict | None = None,
           version: int = 1, custom_options: bytes | None = None) -> int:
        """Append an operator; returns its index in the subgraph."""
        o = fb.OperatorT()
        o.opcodeIndex = self._opcode(op, version)
        o.inputs = [int(i) for i in inputs]
        o.outputs = [int(i) for i in outputs]
        opname = op.upper()
        if not opname.startswith("CUSTOM:"):
            otype, obj = self._options(opname, dict(options or {}), o.inputs, o.outputs)
            if obj is not None:
                o.builtinOptionsType, o.builtinOptions = otype, obj
        elif options:
            raise ValueError("custom ops take custom_options bytes, not options")
        if custom_options is not None:
            o.customOptions = list(custom_options)
        self.operators.append(o)
        return len(self.operators) - 1

    def _options(self, op: str, opts: dict, inputs: list[int], outputs: list[int]) -> tuple[int, Any]:
        if op in _OPTIONS_NAME:
            oname = _OPTIONS_NAME[op]
        else:
            oname = "".join(p[:1] + p[1:].lower() for p in op.split("_")) + "Options"
        if oname is None or not hasattr(fb.BuiltinOptions, oname):
            if opts:
                raise ValueError(f"{op} takes no options (got {sorted(opts)})")
            return 0, None
        obj = getattr(fb, oname + "T")()
        fields = vars(obj)
        self._defaults(op, obj, fields, opts, inputs, outputs)
        for key, value in opts.items():
            attr = key if key in fields else _camel(key)
            if attr not in fields:
                raise ValueError(f"{op}: unknown option {key!r}; {oname} has {sorted(fields)}")
            if attr == "padding":
                value = _enum_value(fb.Padding, value, f"{op}.padding")
            elif attr == "fusedActivationFunction":
                value = _enum_value(fb.ActivationFunctionType, "NONE" if value is None else value,
                                    f"{op}.fused_activation")
            elif attr in ("outType", "outputType", "inDataType", "outDataType"):
                value = value if isinstance(value, int) else tensor_type(value)
            elif attr == "mode" and oname == "MirrorPadOptions":
                value = _enum_value(fb.MirrorPadMode, value, f"{op}.mode")
            elif isinstance(value, (list, tuple, np.ndarray)):
                value = [int(v) for v in value]
            setattr(obj, attr, value)
        return int(getattr(fb.BuiltinOptions, oname)), obj

    def _defaults(self, op: str, obj: Any, fields: dict, opts: dict, inputs: list[int],
                  outputs: list[int]) -> None:
        if "strideW" in fields:
            obj.strideW = obj.strideH = 1
        if op == "DEPTHWISE_CONV_2D" and len(inputs) > 1:
            cin = self.tensors[inputs[0]].shape[-1]
            cout = self.tensors[inputs[1]].shape[-1]
            obj.depthMultiplier = max(1, cout // max(1, cin))
        if op == "SOFTMAX":
            obj.beta = 1.0
        if op == "PACK":
            obj.valuesCount = len(inputs)
        if op == "UNPACK":
            obj.num = len(outputs)
        if op in ("SPLIT", "SPLIT_V"):
            obj.numSplits = len(outputs)

    # -- model -------------------------------------------------------------------------------
    def _model(self, inputs: Sequence[int], outputs: Sequence[int], buffers: list[Any]) -> Any:
        sg = fb.SubGraphT()
        sg.tensors, sg.operators = self.tensors, self.operators
        sg.inputs, sg.outputs = [int(i) for i in inputs], [int(i) for i in outputs]
        sg.name = "main"
        m = fb.ModelT()
        m.version = 3
        subs = []
        for b, ins, outs, name in self._subgraphs:
            t = fb.SubGraphT()
            t.tensors, t.operators, t.inputs, t.outputs, t.name = b.tensors, b.operators, ins, outs, name
            subs.append(t)
        m.operatorCodes, m.subgraphs, m.buffers = self.opcodes, [sg] + subs, buffers
        m.description = self.description
        return m

    @staticmethod
    def _serialise(model: Any) -> bytes:
        b = flatbuffers.Builder(1024)
        b.Finish(model.Pack(b), file_identifier=b"TFL3")
        return bytes(b.Output())

    def build(self, inputs: Sequence[int], outputs: Sequence[int], external_buffers: bool = False) -> bytes:
        if not external_buffers:
            return self._serialise(self._model(inputs, outputs, self.buffers))
        # Two passes: offsets are uint64 fields, so the flatbuffer size does not depend on their values
        # as long as every offset is non-zero (zero is the default and would be omitted).
        blobs = [bytes(bytearray(b.data)) if b.data is not None else b"" for b in self.buffers]
        ext = []
        for blob in blobs:
            nb = fb.BufferT()
            if blob:
                nb.offset, nb.size = 1, len(blob)
            ext.append(nb)
        head = self._serialise(self._model(inputs, outputs, ext))
        pos = (len(head) + 15) // 16 * 16
        tail = bytearray()
        for nb, blob in zip(ext, blobs):
            if blob:
                nb.offset = pos + len(tail)
                tail += blob + b"\0" * ((-len(blob)) % 16)
        head2 = self._serialise(self._model(inputs, outputs, ext))
        assert len(head2) == len(head)
        return head2 + b"\0" * (pos - len(head2)) + bytes(tail)

    def save(self, path: str | Path, inputs: Sequence[int], outputs: Sequence[int], **kw: Any) -> Path:
        p = Path(path)
        p.write_bytes(self.build(inputs, outputs, **kw))
        return p


def single_op(op: str, inputs: Sequence[tuple], outputs: Sequence[tuple], options: dict | None = None,
              version: int = 1) -> tuple[bytes, list[str], list[str]]:
    """Shortcut for a one-op model.

    ``inputs`` / ``outputs`` entries are ``(name, shape, dtype)`` for activations or
    ``(name, ndarray)`` for constants (inputs only); returns ``(model bytes, input names, output names)``.
    """
    b = TFLiteBuilder()
    ins, feeds = [], []
    for spec in inputs:
        if spec is None:
            ins.append(-1)
        elif len(spec) == 2:
            ins.append(b.const(spec[0], spec[1]))
        else:
            idx = b.tensor(*spec)
            ins.append(idx)
            feeds.append(idx)
    outs = [b.tensor(*spec) for spec in outputs]
    b.op(op, ins, outs, options=options, version=version)
    return b.build(feeds, outs), [b.name_of(i) for i in feeds], [b.name_of(i) for i in outs]
