"""com.microsoft ``MatMulNBits`` (weight-only 4-bit / 8-bit quantization, as ORT's MatMul4Bits /
MatMulNBits quantizers write it for LLM and transformer weights).

Inputs: A [..., K] float32; B uint8 [N, n_blocks, blob] (``bits``-bit codes packed low nibble
first, one block of ``block_size`` codes of K per blob); scales float32 [N * n_blocks];
zero_points (optional) uint8 packed like B ([N, ceil(n_blocks * bits / 8)]) or float32
[N * n_blocks]; g_idx / bias optional.  Default zero point: 2^(bits-1).  Then::

    W[n, k] = f32((code[n, k] - zp[n, block(k)]) * scale[n, block(k)])
    Y       = A @ W^T (+ bias)        float32, K padded blocks ignored

``accuracy_level`` 4 makes ORT quantize A to int8 per block (MLAS CompInt8): variant ``ort_float``
(scheme onnxruntime-cpu) reproduces it bit for bit for 4- and 8-bit weights with block_size 32, 64,
128 or 256 and uint8 (or default) zero points (nbits_compint8.py: MLAS's AVX-512 VNNI order); other CompInt8 forms
are refused by name.  Levels 0 - 3 compute in float32 (MLAS's summation order is not reproduced:
results agree within float32 rounding, checked within 1e-5 relative).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from refinterp.errors import InputError, ModelError, UnsupportedOpError
from .common import MS
from .float_matmul import BLOCK, quantize_a_blocks
from .nbits_compint8 import compint8_matmul
from ..registry import Delegate, kernel, require

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


@dataclass(frozen=True)
class CompInt8Plan:
    k: int
    block: int
    bits: int
    bt: np.ndarray   # (N, nb * block) int32 unsigned weight codes, K padded
    sb: np.ndarray   # (nb, N) float32 block scales
    nzs: np.ndarray  # (nb, N) float32 f32(-scale * zero point)


def _prepare_ort(node, ctx):
    if int(node.attrs.get("accuracy_level", 0) or 0) != 4:
        fk = require(MS + "MatMulNBits", "float")
        return Delegate(fk, fk.prepare(node, ctx))
    w = f"node '{node.name}' (MatMulNBits)"
    a = node.attrs
    k, n, bits, block = (int(a.get(x, 0) or 0) for x in ("K", "N", "bits", "block_size"))
    b, scales = ctx.const(1), ctx.const(2)
    zp = ctx.const(3) if len(node.inputs) > 3 and node.inputs[3] else None
    why = None
    if bits not in (4, 8) or block not in (BLOCK, 64, 128, 256) or k <= 0 or n <= 0:
        why = f"bits={bits}, block_size={block} (CompInt8 is reproduced for 4 / 8 bits, block_size 32, 64, 128, 256)"
    elif len(node.inputs) > 4 and node.inputs[4]:
        why = "g_idx (act-order)"
    elif b is None or scales is None or (len(node.inputs) > 3 and node.inputs[3] and zp is None):
        why = "weights, scales or zero points computed at run time"
    elif zp is not None and np.asarray(zp).dtype != np.uint8:
        why = "float zero points"
    if why is not None:
        raise UnsupportedOpError(f"{w}: accuracy_level 4 (MLAS CompInt8) with {why} is not modelled")
    nb = -(-k // block)
    need = n * nb * block * bits // 8
    if np.size(b) != need or np.size(scales) != n * nb:
        raise ModelError(f"{w}: B has {np.size(b)} bytes and scales {np.size(scales)} values; K={k}, N={n}, "
                         f"bits={bits}, block_size={block} need {need} and {n * nb}")
    codes = _unpack(np.asarray(b).reshape(n, -1), bits, nb * block)                      # (N, nb * block)
    sb = np.asarray(scales, F32).reshape(n, nb).T.copy()                                  # (nb, N)
    z = (np.full((n, nb), 1 << (bits - 1), np.int64) if zp is None
         else _unpack(np.asarray(zp).reshape(n, -1), bits, nb))
    nzs = (-sb.astype(np.float64) * z.T).astype(F32)  # one rounding: z is a small integer
    return CompInt8Plan(k, block, bits, np.ascontiguousarray(codes, np.int32), sb, nzs)


@kernel(MS + "MatMulNBits", "ort_float", prepare=_prepare_ort, raw_inputs=True)
def matmul_nbits_compint8(plan, a, b, scales, zero_points=None, g_idx=None, bias=None):
    if isinstance(plan, Delegate):  # called without a Session (which resolves delegates itself)
        return plan.kernel.run(plan.plan, a, b, scales, zero_points, g_idx, bias)
    a = np.asarray(a, F32)
    if a.ndim < 1 or a.shape[-1] != plan.k:
        raise InputError(f"MatMulNBits: A has shape {list(a.shape)}, its last dimension must be K={plan.k}")
    q, sa = quantize_a_blocks(a.reshape(-1, a.shape[-1]), plan.k, plan.block)
    y = compint8_matmul(q, plan.bt, sa, plan.sb, plan.nzs, bias, plan.bits)
    return y.reshape(a.shape[:-1] + (plan.sb.shape[1],))
