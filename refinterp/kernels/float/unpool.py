"""ONNX MaxUnpool (MaxPool's indices scattered back): X [N, C, *S], I (same shape, int64 indices into
the flattened output as MaxPool writes them), optional output_shape.

Without output_shape both readings agree: a zero tensor of the inferred shape
``(S - 1) * stride - pad_begin - pad_end + kernel`` gets Y.flat[I] = X.  With output_shape they do not:
ONNX's reference implementation (and so onnx's node cases) scatters into the inferred shape and
places that tensor in the top-left corner of output_shape (``float``); ONNX Runtime scatters into
output_shape itself, so indices taken by MaxPool on an input of that size land where they came from
(``scatter_into`` with the output shape: kernels/onnxruntime/unpool.py).  Later writes win for a
repeated index, as both do.
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError
from ..registry import attr_plan, kernel


def inferred_shape(plan, x) -> tuple[int, ...]:
    k = [int(v) for v in plan.attr("kernel_shape")]
    nsp = len(k)
    s = [int(v) for v in (plan.attr("strides") or [1] * nsp)]
    p = [int(v) for v in (plan.attr("pads") or [0] * (2 * nsp))]
    if x.ndim != nsp + 2:
        raise InputError(f"{plan.where}: input rank {x.ndim} does not match kernel_shape {k}")
    return x.shape[:2] + tuple((x.shape[2 + d] - 1) * s[d] - p[d] - p[d + nsp] + k[d] for d in range(nsp))


def scatter_into(plan, x, indices, shape) -> np.ndarray:
    idx = np.asarray(indices, np.int64).ravel()
    size = int(np.prod(shape))
    if idx.size != x.size:
        raise InputError(f"{plan.where}: {idx.size} indices for {x.size} values")
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise InputError(f"{plan.where}: an index lies outside the output of {size} elements")
    y = np.zeros(size, x.dtype)
    y[idx] = x.ravel()
    return y.reshape(shape)


@kernel("MaxUnpool", "float", prepare=attr_plan)
def max_unpool(plan, x, indices, output_shape=None):
    inferred = inferred_shape(plan, x)
    if output_shape is not None and np.asarray(indices).size and \
            int(np.max(indices)) >= int(np.prod(inferred)):
        raise InputError(f"{plan.where}: indices reach past the inferred output {list(inferred)}, which ONNX's "
                         f"reference fills before padding to output_shape; ONNX Runtime scatters into "
                         f"output_shape itself (scheme onnxruntime-cpu)")
    y = scatter_into(plan, x, indices, inferred)
    if output_shape is None:
        return y
    shape = tuple(int(v) for v in np.asarray(output_shape).ravel())
    if len(shape) != len(inferred) or any(a < b for a, b in zip(shape, inferred)):
        raise InputError(f"{plan.where}: output_shape {list(shape)} is smaller than {list(inferred)}")
    out = np.zeros(shape, x.dtype)
    out[tuple(slice(0, n) for n in inferred)] = y
    return out
