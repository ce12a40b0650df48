"""Float MatMul, Gemm, FullyConnected and BatchMatMul.

Products accumulate in float32 (float64 for float64 inputs); float16 inputs are rounded once at
the end.  Integer inputs without quantization compute in float32 under this variant.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import ModelError
from ..spatial import compute_dtype
from ..registry import kernel


def _out(x: np.ndarray) -> np.dtype:
    return x.dtype if x.dtype.kind == "f" else np.dtype(np.float32)


@kernel("MatMul", "float")
def matmul(plan, a, b):
    """numpy.matmul semantics (1-D operands promoted and squeezed, batch dims broadcast)."""
    cdt = compute_dtype(a)
    return np.matmul(a.astype(cdt, copy=False), b.astype(cdt, copy=False)).astype(_out(a), copy=False)


@dataclass(frozen=True)
class GemmPlan:
    alpha: float
    beta: float
    transA: int
    transB: int
    name: str


@dataclass(frozen=True)
class FullyConnectedPlan:
    keep_num_dims: bool
    name: str
    w: np.ndarray | None = None  # a blockwise-quantized filter, dequantized once (float32)


@dataclass(frozen=True)
class BatchMatMulPlan:
    adj_x: bool
    adj_y: bool


def _prepare_gemm(node, ctx) -> GemmPlan:
    a = node.attrs
    return GemmPlan(float(a.get("alpha", 1.0)), float(a.get("beta", 1.0)), int(a.get("transA", 0)),
                    int(a.get("transB", 0)), node.name)


@kernel("Gemm", "float", prepare=_prepare_gemm)
def gemm(plan, a, b, c=None):
    """alpha * A' @ B' + beta * C, C unidirectionally broadcast to (M, N)."""
    cdt, odt = compute_dtype(a), _out(a)
    a = a.astype(cdt, copy=False)
    b = b.astype(cdt, copy=False)
    if plan.transA:
        a = a.T
    if plan.transB:
        b = b.T
    y = a @ b
    if plan.alpha != 1.0:
        y = y * cdt.type(plan.alpha)
    if c is not None:
        cc = c.astype(cdt, copy=False)
        y = y + (cc if plan.beta == 1.0 else cc * cdt.type(plan.beta))
    return y.astype(odt, copy=False)


def _prepare_fc(node, ctx) -> FullyConnectedPlan:
    w = None
    if node.attrs.get("blockwise"):
        from ..tflite.hybrid.blockwise import dequantize

        w = dequantize(node, ctx)
    return FullyConnectedPlan(bool(node.attrs.get("keep_num_dims", False)), node.name, w)


@kernel("FullyConnected", "float", prepare=_prepare_fc)
def fully_connected(plan, x, w, b=None, scales=None):
    """TFLite FULLY_CONNECTED: x viewed as [-1, I] (I = w.shape[1]); y = x @ w.T + bias.

    keep_num_dims keeps x's leading dims (output x.shape[:-1] + (O,)), else the output is [-1, O].
    """
    if plan.w is not None:
        w = plan.w
    cdt = compute_dtype(x)
    n_in = w.shape[1]
    if x.size % n_in:
        raise ModelError(f"node '{plan.name}': input of {x.size} elements not divisible by "
                         f"weight input size {n_in}")
    x2 = x.astype(cdt, copy=False).reshape(-1, n_in)
    y = x2 @ w.astype(cdt, copy=False).T
    if b is not None:
        y = y + b.astype(cdt, copy=False).reshape(-1)
    if plan.keep_num_dims:
        y = y.reshape(x.shape[:-1] + (w.shape[0],))
    return y.astype(_out(x), copy=False)


def _prepare_bmm(node, ctx) -> BatchMatMulPlan:
    a = node.attrs
    return BatchMatMulPlan(bool(a.get("adj_x", False)), bool(a.get("adj_y", False)))


@kernel("BatchMatMul", "float", prepare=_prepare_bmm)
def batch_matmul(plan, a, b):
    """TFLite BATCH_MATMUL: adj_* transpose the last two dims; batch dims broadcast."""
    cdt, odt = compute_dtype(a), _out(a)
    a = a.astype(cdt, copy=False)
    b = b.astype(cdt, copy=False)
    if plan.adj_x:
        a = np.swapaxes(a, -1, -2)
    if plan.adj_y:
        b = np.swapaxes(b, -1, -2)
    return np.matmul(a, b).astype(odt, copy=False)


@kernel("Det", "float")
def _det(plan, x):
    """Determinant of the trailing square matrices (LU with partial pivoting in float64, rounded once)."""
    return np.asarray(np.linalg.det(x.astype(np.float64))).astype(x.dtype)
