"""Depthwise 2-D convolution core in Numba, channels-last, same arithmetic as the NumPy loop.

Contract (identical to ``conv.conv_channels_last`` for ``Cg == 1``, 2 spatial dims): for each
output element ``acc = 0`` in the compute dtype, then for each kernel cell in row-major order
``acc = acc + x * w`` with the product and the sum each rounded to the compute dtype (no FMA:
Numba's default ``fastmath=False`` forbids contraction).  Output channel ``c * Mg + m``.
Exact for integer-valued float64 inputs whose partial sums stay below 2^53.
"""
from __future__ import annotations

import numba
import numpy as np

from refinterp.settings import kernel_threads
from ..threads import numba_threads


@numba.njit(cache=True, parallel=True)
def _dw2d(xp, w, out, sh, sw, dh, dw):  # pragma: no cover - compiled
    n, oh, ow, _ = out.shape
    kh, kw, c, mg = w.shape
    for r in numba.prange(n * oh):
        b = r // oh
        oy = r - b * oh
        for ox in range(ow):
            acc = out[b, oy, ox]  # zeros of the compute dtype; cells accumulate in row-major order
            for ky in range(kh):
                iy = oy * sh + ky * dh
                for kx in range(kw):
                    ix = ox * sw + kx * dw
                    if mg == 1:  # contiguous channel loop (vectorises)
                        xrow = xp[b, iy, ix]
                        wrow = w[ky, kx, :, 0]
                        for ci in range(c):
                            acc[ci] = acc[ci] + xrow[ci] * wrow[ci]
                    else:
                        for ci in range(c):
                            xv = xp[b, iy, ix, ci]
                            for m in range(mg):
                                acc[ci * mg + m] = acc[ci * mg + m] + xv * w[ky, kx, ci, m]


def depthwise2d(xp: np.ndarray, wk: np.ndarray, strides, dilations, out_hw, cdt) -> np.ndarray:
    """xp (N, Hp, Wp, C) already padded; wk (KH, KW, C, 1, Mg) -> (N, OH, OW, C, Mg) in ``cdt``."""
    kh, kw, c, _, mg = wk.shape
    xp = np.ascontiguousarray(xp, dtype=cdt)
    w = np.ascontiguousarray(wk.reshape(kh, kw, c, mg), dtype=cdt)
    out = np.zeros((xp.shape[0], out_hw[0], out_hw[1], c * mg), dtype=cdt)
    with numba_threads(kernel_threads(out.size * kh * kw)):
        _dw2d(xp, w, out, int(strides[0]), int(strides[1]), int(dilations[0]), int(dilations[1]))
    return out.reshape(out.shape[:-1] + (c, mg))
