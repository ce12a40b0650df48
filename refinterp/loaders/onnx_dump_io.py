"""The two places where dump handling needs the ``onnx`` package (only loaders import it):

* ``read_tensorproto(path)``: one serialized ``onnx.TensorProto`` (ONNX Runtime's node I/O dumps,
  ``*.tensorproto``) -> (name, array).  External data is refused (no side files are opened).
* ``model_with_all_outputs(path)``: the model's bytes with every intermediate tensor made a graph
  output, so ONNX Runtime returns all of them (used by ``refinterp capture --runtime onnxruntime``).
"""
from __future__ import annotations

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


def model_with_all_outputs(path: str | Path) -> tuple[bytes, list[str]]:
    """Model bytes whose graph outputs are every node output (in execution order), and that list."""
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
        for o in n.output:
            if o and o not in names:
                names.append(o)
                if o not in have:
                    g.output.append(onnx.ValueInfoProto(name=o))
                    have.add(o)
    return m.SerializeToString(), names
