"""com.microsoft ``MatMulNBits`` (weight-only 4-bit / 8-bit quantization, as ORT's MatMul4Bits /
MatMulNBits quantizers write it for LLM and transformer weights).

Inputs: A [..., K] float32; B uint8 [N, n_blocks, blob] (``bits``-bit codes packed low nibble
first, one block of ``block_size`` codes of K per blob); scales float32 [N * n_blocks];
zero_points (optional) uint8 packed like B ([N, ceil(n_blocks * bits / 8)]) or float32
[N * n_blocks]; g_idx / bias optional.  Default zero point: 2^(bits-1).  Then::

    W[n, k] = f32((code[n, k] - zp[n, block(k)]) * scale[n, block(k)])
    Y       = A @ W^T (+ bias)        float32, K padded blocks ignored

``accuracy_level`` 4 makes ORT quantize A to int8 per block (MLAS CompInt8): that form is not
modelled here and is refused by name; levels 0 - 3 compute in float32 (MLAS's summation order is not
reproduced: results agree within float32 rounding, checked within 1e-5 relative).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from .common import MS
from ..registry import kernel

F32 = np.float32


@dataclass(frozen=True)
class MatMulNBitsPlan:
    where: str
    k: int
    n: int
    bits: int
    block: int


def _prepare(node, ctx) -> MatMulNBitsPlan:
    w = f"node '{node.name}' (MatMulNBits)"
    a = node.attrs
    k, n, bits, block = (int(a.get(x, 0) or 0) for x in ("K", "N", "bits", "block_size"))
    if bits not in (4, 8) or k <= 0 or n <= 0 or block < 16 or block & (block - 1):
        raise UnsupportedOpError(f"{w}: K={k}, N={n}, bits={bits}, block_size={block} are not supported")
    if int(a.get("accuracy_level", 0) or 0) == 4:
        raise UnsupportedOpError(f"{w}: accuracy_level 4 (int8 quantization of A, MLAS CompInt8) is not modelled")
    if len(node.inputs) > 4 and node.inputs[4]:
        raise UnsupportedOpError(f"{w}: g_idx (act-order) is not supported")
    return MatMulNBitsPlan(w, k, n, bits, block)


def _unpack(packed: np.ndarray, bits: int, count: int) -> np.ndarray:
    """[rows, bytes] uint8 -> [rows, count] codes (low nibble first for 4 bits)."""
    p = np.asarray(packed, np.uint8).reshape(packed.shape[0], -1)
    if bits == 8:
        return p[:, :count].astype(np.int64)
    lo, hi = p & 0x0F, p >> 4
    return np.stack([lo, hi], axis=-1).reshape(p.shape[0], -1)[:, :count].astype(np.int64)


@kernel(MS + "MatMulNBits", "float", prepare=_prepare, raw_inputs=True)
def matmul_nbits(plan: MatMulNBitsPlan, a, b, scales, zero_points=None, g_idx=None, bias=None):
    nb = -(-plan.k // plan.block)
    codes = _unpack(np.asarray(b).reshape(plan.n, -1), plan.bits, nb * plan.block)  # [N, nb * block]
    s = np.asarray(scales, F32).reshape(plan.n, nb)
    if zero_points is None:
        zp = np.full((plan.n, nb), float(1 << (plan.bits - 1)), F32)
    elif np.asarray(zero_points).dtype == np.uint8:
        zp = _unpack(np.asarray(zero_points).reshape(plan.n, -1), plan.bits, nb).astype(F32)
    else:
        zp = np.asarray(zero_points, F32).reshape(plan.n, nb)
    rep = lambda v: np.repeat(v, plan.block, axis=1)  # noqa: E731
    w = ((codes.astype(F32) - rep(zp)).astype(F32) * rep(s)).astype(F32)[:, :plan.k]
    y = (np.asarray(a, F32) @ w.T).astype(F32)
    if bias is not None:
        y = (y + np.asarray(bias, F32)).astype(F32)
    return y
