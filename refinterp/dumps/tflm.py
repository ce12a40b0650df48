"""TFLite Micro layer-by-layer data (``layer_by_layer_debugger.py --layer_by_layer_data_file``).

A flatbuffer without file identifier, schema ``layer_by_layer_schema.fbs``::

    ModelTestData { input_data:[TensorData] (0); subgraph_data:[SubgraphData] (1) }
    SubgraphData  { outputs:[TensorData] (0); subgraph_index:uint (1) }
    TensorData    { input_index:uint (0); tensor_index:uint (1); shape:[int] (2); dtype:byte (3);
                    data:[ubyte] (4); num_bytes:uint (5); layer_number:uint (6) }

Tensors carry no names, only TFLite tensor indices: they are named ``#<tensor_index>`` (subgraph 0)
or ``#<subgraph>:<tensor_index>``, and ``Dump.meta["names"] == "tflite-tensor-index"`` tells the
aligner to map them through the model's tensor indices.  Read and written with the generic
``flatbuffers`` runtime (no generated code).
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

import flatbuffers
import numpy as np
from flatbuffers import number_types as NT
from flatbuffers.table import Table

from ..errors import DumpError
from .model import Dump, DumpTensor

# TensorTypes enum -> numpy dtype (INT4/INT2/STRING/RESOURCE/VARIANT unsupported)
_DTYPES = {0: "float32", 1: "float16", 2: "int32", 3: "uint8", 4: "int64", 6: "bool", 7: "int16",
           8: "complex64", 9: "int8", 10: "float64", 11: "complex128", 12: "uint64", 15: "uint32",
           16: "uint16"}
_CODES = {v: k for k, v in _DTYPES.items()}
INDEX_NAMES = "tflite-tensor-index"


def _field(tab: Table, slot: int) -> int:
    return tab.Offset(4 + 2 * slot)


def _vector_tables(tab: Table, slot: int) -> list[Table]:
    o = _field(tab, slot)
    if not o:
        return []
    start, n = tab.Vector(o), tab.VectorLen(o)
    return [Table(tab.Bytes, tab.Indirect(start + 4 * i)) for i in range(n)]


def _scalar(tab: Table, slot: int, flags, default: int = 0) -> int:
    o = _field(tab, slot)
    return tab.Get(flags, o + tab.Pos) if o else default


def _vector_np(tab: Table, slot: int, flags) -> np.ndarray:
    o = _field(tab, slot)
    if not o:
        return np.zeros(0, flags.N_Dtype if hasattr(flags, "N_Dtype") else np.uint8)
    return tab.GetVectorAsNumpy(flags, o)


def _tensor(tab: Table, where: str) -> tuple[int, int, np.ndarray, int]:
    idx = _scalar(tab, 1, NT.Uint32Flags)
    code = _scalar(tab, 3, NT.Int8Flags)
    dt = _DTYPES.get(code)
    if dt is None:
        raise DumpError(f"tensor {idx}: unsupported TensorTypes value {code}", where)
    shape = [int(s) for s in _vector_np(tab, 2, NT.Int32Flags)]
    data = _vector_np(tab, 4, NT.Uint8Flags).tobytes()
    arr = np.frombuffer(data, np.dtype(dt).newbyteorder("<")).astype(dt)
    n = int(np.prod(shape)) if shape else 1
    if arr.size != n:
        raise DumpError(f"tensor {idx}: {arr.size} values for shape {shape}", where)
    return idx, _scalar(tab, 6, NT.Uint32Flags), arr.reshape(shape), code


def read_tflm(path: str | Path) -> Dump:
    p = Path(path)
    try:
        buf = bytearray(p.read_bytes())
    except OSError as e:
        raise DumpError(f"cannot read ({e.strerror})", str(p)) from None
    if len(buf) < 8:
        raise DumpError("too short for a ModelTestData flatbuffer", str(p))
    try:
        root = Table(buf, flatbuffers.encode.Get(flatbuffers.packer.uoffset, buf, 0))
        d = Dump(str(p), "tflm", meta={"names": INDEX_NAMES})
        for t in _vector_tables(root, 0):
            idx, _, a, _ = _tensor(t, str(p))
            d.add(DumpTensor(f"#{idx}", [a], index=-1))
        for sg in _vector_tables(root, 1):
            si = _scalar(sg, 1, NT.Uint32Flags)
            for t in _vector_tables(sg, 0):
                idx, layer, a, _ = _tensor(t, str(p))
                name = f"#{idx}" if si == 0 else f"#{si}:{idx}"
                d.add(DumpTensor(name, [a], index=int(layer)))
    except DumpError:
        raise
    except Exception as e:  # out-of-range offsets in a file that is not this flatbuffer
        raise DumpError(f"not a TFLite Micro layer-by-layer file ({type(e).__name__})", str(p)) from None
    if not d.tensors:
        raise DumpError("no tensors in the layer-by-layer file", str(p))
    return d


def _build_tensor(b: flatbuffers.Builder, tensor_index: int, a: np.ndarray, input_index: int,
                  layer: int) -> int:
    a = np.ascontiguousarray(a)
    code = _CODES.get(str(a.dtype))
    if code is None:
        raise DumpError(f"dtype {a.dtype} has no TensorTypes code")
    data = b.CreateNumpyVector(np.frombuffer(a.astype(a.dtype.newbyteorder("<")).tobytes(), np.uint8))
    shape = b.CreateNumpyVector(np.asarray(a.shape, np.int32))
    b.StartObject(7)
    b.PrependUint32Slot(0, input_index & 0xFFFFFFFF, 0)
    b.PrependUint32Slot(1, tensor_index, 0)
    b.PrependUOffsetTRelativeSlot(2, shape, 0)
    b.PrependInt8Slot(3, code, 0)
    b.PrependUOffsetTRelativeSlot(4, data, 0)
    b.PrependUint32Slot(5, a.nbytes, 0)
    b.PrependUint32Slot(6, layer & 0xFFFFFFFF, 0)
    return b.EndObject()


def _vec(b: flatbuffers.Builder, offs: list[int]) -> int:
    b.StartVector(4, len(offs), 4)
    for o in reversed(offs):
        b.PrependUOffsetTRelative(o)
    return b.EndVector()


def write_tflm(path: str | Path, inputs: Mapping[int, np.ndarray],
               outputs: list[tuple[int, int, np.ndarray]]) -> None:
    """Write a ModelTestData file: ``inputs`` {tensor index: array}; ``outputs`` [(layer number,
    tensor index, array)] of subgraph 0, as the TFLM C++ layer-by-layer tool writes them."""
    b = flatbuffers.Builder(1024)
    ins = [_build_tensor(b, ti, a, k, -1) for k, (ti, a) in enumerate(inputs.items())]
    outs = [_build_tensor(b, ti, a, -1, layer) for layer, ti, a in outputs]
    ov = _vec(b, outs)
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, ov, 0)
    b.PrependUint32Slot(1, 0, 0)
    sg = b.EndObject()
    iv, sv = _vec(b, ins), _vec(b, [sg])
    b.StartObject(2)
    b.PrependUOffsetTRelativeSlot(0, iv, 0)
    b.PrependUOffsetTRelativeSlot(1, sv, 0)
    b.Finish(b.EndObject())
    Path(path).write_bytes(bytes(b.Output()))
