"""Many samples in one feed: split inputs that carry a leading sample axis into one feed per sample
(used by ``diff`` and ``capture``; ``run`` batches through cli/batch.py)."""
from __future__ import annotations

from typing import Mapping

import numpy as np

from .errors import InputError
from .ir import Graph


def feed_samples(graph: Graph, feeds: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """One feed dict per sample: an input may carry a leading sample axis (or a batch over batch-1)."""
    per: dict[str, list[np.ndarray]] = {}
    for name in graph.inputs:
        if name not in feeds:
            raise InputError(f"--inputs lacks model input '{name}'")
        a = np.asarray(feeds[name])
        shape = graph.tensors[name].shape
        if shape is None or a.ndim == len(shape):
            if shape and shape[0] == 1 and a.ndim and a.shape[0] > 1:
                per[name] = [a[i:i + 1] for i in range(a.shape[0])]
            else:
                per[name] = [a]
        elif a.ndim == len(shape) + 1:
            per[name] = [a[i] for i in range(a.shape[0])]
        else:
            raise InputError(f"input '{name}' has shape {list(a.shape)}; the model expects {list(shape)}")
    counts = {len(v) for v in per.values()}
    if len(counts) > 1:
        raise InputError(f"inputs hold different numbers of samples: {sorted(counts)}")
    k = counts.pop() if counts else 1
    return [{n: v[i] for n, v in per.items()} for i in range(k)]
