"""Helpers of the torch quantized-engine conformance tests: single-node refinterp IR graphs with
quantized tensors (what the ONNX loader / fuse_qdq pass produce for QLinear* ops and QDQ units),
torch quantized tensors from stored codes, and the engine -> scheme map."""
from __future__ import annotations

import warnings

import numpy as np

import refinterp
from refinterp.ir import Graph, Node, QuantParams, TensorInfo

warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*deprecated")
warnings.filterwarnings("ignore", message=".*quantized tensor creation.*")

SCHEME = {"fbgemm": "fbgemm", "qnnpack": "qnnpack", "x86": "pytorch-x86", "onednn": "onednn"}
F32 = np.float32


def engines(torch) -> list[str]:
    return [e for e in ("fbgemm", "qnnpack", "x86", "onednn") if e in torch.backends.quantized.supported_engines]


def qp(scale, zp, axis=None) -> QuantParams:
    return QuantParams(np.asarray(scale, F32).reshape(-1), np.asarray(zp, np.int64).reshape(-1), axis)


def tinfo(name, arr_or_shape, dtype, quant=None, const=None) -> TensorInfo:
    shape = tuple(np.shape(const)) if const is not None else tuple(arr_or_shape)
    return TensorInfo(name, shape, dtype, quant, const)


def one_node(op: str, ins: list[TensorInfo], out: TensorInfo, **attrs) -> Graph:
    tensors = {t.name: t for t in ins + [out]}
    node = Node(op, op, [t.name for t in ins], [out.name], dict(attrs), source_op=f"QDQ:{op}")
    return Graph("t", "onnx", tensors, [node], [t.name for t in ins if t.const is None], [out.name])


def run(graph: Graph, scheme: str, feeds: dict) -> np.ndarray:
    out = refinterp.Session(graph, scheme=scheme).run(feeds)
    return next(iter(out.values()))


def qtensor(torch, q: np.ndarray, scale, zp):
    return torch._make_per_tensor_quantized_tensor(torch.from_numpy(np.ascontiguousarray(q)), float(scale), int(zp))


def qweight(torch, w: np.ndarray, scales: np.ndarray):
    w = torch.from_numpy(np.ascontiguousarray(w))
    if scales.size == 1:
        return torch._make_per_tensor_quantized_tensor(w, float(scales[0]), 0)
    return torch._make_per_channel_quantized_tensor(w, torch.from_numpy(scales.astype(np.float64)),
                                                    torch.zeros(scales.size, dtype=torch.long), 0)


def tie_scales(rng, pow2: bool):
    """(xs, ys): random, or powers of two so products land on exact .5 ties."""
    if pow2:
        return F32(2.0 ** -int(rng.integers(3, 7))), F32(2.0 ** -int(rng.integers(2, 6)))
    return F32(rng.uniform(0.005, 0.05)), F32(rng.uniform(0.01, 0.3))
