"""KISS FFT v130's 16-bit fixed-point real FFT (``kiss_fftr`` with FIXED_POINT 16), the FFT of TFLite
Micro's SignalRfft; written from the algorithm's definition, for FFT lengths 2^k (radix-4 stages
then one radix-2 stage, as kf_factor orders them).

Numeric contract (int16 values, int32 intermediate products):

* twiddles: w[i] = (floor(0.5 + 32767 cos t), floor(0.5 + 32767 sin t)), t = -2 pi i / n (double);
  the real-FFT post-processing ones t = -pi ((i + 1) / n + 0.5);
* sround(v) = (v + 2^14) >> 15;  a complex product is sround(ar br - ai bi), sround(ar bi + ai br);
* each radix-p butterfly first divides its p inputs by p as sround(v * (32767 // p));
* sums and differences are stored to int16 (they wrap as the C stores do); HALF_OF(v) = v >> 1.

The n real samples are read as n/2 complex values (even samples real, odd imaginary), transformed
by the n/2-point complex FFT (decimation in time, recursive in kf_work's order), then split into
the n/2 + 1 bins of the real spectrum.
"""
from __future__ import annotations

import math

import numpy as np

_I64 = np.int64


def _s16(v):
    """Store to int16 (two's complement wrap)."""
    return ((np.asarray(v, _I64) + 32768) & 0xFFFF) - 32768


def _sround(v):
    return _s16((np.asarray(v, _I64) + (1 << 14)) >> 15)


def _fixdiv(v, p: int):
    return _sround(np.asarray(v, _I64) * (32767 // p))


def _cmul(ar, ai, br, bi):
    return _sround(ar * br - ai * bi), _sround(ar * bi + ai * br)


def _cexp(phase: float) -> tuple[int, int]:
    return int(math.floor(0.5 + 32767 * math.cos(phase))), int(math.floor(0.5 + 32767 * math.sin(phase)))


def factors(n: int) -> list[tuple[int, int]]:
    """kf_factor for a power of two: (radix, remaining length) pairs, fours first."""
    out = []
    while n > 1:
        p = 4 if n % 4 == 0 else 2
        n //= p
        out.append((p, n))
    return out


class RealFft16:
    """One configuration (``kiss_fftr_alloc``) of an n-point forward real FFT, n = 2^k >= 4."""

    def __init__(self, n: int) -> None:
        if n < 4 or n & (n - 1):
            raise ValueError(f"FFT length {n} is not a power of two >= 4")
        self.n = n
        half = n // 2
        tw = [_cexp(-2 * math.pi * i / half) for i in range(half)]
        self.tw_r = np.array([t[0] for t in tw], _I64)
        self.tw_i = np.array([t[1] for t in tw], _I64)
        sup = [_cexp(-math.pi * ((i + 1) / half + 0.5)) for i in range(half // 2)]
        self.sup_r = np.array([t[0] for t in sup], _I64)
        self.sup_i = np.array([t[1] for t in sup], _I64)
        self.factors = factors(half)

    def _work(self, xr, xi, level: int, fstride: int):
        p, m = self.factors[level]
        if m == 1:
            fr, fi = xr.copy(), xi.copy()
        else:
            subs = [self._work(xr[q::p], xi[q::p], level + 1, fstride * p) for q in range(p)]
            fr = np.concatenate([s[0] for s in subs])
            fi = np.concatenate([s[1] for s in subs])
        k = np.arange(m)
        if p == 2:
            a_r, a_i = _fixdiv(fr[:m], 2), _fixdiv(fi[:m], 2)
            b_r, b_i = _fixdiv(fr[m:], 2), _fixdiv(fi[m:], 2)
            t_r, t_i = _cmul(b_r, b_i, self.tw_r[k * fstride], self.tw_i[k * fstride])
            return (np.concatenate([_s16(a_r + t_r), _s16(a_r - t_r)]),
                    np.concatenate([_s16(a_i + t_i), _s16(a_i - t_i)]))
        f = [(_fixdiv(fr[j * m:(j + 1) * m], 4), _fixdiv(fi[j * m:(j + 1) * m], 4)) for j in range(4)]
        s0 = _cmul(*f[1], self.tw_r[k * fstride], self.tw_i[k * fstride])
        s1 = _cmul(*f[2], self.tw_r[2 * k * fstride], self.tw_i[2 * k * fstride])
        s2 = _cmul(*f[3], self.tw_r[3 * k * fstride], self.tw_i[3 * k * fstride])
        s5 = (_s16(f[0][0] - s1[0]), _s16(f[0][1] - s1[1]))
        f0 = (_s16(f[0][0] + s1[0]), _s16(f[0][1] + s1[1]))
        s3 = (_s16(s0[0] + s2[0]), _s16(s0[1] + s2[1]))
        s4 = (_s16(s0[0] - s2[0]), _s16(s0[1] - s2[1]))
        out2 = (_s16(f0[0] - s3[0]), _s16(f0[1] - s3[1]))
        out0 = (_s16(f0[0] + s3[0]), _s16(f0[1] + s3[1]))
        out1 = (_s16(s5[0] + s4[1]), _s16(s5[1] - s4[0]))
        out3 = (_s16(s5[0] - s4[1]), _s16(s5[1] + s4[0]))
        return (np.concatenate([out0[0], out1[0], out2[0], out3[0]]),
                np.concatenate([out0[1], out1[1], out2[1], out3[1]]))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """x: n int16 samples -> (n/2 + 1) complex bins as int16 pairs, interleaved (re, im)."""
        x = np.asarray(x, _I64)
        half = self.n // 2
        tr, ti = self._work(x[0::2], x[1::2], 0, 1)
        out_r = np.zeros(half + 1, _I64)
        out_i = np.zeros(half + 1, _I64)
        dr, di = _fixdiv(tr[0], 2), _fixdiv(ti[0], 2)
        out_r[0] = _s16(dr + di)
        out_r[half] = _s16(dr - di)
        for k in range(1, half // 2 + 1):
            pk_r, pk_i = _fixdiv(tr[k], 2), _fixdiv(ti[k], 2)
            nk_r, nk_i = _fixdiv(tr[half - k], 2), _fixdiv(_s16(-ti[half - k]), 2)
            f1 = (_s16(pk_r + nk_r), _s16(pk_i + nk_i))
            f2 = (_s16(pk_r - nk_r), _s16(pk_i - nk_i))
            t_r, t_i = _cmul(f2[0], f2[1], self.sup_r[k - 1], self.sup_i[k - 1])
            out_r[k] = _s16((f1[0] + t_r) >> 1)
            out_i[k] = _s16((f1[1] + t_i) >> 1)
            out_r[half - k] = _s16((f1[0] - t_r) >> 1)
            out_i[half - k] = _s16((t_i - f1[1]) >> 1)
        return np.stack([out_r, out_i], axis=1).reshape(-1).astype(np.int16)
