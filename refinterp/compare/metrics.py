"""Per-tensor error metrics between a reference (ours) and a device tensor.

Both sides arrive as real values (float64, dequantized when quantized) and, for quantized
tensors, as error in LSBs of the tensor's own scale (per channel when per-axis).  Metrics over
several samples are computed on the concatenation of all samples' elements.

Non-finite values never raise: NaN/Inf are counted per side; positions where both sides hold the
same non-finite value count as equal, positions where only one side is non-finite count as
mismatches, and every float statistic is taken over positions finite on both sides.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

LSB_BINS = ((0, 0), (1, 1), (2, 2), (3, 3), (4, 7), (8, 15), (16, 31), (32, None))


def _bin_label(lo: int, hi: int | None) -> str:
    return str(lo) if hi == lo else (f"{lo}+" if hi is None else f"{lo}-{hi}")


@dataclass
class Metrics:
    num_elements: int
    exact_fraction: float  # share of elements equal on both sides (integer codes when quantized)
    max_abs_error: float  # real units
    mean_error: float  # mean of (device - reference), real units
    stddev: float  # standard deviation of the error
    mean_squared_error: float
    rmse: float
    range: float  # max(range_ref, range_dev) of the real values
    nrmse: float  # rmse / range (0 when both sides constant and equal)
    cosine: float | None  # None when either side is all zeros
    sqnr_db: float | None  # 10 log10(sum ref^2 / sum err^2); None when no error (infinite)
    max_abs_lsb: float | None = None  # only for quantized tensors
    lsb_histogram: dict[str, int] | None = None  # |dLSB| counts in bins 0,1,2,3,4-7,8-15,16-31,32+
    needed_atol: float = 0.0  # smallest absolute tolerance that would have passed
    needed_atol_lsb: float | None = None
    nan_ref: int = 0
    nan_dev: int = 0
    inf_ref: int = 0
    inf_dev: int = 0
    nonfinite_mismatch: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: _json_num(v) for k, v in d.items()}


def _json_num(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, dict):
        return {k: _json_num(x) for k, x in v.items()}
    return v


def _flat(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(p, np.float64).ravel() for p in parts]) if parts else np.zeros(0)


def compute(ref: list[np.ndarray], dev: list[np.ndarray], lsb: list[np.ndarray] | None = None,
            exact: list[np.ndarray] | None = None) -> Metrics:
    """Metrics for matching lists of samples.

    ref/dev: real values per sample (same shapes pairwise).  lsb: (dev - ref) / scale per sample
    for quantized tensors, else None.  exact: per-sample boolean equality masks when equality is
    better judged on stored codes than on real values (else equality of the real values is used).
    """
    r, d = _flat(ref), _flat(dev)
    n = int(r.size)
    with np.errstate(all="ignore"):
        fin_r, fin_d = np.isfinite(r), np.isfinite(d)
        both = fin_r & fin_d
        same_nonfinite = ~fin_r & ~fin_d & ((np.isnan(r) & np.isnan(d)) | (r == d))
        one_side = ~both & ~same_nonfinite
        if exact is not None:
            eq = _flat([e.astype(np.float64) for e in exact]).astype(bool)
        else:
            eq = (r == d) | same_nonfinite
        rf, df = r[both], d[both]
        err = df - rf
        m = int(err.size)
        abs_err = np.abs(err)
        max_abs = float(abs_err.max()) if m else 0.0
        mean_err = float(err.mean()) if m else 0.0
        mse = float(np.mean(err * err)) if m else 0.0
        rmse = math.sqrt(mse)
        std = float(err.std()) if m else 0.0
        rng = max(float(rf.max() - rf.min()) if m else 0.0, float(df.max() - df.min()) if m else 0.0)
        nrmse = rmse / rng if rng > 0 else (0.0 if rmse == 0 else math.inf)
        nr, nd = float(np.sqrt(np.sum(rf * rf))), float(np.sqrt(np.sum(df * df)))
        cosine = float(np.sum(rf * df) / (nr * nd)) if nr > 0 and nd > 0 else None
        sig, noise = float(np.sum(rf * rf)), float(np.sum(err * err))
        sqnr = 10.0 * math.log10(sig / noise) if noise > 0 and sig > 0 else (None if noise == 0 else -math.inf)
    out = Metrics(
        num_elements=n, exact_fraction=float(eq.mean()) if n else 1.0, max_abs_error=max_abs,
        mean_error=mean_err, stddev=std, mean_squared_error=mse, rmse=rmse, range=rng, nrmse=nrmse,
        cosine=cosine, sqnr_db=sqnr, needed_atol=max_abs if not one_side.any() else math.inf,
        nan_ref=int(np.isnan(r).sum()), nan_dev=int(np.isnan(d).sum()),
        inf_ref=int(np.isinf(r).sum()), inf_dev=int(np.isinf(d).sum()),
        nonfinite_mismatch=int(one_side.sum()))
    if lsb is not None:
        q = _flat(lsb)
        with np.errstate(all="ignore"):
            qa = np.abs(q[np.isfinite(q)])
        out.max_abs_lsb = float(qa.max()) if qa.size else 0.0
        out.needed_atol_lsb = out.max_abs_lsb if not one_side.any() else math.inf
        qr = np.rint(qa)
        hist = {}
        for lo, hi in LSB_BINS:
            sel = qr >= lo if hi is None else (qr >= lo) & (qr <= hi)
            hist[_bin_label(lo, hi)] = int(sel.sum())
        out.lsb_histogram = hist
    return out


def within(m: Metrics, atol: float, rtol: float, ref: list[np.ndarray], dev: list[np.ndarray]) -> bool:
    """Polygraphy's elementwise rule: an element fails when it exceeds both atol and rtol*|ref|, or
    when exactly one side is non-finite."""
    if m.nonfinite_mismatch:
        return False
    if m.max_abs_error <= atol:
        return True
    r, d = _flat(ref), _flat(dev)
    with np.errstate(all="ignore"):
        both = np.isfinite(r) & np.isfinite(d)
        ae = np.abs(d[both] - r[both])
        rel = ae / np.maximum(np.abs(r[both]), 2.22e-16)
        return not bool(np.any((ae > atol) & (rel > rtol)))
