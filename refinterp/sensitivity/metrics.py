"""Final-output metrics, each oriented so that larger is better (``score``), over all samples and
outputs together (float64 accumulation)."""
from __future__ import annotations

import numpy as np


def _pairs(got: list[dict], want: list[dict]):
    for g, w in zip(got, want):
        for name, ref in w.items():
            yield np.asarray(g[name], np.float64).ravel(), np.asarray(ref, np.float64).ravel()


def cosine(got, want) -> float:
    """Cosine similarity of the concatenated outputs (1 = same direction)."""
    dot = na = nb = 0.0
    for a, b in _pairs(got, want):
        dot += float(a @ b)
        na += float(a @ a)
        nb += float(b @ b)
    return 1.0 if na == 0 and nb == 0 else dot / max(np.sqrt(na * nb), 1e-300)


def sqnr(got, want) -> float:
    """Signal-to-quantization-noise ratio in dB, 10 log10(sum ref^2 / sum (ref - got)^2)."""
    sig = noise = 0.0
    for a, b in _pairs(got, want):
        sig += float(b @ b)
        noise += float((a - b) @ (a - b))
    if noise == 0:
        return float("inf")
    return 10.0 * np.log10(max(sig, 1e-300) / noise)


def mse(got, want) -> float:
    """Mean squared error (reported as is; its score is its negative)."""
    total = n = 0.0
    for a, b in _pairs(got, want):
        total += float((a - b) @ (a - b))
        n += a.size
    return total / max(n, 1)


def top1(got, want) -> float:
    """Fraction of (sample, output row) argmax agreements over the last axis."""
    agree = n = 0
    for g, w in zip(got, want):
        for name, ref in w.items():
            a = np.asarray(g[name]).reshape(-1, np.shape(ref)[-1] if np.ndim(ref) else 1)
            b = np.asarray(ref).reshape(a.shape)
            agree += int(np.sum(np.argmax(a, -1) == np.argmax(b, -1)))
            n += a.shape[0]
    return agree / max(n, 1)


METRICS = {"cosine": cosine, "sqnr": sqnr, "mse": mse, "top1": top1}


def score(metric: str, value: float) -> float:
    """Larger is better."""
    return -value if metric == "mse" else value
