"""TFLite flatbuffer -> Graph.  The only module (with ``tflite_ops``) that imports ``tflite``.

Reads every subgraph: every tensor (name, shape, dtype, quantization, constant data), every operator
(mapped to a canonical op by ``tflite_ops``); subgraph 0 is the model, the others are CALL_ONCE
initialisers and WHILE / IF bodies (``Graph.subgraphs``, linked into the nodes that call them).

Naming: tensors keep their stored name; a name already taken by a lower-indexed tensor becomes
``<name>:<index>`` (``TensorInfo.source_name`` keeps the stored name).  A node is named after its
first output tensor; ``attrs["op_version"]`` keeps the operator-code version.  Derived constants
the loader adds (e.g. ONNX-form ``pads`` of a PAD) are named ``<node name>#<role>``.

Constants: buffer data inline in the flatbuffer, or (models > 2 GB) at ``Buffer.offset`` /
``Buffer.size`` bytes from the start of the file.  INT4 constants are unpacked (two per byte, low
nibble first) into int8 values in [-8, 7]; their ``dtype`` is ``"int8"`` and their names are listed
in ``graph.metadata["int4_tensors"]``.  float16 constants stay float16.
``graph.metadata``: ``schema_version``, ``description``, ``subgraph_count``, ``signatures`` (signature
key -> ``{"inputs": {key: tensor name}, "outputs": {...}}``), ``int4_tensors``.
Every index (buffer, tensor, opcode) is range-checked; any malformed input raises ``ModelError``.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from ..errors import ModelError, RefinterpError, ResourceError
from ..ir import Graph, Node, QuantParams, TensorInfo
from ..limits import ABSURD_BYTES, check_alloc, check_shape, element_count
from . import tflite_blockwise, tflite_sparse
from .tflite_ops import OpContext, convert, decode_options
from .tflite_ops_index import detection_options, link_subgraphs
from .tflite_signal import SIGNAL_OPS, signal_options, spectral_state

_DTYPES = {"FLOAT32": "float32", "FLOAT16": "float16", "INT32": "int32", "UINT8": "uint8", "INT64": "int64",
           "BOOL": "bool", "INT16": "int16", "COMPLEX64": "complex64", "INT8": "int8", "FLOAT64": "float64",
           "COMPLEX128": "complex128", "UINT64": "uint64", "UINT32": "uint32", "UINT16": "uint16",
           "INT4": "int4", "STRING": "string", "RESOURCE": "resource", "VARIANT": "variant",
           "BFLOAT16": "bfloat16"}
_TYPE_NAMES = {v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_")}
_OPTION_NAMES = {v: k for k, v in vars(tflite.BuiltinOptions).items() if not k.startswith("_")}
MAX_DIM = 1 << 31
_ITEMSIZE = {"int4": 1, "string": 1, "resource": 1, "variant": 1, "bfloat16": 2}


def load_tflite(path: Path) -> Graph:
    path = Path(path)
    where = str(path)
    try:
        check_alloc(path.stat().st_size, 1, "model file", where)
        data = path.read_bytes()
    except OSError as e:
        raise ModelError(f"cannot read ({e.strerror or e})", where) from None
    if len(data) < 8:
        raise ModelError(f"not a TFLite model (file is {len(data)} bytes)", where)
    if data[4:8] != b"TFL3":
        raise ModelError("not a TFLite model (no 'TFL3' file identifier)", where)
    try:
        return _Reader(data, where).graph(path)
    except RefinterpError:
        raise
    except MemoryError:
        raise ResourceError("out of memory while reading the TFLite flatbuffer", where) from None
    except (struct.error, IndexError, ValueError, TypeError, OverflowError, UnicodeDecodeError,
            AttributeError, KeyError, ZeroDivisionError, RecursionError) as e:
        raise ModelError(f"malformed TFLite flatbuffer ({type(e).__name__}: {e})", where) from None


class _Reader:
    def __init__(self, data: bytes, where: str) -> None:
        self.data = data
        self.where = where
        self.model = tflite.Model.GetRootAs(data, 0)

    def fail(self, msg: str) -> ModelError:
        return ModelError(msg, self.where)

    def _count(self, n: int, what: str, item_size: int = 4) -> int:
        if n < 0 or n * item_size > len(self.data):
            raise self.fail(f"malformed TFLite flatbuffer ({what} count {n} exceeds the file size)")
        return n

    # -- graph -------------------------------------------------------------------------------
    def graph(self, path: Path) -> Graph:
        m = self.model
        nsub = self._count(m.SubgraphsLength(), "subgraph")
        if nsub == 0:
            raise self.fail("TFLite model has no subgraph")
        self.nbuf = self._count(m.BuffersLength(), "buffer")
        main = self.subgraph(0, path)
        # other subgraphs (CALL_ONCE initialisers, WHILE / IF bodies), each with its own tensors
        main.subgraphs = {str(k): self.subgraph(k, path) for k in range(1, nsub)}
        bad = link_subgraphs({0: main, **{int(k): g for k, g in main.subgraphs.items()}})
        if bad:
            raise self.fail(bad)
        main.metadata["subgraph_count"] = nsub
        return main

    def subgraph(self, index: int, path: Path) -> Graph:
        m = self.model
        sg = m.Subgraphs(index)
        if sg is None:
            raise self.fail(f"malformed TFLite flatbuffer (subgraph {index} is missing)")
        ntens = self._count(sg.TensorsLength(), "tensor")
        tensors: dict[str, TensorInfo] = {}
        self.names: list[str] = []
        self.int4: list[str] = []
        self.blockwise: dict[str, tuple[int, int]] = {}  # tensor -> (scales tensor index, block size)
        self.variables: list[str] = []
        self.state_updates: dict[str, str] = {}  # variable tensor -> the node output with its new value
        for i in range(ntens):
            info = self.tensor(sg.Tensors(i), i, tensors)
            tensors[info.name] = info
            self.names.append(info.name)
        self.tensors = tensors
        inputs = [self.tensor_name(int(i), "subgraph input") for i in _vec(sg.InputsAsNumpy())]
        outputs = [self.tensor_name(int(i), "subgraph output") for i in _vec(sg.OutputsAsNumpy())]
        nodes = [self.operator(sg.Operators(k), k) for k in range(self._count(sg.OperatorsLength(), "operator"))]
        meta: dict[str, Any] = {"schema_version": int(m.Version()),
                                "description": _str(m.Description()) or ""}
        if self.int4:
            meta["int4_tensors"] = list(self.int4)
        if self.variables:
            # variable tensor -> the node output holding its value after the run (runtime.py)
            meta["variable_tensors"] = {v: self.state_updates.get(v) for v in self.variables}
        sigs = self.signatures() if index == 0 else {}
        if sigs:
            meta["signatures"] = sigs
        name = _str(sg.Name()) or (path.stem if index == 0 else f"subgraph{index}")
        return Graph(name=name, format="tflite", tensors=tensors, nodes=nodes, inputs=inputs,
                     outputs=outputs, path=str(path), metadata=meta)

    def signatures(self) -> dict[str, dict[str, dict[str, str]]]:
        """``{signature key: {"inputs": {key: tensor name}, "outputs": {...}}}`` for subgraph 0."""
        out: dict[str, dict[str, dict[str, str]]] = {}
        for j in range(self._count(self.model.SignatureDefsLength(), "signature")):
            sd = self.model.SignatureDefs(j)
            if sd is None or int(sd.SubgraphIndex()) != 0:
                continue
            entry: dict[str, dict[str, str]] = {"inputs": {}, "outputs": {}}
            for kind, n, get in (("inputs", sd.InputsLength(), sd.Inputs),
                                 ("outputs", sd.OutputsLength(), sd.Outputs)):
                for k in range(self._count(n, "signature tensor")):
                    tm = get(k)
                    entry[kind][_str(tm.Name())] = self.tensor_name(int(tm.TensorIndex()), "signature")
            out[_str(sd.SignatureKey()) or str(j)] = entry
        return out

    def _lstm_intermediates(self, op: Any, node_name: str) -> dict[str, Any]:
        """The integer LSTM's intermediate tensors (the converter records five: four gate outputs,
        quantized only with layer norm, and the hidden state ``effective_hidden_scale``): their
        (scale, zero point) as attributes, None where unquantized."""
        n = int(op.IntermediatesLength())
        if n == 0:
            return {}
        quants = []
        for j in range(min(n, 5)):
            q = self.tensors[self.tensor_name(int(op.Intermediates(j)), f"LSTM node '{node_name}' intermediate")].quant
            quants.append(None if q is None or q.scale.size != 1 else
                          (float(q.scale.ravel()[0]), int(q.zero_point.ravel()[0])))
        return {"intermediate_quant": quants}

    def tensor_name(self, i: int, what: str) -> str:
        if i < 0 or i >= len(self.names):
            raise self.fail(f"{what} refers to tensor index {i}, but the model has {len(self.names)} tensors")
        return self.names[i]

    # -- tensors -----------------------------------------------------------------------------
    def tensor(self, t: Any, i: int, taken: dict[str, TensorInfo]) -> TensorInfo:
        if t is None:
            raise self.fail(f"malformed TFLite flatbuffer (tensor {i} is missing)")
        src = _str(t.Name())
        name = src if src and src not in taken else f"{src or 'tensor'}:{i}"
        ttype = int(t.Type())
        tname = _TYPE_NAMES.get(ttype)
        if tname is None:
            raise self.fail(f"tensor '{name}' (index {i}) has unknown type code {ttype}")
        dtype = _DTYPES.get(tname, tname.lower())
        shape = tuple(int(d) for d in _vec(t.ShapeAsNumpy()))
        for d in shape:
            if d < 0 or d >= MAX_DIM:
                raise self.fail(f"tensor '{name}' has an invalid shape {list(shape)}")
        itemsize = _ITEMSIZE.get(dtype) or _itemsize(dtype)
        if itemsize is None:
            raise self.fail(f"tensor '{name}' (index {i}) has unsupported type {tname}")
        if element_count([max(d, 1) for d in shape], name, self.where) * itemsize > ABSURD_BYTES:
            raise self.fail(f"tensor '{name}' (index {i}) has an absurd shape {list(shape)}")
        check_shape(shape, itemsize, f"tensor '{name}' (index {i})", self.where)
        sig = _vec(t.ShapeSignatureAsNumpy())
        dims: tuple[int | None, ...] = shape
        if len(sig) == len(shape) and len(sig):
            dims = tuple(None if int(s) < 0 else d for s, d in zip(sig, shape))
        quant = self.quant(t.Quantization(), name, shape)
        sparsity = t.Sparsity()
        const = self.const(int(t.Buffer()), name, tname, dtype, shape, sparsity)
        if dtype == "int4":
            dtype = "int8"
            self.int4.append(name)
        if t.IsVariable() and const is None:  # LSTM / SVDF state: zeros, then carried between runs
            self.variables.append(name)
        layout = "NHWC" if len(shape) == 4 and const is None else None
        return TensorInfo(name=name, shape=dims, dtype=dtype, quant=quant,
                          const=const, layout=layout, source_name=src, index=i)

    def quant(self, q: Any, name: str, shape: tuple[int, ...]) -> QuantParams | None:
        if q is None:
            return None
        bw = tflite_blockwise.details(q, name, self.fail)
        if bw is not None:  # scales in another tensor: attached to the consuming node (operator())
            self.blockwise[name] = bw
            return None
        scale = _vec(q.ScaleAsNumpy())
        if scale.size == 0:
            return None
        zp = _vec(q.ZeroPointAsNumpy())
        if zp.size == 0:
            zp = np.zeros(scale.size, np.int64)
        if zp.size not in (1, scale.size):
            raise self.fail(f"tensor '{name}' has {scale.size} scales but {zp.size} zero points")
        axis = None
        if scale.size > 1:
            axis = int(q.QuantizedDimension())
            if len(shape) == 1 and shape[0] == scale.size:
                # a 1-D tensor (a bias) can only be quantized along its one axis; older converters copied
                # the filter's quantized_dimension (3 for depthwise) into it.  TFLite Micro runs such
                # models (tflite-micro's person_detect); LiteRT 2.3 refuses them when it loads them
                axis = 0
            if not 0 <= axis < len(shape) or shape[axis] != scale.size:
                raise self.fail(f"tensor '{name}': {scale.size} per-channel scales do not match quantized "
                                f"dimension {axis} of shape {list(shape)}")
        return QuantParams(scale.astype(np.float32), zp.astype(np.int64), axis)

    def const(self, b: int, name: str, tname: str, dtype: str, shape: tuple[int, ...],
              sparsity: Any = None) -> np.ndarray | None:
        if b < 0 or b >= max(self.nbuf, 1):
            raise self.fail(f"tensor '{name}' refers to buffer {b}, but the model has {self.nbuf} buffers")
        if b == 0 or self.nbuf == 0:
            return None
        buf = self.model.Buffers(b)
        if buf is None:
            raise self.fail(f"malformed TFLite flatbuffer (buffer {b} is missing)")
        off, size = int(buf.Offset()), int(buf.Size())
        if off > 1:
            if off + size > len(self.data):
                raise self.fail(f"tensor '{name}': buffer {b} lies outside the file (offset {off}, size {size}, "
                                f"file {len(self.data)} bytes)")
            raw = np.frombuffer(self.data, np.uint8, count=size, offset=off)
        else:
            raw = _vec(buf.DataAsNumpy())
            if raw.size == 0:
                return None
        n = 1
        for d in shape:
            n *= d
        if dtype == "int4":
            need = (n + 1) // 2
            if raw.size != need:
                raise self.fail(f"tensor '{name}': int4 buffer holds {raw.size} bytes, shape {list(shape)} "
                                f"needs {need}")
            lo = (raw.astype(np.int8) << 4) >> 4
            hi = raw.astype(np.int8) >> 4
            return np.stack([lo, hi], axis=-1).ravel()[:n].reshape(shape).astype(np.int8)
        if dtype in ("string", "resource", "variant", "bfloat16"):
            raise self.fail(f"tensor '{name}': constant of type {tname} is not supported")
        dt = np.dtype(dtype).newbyteorder("<")
        if sparsity is not None and dtype != "int4":  # stored values only: densified (DENSIFY's input)
            if raw.size % dt.itemsize or raw.size > n * dt.itemsize:
                raise self.fail(f"tensor '{name}': sparse buffer {b} of {raw.size} bytes does not hold whole "
                                f"{dtype} values of shape {list(shape)}")
            params = tflite_sparse.parse(sparsity, len(shape), f"tensor '{name}'", self.where)
            values = raw.view(dt).astype(np.dtype(dtype))
            return tflite_sparse.densify(values, shape, params, f"tensor '{name}'", self.where)
        if raw.size != n * dt.itemsize:
            raise self.fail(f"tensor '{name}': buffer {b} holds {raw.size} bytes, shape {list(shape)} of {dtype} "
                            f"needs {n * dt.itemsize}")
        return raw.view(dt).reshape(shape).astype(np.dtype(dtype))

    # -- operators ---------------------------------------------------------------------------
    def operator(self, op: Any, k: int) -> Node:
        if op is None:
            raise self.fail(f"malformed TFLite flatbuffer (operator {k} is missing)")
        nops = self.model.OperatorCodesLength()
        idx = int(op.OpcodeIndex())
        if idx < 0 or idx >= nops:
            raise self.fail(f"operator {k} refers to opcode {idx}, but the model has {nops} operator codes")
        code = self.model.OperatorCodes(idx)
        bcode = int(code.BuiltinCode())
        ins = [("" if int(i) == -1 else self.tensor_name(int(i), f"operator {k} input")) for i in
               _vec(op.InputsAsNumpy())]
        outs = [("" if int(i) == -1 else self.tensor_name(int(i), f"operator {k} output")) for i in
                _vec(op.OutputsAsNumpy())]
        node_name = next((o for o in outs if o), f"op{k}")
        opts: dict[str, Any] = {}
        source = None
        if bcode == tflite.BuiltinOperator.CUSTOM:
            custom = _str(code.CustomCode()) or "?"
            if custom == "TFLite_Detection_PostProcess":
                raw = _vec(op.CustomOptionsAsNumpy()).astype(np.uint8).tobytes()
                try:
                    attrs = detection_options(raw)
                except ValueError as e:
                    raise self.fail(f"TFLite_Detection_PostProcess node '{node_name}': {e}") from None
                return Node(node_name, "DetectionPostProcess", ins, outs, attrs, source_op=f"CUSTOM:{custom}",
                            index=k)
            if custom in SIGNAL_OPS:  # TFLite Micro's audio front end (tflite_signal.py)
                try:
                    attrs = signal_options(_vec(op.CustomOptionsAsNumpy()).astype(np.uint8).tobytes())
                    if custom == "SignalFilterBankSpectralSubtraction":
                        ins = spectral_state(node_name, ins, outs, self.tensors, self.variables, self.state_updates)
                except ValueError as e:
                    raise self.fail(f"{custom} node '{node_name}': {e}") from None
                return Node(node_name, custom, ins, outs, attrs, source_op=f"CUSTOM:{custom}", index=k)
            if custom != "Convolution2DTransposeBias":
                return Node(node_name, f"Custom:{custom}", ins, outs, {}, source_op=f"CUSTOM:{custom}", index=k)
            # MediaPipe's transpose conv with bias (segmentation models; XNNPACK runs it, LiteRT's
            # built-in resolvers do not): inputs (input, OHWI weights, bias), custom options the raw C
            # struct TfLiteTransposeConvParams {padding (1 SAME, 2 VALID), stride_width, stride_height}
            raw = _vec(op.CustomOptionsAsNumpy()).astype(np.uint8).tobytes()
            vals = struct.unpack("<" + "i" * (len(raw) // 4), raw[:len(raw) // 4 * 4])
            if len(vals) < 3 or vals[0] not in (1, 2) or len(ins) != 3 or not outs:
                raise self.fail(f"Convolution2DTransposeBias node '{node_name}': unreadable custom options "
                                f"or inputs")
            out_t = self.tensors.get(outs[0])
            if out_t is None or out_t.shape is None or None in out_t.shape:
                raise self.fail(f"Convolution2DTransposeBias node '{node_name}': output shape unknown")
            # a fourth field (activation) is ignored, as LiteRT's XNNPACK delegate ignores it (measured)
            opts = {"padding": 0 if vals[0] == 1 else 1, "stride_w": vals[1], "stride_h": vals[2]}
            bname, source = "TRANSPOSE_CONV", "CUSTOM:Convolution2DTransposeBias"
        else:
            bname = BUILTIN_OPCODE2NAME.get(bcode)
            if bname is None:
                bname = f"BUILTIN_{bcode}"
        otype = int(op.BuiltinOptionsType())
        if otype and source is None:
            oname = _OPTION_NAMES.get(otype)
            tab = op.BuiltinOptions()
            if oname is not None and tab is not None and hasattr(tflite, oname):
                opts = decode_options(getattr(tflite, oname), tab)
        derived: list[TensorInfo] = []

        def new_const(role: str, value: np.ndarray) -> str:
            name = f"{node_name}#{role}"
            arr = np.asarray(value)
            derived.append(TensorInfo(name, tuple(arr.shape), arr.dtype.name, const=arr))
            return name

        def shape_of(name: str):
            t = self.tensors.get(name)
            return None if t is None else t.shape

        def const_of(name: str):
            t = self.tensors.get(name)
            return None if t is None else t.const

        if source is not None:  # TRANSPOSE_CONV's input order, the output size as a constant
            ins = [new_const("output_shape", np.asarray(self.tensors[outs[0]].shape, np.int32)), ins[1], ins[0],
                   ins[2]]
            self.tensors.update({t.name: t for t in derived})
        ctx = OpContext(bname, node_name, opts, ins, outs, shape_of, const_of, new_const, self.where)
        canon, new_ins, attrs = convert(ctx)
        new_ins, attrs = tflite_blockwise.attach(bname, node_name, canon, list(new_ins), dict(attrs),
                                                 self.blockwise, self.tensor_name, self.where)
        for t in derived:
            self.tensors[t.name] = t
        attrs = dict(attrs)
        attrs.setdefault("op_version", int(code.Version()))
        if canon == "UnidirectionalSequenceLSTM":
            attrs.update(self._lstm_intermediates(op, node_name))
        for name, like in attrs.pop("_state_outputs", ()):  # LSTM / SVDF final states (variable tensors)
            self.state_updates[like] = name
            t = self.tensors[like]
            self.tensors[name] = TensorInfo(name, t.shape, t.dtype, quant=t.quant, source_name=name)
            outs = list(outs) + [name]
        return Node(node_name, canon, new_ins, outs, attrs, source_op=source or bname, index=k)


def _itemsize(dtype: str) -> int | None:
    try:
        return np.dtype(dtype).itemsize
    except TypeError:
        return None


def _vec(v: Any) -> np.ndarray:
    """flatbuffers returns 0 for an absent vector."""
    return v if isinstance(v, np.ndarray) else np.zeros(0, np.int32)


def _str(b: Any) -> str:
    if b is None:
        return ""
    return b.decode("utf-8", errors="replace") if isinstance(b, (bytes, bytearray)) else str(b)
