"""QDQ fusion for PyTorch's quantized engines: the ONNX Runtime units of ``fuse_qdq`` plus the
single-input ops torch runs as one quantized kernel (``quantized::hardswish``, ``quantized::elu``)
but ORT leaves unfused: DQ(x) -> HardSwish | Elu -> Q becomes one quantized node, so the fbgemm /
qnnpack kernels (table or fused dequantize-compute-quantize) apply instead of the float chain.
Int8 units stay int8 (no uint8 re-encoding: torch has no such rewrite)."""
from __future__ import annotations

from ..ir import Graph
from .qdq import _Fuser

_TORCH_UNARY = ("HardSwish", "Elu")


class _TorchFuser(_Fuser):
    def fuse_node(self, n) -> None:
        if n.op not in _TORCH_UNARY or len(n.inputs) != 1 or not n.outputs:
            super().fuse_node(n)
            return
        hit = self.q_after(n.outputs[0])
        part = self.dq(n.inputs[0])
        if hit is None or part is None:
            return
        q, qqp = hit
        if self.effective_type(part[1]) != self.effective_type(q.outputs[0]):
            return
        self._replace(n, [part[1]], [part[2]], q, qqp, [part[0]], {})


def fuse_qdq_torch(graph: Graph) -> Graph:
    """Return a new Graph with the torch quantized-op units fused (the input is not modified)."""
    f = _TorchFuser(graph, False)
    f.drop_activations()
    for n in list(f.nodes):
        f.fuse_node(n)
    return graph.replace(nodes=f.result(), tensors=f.tensors)
