"""refinterp as an ``onnx.backend`` backend (for onnx's backend test harness and node cases).

    from refinterp.onnx_backend import Backend
    rep = Backend.prepare(model_proto, scheme="float32")
    outputs = rep.run([x])  # list in graph output order
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
from onnx import ModelProto, NodeProto, helper
from onnx.backend.base import Backend as _OnnxBackend
from onnx.backend.base import BackendRep as _OnnxBackendRep

from .loaders.onnx import load_onnx_model
from .runtime import Session


class BackendRep(_OnnxBackendRep):
    def __init__(self, session: Session) -> None:
        self.session = session

    def run(self, inputs: Any, **kwargs: Any) -> list[np.ndarray]:
        names = self.session.graph.inputs
        if isinstance(inputs, Mapping):
            feeds = dict(inputs)
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            seq: Sequence[Any] = list(inputs)
            feeds = dict(zip(names, seq))
        out = self.session.run(feeds, capture=kwargs.get("capture"))
        return [_declared(out[name], self.session.graph.tensors[name].dtype) for name in self.session.graph.outputs]


def _declared(a: np.ndarray, dtype: str) -> np.ndarray:
    """Sub-byte outputs are held in int8/uint8; onnx's harness expects the ml_dtypes type."""
    if dtype in ("int4", "uint4", "int2", "uint2"):
        import ml_dtypes

        return np.asarray(a).astype(getattr(ml_dtypes, dtype))
    return a


class Backend(_OnnxBackend):
    @classmethod
    def is_compatible(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> bool:
        return cls.supports_device(device)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper() == "CPU"

    @classmethod
    def prepare(cls, model: ModelProto, device: str = "CPU", **kwargs: Any) -> BackendRep:
        if not cls.supports_device(device):
            raise ValueError(f"refinterp runs on CPU only, not {device}")
        graph = load_onnx_model(model, base_dir=kwargs.get("base_dir"))
        return BackendRep(Session(graph, scheme=kwargs.get("scheme", "float32")))

    @classmethod
    def run_model(cls, model: ModelProto, inputs: Any, device: str = "CPU", **kwargs: Any) -> list[np.ndarray]:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: NodeProto, inputs: Any, device: str = "CPU",
                 outputs_info: Sequence[tuple[Any, tuple]] | None = None, **kwargs: Any) -> list[np.ndarray]:
        """Run one node: inputs are arrays in the node's input order (outputs_info gives dtypes/shapes)."""
        arrays = [np.asarray(x) for x in (inputs.values() if isinstance(inputs, Mapping) else inputs)]
        names = [i for i in node.input if i]
        graph_inputs = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
                        for n, a in zip(names, arrays)]
        outs = [o for o in node.output if o]
        graph_outputs = []
        for k, o in enumerate(outs):
            if outputs_info and k < len(outputs_info):
                dt, shape = outputs_info[k]
                graph_outputs.append(helper.make_tensor_value_info(
                    o, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape))
            else:
                graph_outputs.append(helper.make_empty_tensor_value_info(o))
        g = helper.make_graph([node], f"run_node_{node.op_type}", graph_inputs, graph_outputs)
        opset = kwargs.get("opset_version")
        model = helper.make_model(g, opset_imports=[helper.make_opsetid(node.domain, opset)] if opset else None)
        return cls.run_model(model, arrays, device, **kwargs)


prepare = Backend.prepare
run_model = Backend.run_model
run_node = Backend.run_node
supports_device = Backend.supports_device
