"""TFLite Micro's audio front-end custom ops (tflite-micro ``signal/src`` and ``signal/micro/kernels``),
bit-exact integer arithmetic; registered for every scheme (variants ``float`` and ``int``: the ops
have no quantized tensors, and the arithmetic is the library's own on every target that runs it).

Numeric contracts (unsigned values wrap at their width, as the C stores do):

* SignalWindow: y = sat16((x * w) >> shift), per chunk of len(w) samples;
* SignalFftAutoScale: m = the largest |x| (int16, so |-32768| stores as -32768), scale =
  max(0, 15 - msb(uint32(m))) with msb(0) = 32; y = int16(x * 2^scale); outputs (y, scale);
* SignalRfft: kiss_rfft.RealFft16 over each input row, zero-padded to fft_length;
* SignalEnergy: e[i] = uint32(re^2 + im^2) for start_index <= i < end_index; TFLite Micro leaves
  the other elements of its output untouched (here: 0);
* SignalFilterBank: per channel i = 0..C, over its width: acc_w += uint64(w[s + j]) * x[f + j],
  acc_u likewise with the unweights; out[i] = acc_w, then acc_w = acc_u, acc_u = 0; outputs out[1:]
  (uint64, wrapping);
* SignalFilterBankSquareRoot: uint32(isqrt64(x) rounded as Sqrt64) >> scale_bits;
* SignalFilterBankSpectralSubtraction: per channel (odd channels use the alternate smoothing):
  up = uint32(x << smoothing_bits); n = uint32((up * s + n * (1 - s)) >> ssb) (64-bit products);
  e = min(n, up) (clamping stores e back into n); floor = uint32((x * min_remaining) >> ssb);
  y = max((up - e) >> smoothing_bits, floor); outputs (y, n);
* SignalPCAN: gain = int16 piecewise-quadratic LUT of the noise estimate (WideDynamicFunction,
  taken as uint32); snr = uint32((x * gain) >> snr_shift); y = snr^2 >> 20 if snr < 8192 else
  (snr >> 6) - 64;
* SignalFilterBankLog: s = uint32(x << correction_bits); y = min(Log32(s, output_scale), 32767) for
  s > 1, else 0; Log32 is log2 with a 128-segment correction table, times round(2^16 ln 2).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from refinterp.errors import UnsupportedOpError
from .kiss_rfft import RealFft16
from ..registry import kernel

VARIANTS = ("float", "int")
_U32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1


def _msb(x: int) -> int:
    """MostSignificantBit32 / 64 as built with GCC: bit length, and the width for 0."""
    return x.bit_length()


def _where(node) -> str:
    return f"node '{node.name}' ({node.op})"


@dataclass(frozen=True)
class SignalPlan:
    attrs: dict
    fft: RealFft16 | None = None


def _prepare(node, ctx) -> SignalPlan:
    return SignalPlan(dict(node.attrs))


@kernel("SignalWindow", VARIANTS, prepare=_prepare)
def window(plan, x, w):
    x = np.asarray(x, np.int64)
    w = np.asarray(w, np.int64).ravel()
    y = (x.reshape(-1, w.size) * w) >> int(plan.attrs.get("shift", 0))
    return np.clip(y, -32768, 32767).astype(np.int16).reshape(x.shape)


@kernel("SignalFftAutoScale", VARIANTS, prepare=_prepare)
def fft_auto_scale(plan, x):
    x = np.asarray(x, np.int16)
    m = 0
    for v in x.ravel().tolist():  # MaxAbs16 with int16 storage of the running maximum
        if v > m:
            m = v
        elif -v > m:
            m = ((-v + 32768) & 0xFFFF) - 32768
    width = _msb(m & _U32) if m else 32
    scale = max(0, 16 - width - 1)
    y = ((x.astype(np.int64) * (1 << scale) + 32768) & 0xFFFF) - 32768
    return y.astype(np.int16), np.array(scale, np.int32)


def _prepare_rfft(node, ctx) -> SignalPlan:
    a = dict(node.attrs)
    if int(a.get("T", 7)) != 7:  # tflite TensorType INT16
        raise UnsupportedOpError(f"{_where(node)}: only the int16 real FFT is modelled (T={a.get('T')})")
    try:
        fft = RealFft16(int(a.get("fft_length", 0)))
    except ValueError as e:
        raise UnsupportedOpError(f"{_where(node)}: {e}") from None
    return SignalPlan(a, fft)


@kernel("SignalRfft", VARIANTS, prepare=_prepare_rfft)
def rfft(plan, x):
    x = np.asarray(x, np.int16)
    n = plan.fft.n
    rows = x.reshape(-1, x.shape[-1])
    if rows.shape[1] > n:
        raise UnsupportedOpError(f"SignalRfft: input length {rows.shape[1]} exceeds fft_length {n}")
    out = []
    for r in rows:
        buf = np.zeros(n, np.int16)
        buf[:r.size] = r
        out.append(plan.fft(buf))
    return np.stack(out).reshape(x.shape[:-1] + (n + 2,))


@kernel("SignalEnergy", VARIANTS, prepare=_prepare)
def energy(plan, x):
    c = np.asarray(x, np.int64).reshape(-1, 2)
    out = np.zeros(c.shape[0], np.uint32)
    lo, hi = int(plan.attrs.get("start_index", 0)), int(plan.attrs.get("end_index", c.shape[0]))
    v = c[lo:hi, 0] * c[lo:hi, 0] + c[lo:hi, 1] * c[lo:hi, 1]
    out[lo:hi] = (v & _U32).astype(np.uint32)
    return out


@kernel("SignalFilterBank", VARIANTS, prepare=_prepare)
def filter_bank(plan, x, weights, unweights, freq_starts, weight_starts, widths):
    x = [int(v) for v in np.asarray(x, np.uint32).ravel()]
    wt = [int(v) & _U64 for v in np.asarray(weights, np.int64).ravel()]
    uw = [int(v) & _U64 for v in np.asarray(unweights, np.int64).ravel()]
    fs, ws, wd = (np.asarray(a, np.int64).ravel().tolist() for a in (freq_starts, weight_starts, widths))
    n = int(plan.attrs.get("num_channels", len(wd) - 1))
    out = []
    acc_w = acc_u = 0
    for i in range(n + 1):
        for j in range(wd[i]):
            acc_w = (acc_w + wt[ws[i] + j] * x[fs[i] + j]) & _U64
            acc_u = (acc_u + uw[ws[i] + j] * x[fs[i] + j]) & _U64
        out.append(acc_w)
        acc_w, acc_u = acc_u, 0
    return np.array(out[1:], np.uint64)


def _sqrt(num: int, bits: int) -> int:
    """Sqrt32 (bits 32) / Sqrt64 (bits 64): bitwise integer square root, then +1 if the remainder
    exceeds the root (unless the root is the largest value of half the width)."""
    if num == 0:
        return 0
    top = bits - _msb(num)
    top |= 1
    bit = 1 << (bits - 1 - top)
    res = 0
    for _ in range((bits - 1 - top) // 2 + 1):
        if num >= res + bit:
            num -= res + bit
            res = (res >> 1) + bit
        else:
            res >>= 1
        bit >>= 2
    if num > res and res != (1 << (bits // 2)) - 1:
        res += 1
    return res


@kernel("SignalFilterBankSquareRoot", VARIANTS, prepare=_prepare)
def filter_bank_sqrt(plan, x, scale_bits):
    s = int(np.asarray(scale_bits).ravel()[0])
    out = []
    for v in np.asarray(x, np.uint64).ravel().tolist():
        r = _sqrt(v, 32) if (v >> 32) == 0 else _sqrt(v, 64)
        out.append((r & _U32) >> s)
    return np.array(out, np.uint32)


@kernel("SignalFilterBankSpectralSubtraction", VARIANTS, prepare=_prepare)
def spectral_subtraction(plan, x, state):
    a = plan.attrs
    sb, ssb = int(a.get("smoothing_bits", 0)), int(a.get("spectral_subtraction_bits", 0))
    xs = np.asarray(x, np.uint32).ravel().tolist()
    noise = (np.zeros(len(xs), np.uint32) if state is None else np.asarray(state, np.uint32)).ravel().tolist()
    out = []
    for i, v in enumerate(xs):
        s, oms = ((int(a["smoothing"]), int(a["one_minus_smoothing"])) if i % 2 == 0 else
                  (int(a["alternate_smoothing"]), int(a["alternate_one_minus_smoothing"])))
        up = (v << sb) & _U32
        noise[i] = ((up * s + noise[i] * oms) >> ssb) & _U32
        est = noise[i]
        if est > up:
            est = up
            if a.get("clamping"):
                noise[i] = est
        floor = ((v * int(a["min_signal_remaining"])) >> ssb) & _U32
        sub = ((up - est) & _U32) >> sb
        out.append(max(sub, floor))
    return np.array(out, np.uint32), np.array(noise, np.uint32)


def _s32(v: int) -> int:
    v &= _U32
    return v - (1 << 32) if v & 0x80000000 else v


def _wide_dynamic(x: int, lut: list[int]) -> int:
    if x <= 2:
        return lut[x]
    interval = _msb(x)
    base = 4 * interval - 6
    frac = ((x << (11 - interval)) if interval < 11 else (x >> (interval - 11))) & 0x3FF
    r = _s32(lut[base + 2] * frac) >> 5
    r = _s32(r + _s32(((lut[base + 1] & _U32) << 5) & _U32))  # (int32)((uint32)lut[1] << 5)
    r = _s32(r * frac)
    r = _s32(r + (1 << 14)) >> 15
    r = r + lut[base]
    return ((r + 32768) & 0xFFFF) - 32768


@kernel("SignalPCAN", VARIANTS, prepare=_prepare)
def pcan(plan, x, noise, lut):
    shift = int(plan.attrs.get("snr_shift", 0))
    table = np.asarray(lut, np.int16).ravel().tolist()
    out = []
    for v, n in zip(np.asarray(x, np.uint32).ravel().tolist(), np.asarray(noise, np.uint32).ravel().tolist()):
        gain = _wide_dynamic(n, table) & _U32
        snr = ((v * gain) >> shift) & _U32
        out.append((snr * snr) >> 20 if snr < (2 << 12) else ((snr >> 6) - 64) & _U32)
    return np.array(out, np.uint32)


# log2(1 + t) - t at t = i / 128, in units of 2^-16 (129 points, and a 0 past the end)
_LOG_TABLE = [int(math.floor(65536 * (math.log2(1 + i / 128) - i / 128) + 0.5)) for i in range(129)] + [0]


def _log32(x: int, out_scale: int) -> int:
    integer = _msb(x) - 1
    frac = x - (1 << integer)
    frac = (frac << (16 - integer)) if integer < 16 else (frac >> (integer - 16))
    seg = frac >> 9
    c0, c1 = _LOG_TABLE[seg], _LOG_TABLE[seg + 1]
    rel = ((c1 - c0) * (frac - 512 * seg)) >> 16
    log2 = ((integer << 16) + frac + c0 + rel) & _U32
    loge = ((45426 * log2 + 32768) >> 16) & _U32
    return ((out_scale * loge & _U32) + 32768 & _U32) >> 16


@kernel("SignalFilterBankLog", VARIANTS, prepare=_prepare)
def filter_bank_log(plan, x):
    bits, scale = int(plan.attrs.get("input_correction_bits", 0)), int(plan.attrs.get("output_scale", 1))
    out = []
    for v in np.asarray(x, np.uint32).ravel().tolist():
        s = (v << bits) & _U32
        out.append(min(_log32(s, scale), 32767) if s > 1 else 0)
    return np.array(out, np.int16)
