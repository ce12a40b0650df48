"""Index, scatter/gather and generator ops exporters emit (ONNX semantics, latest-opset form):
ConstantOfShape, Range, NonZero, EyeLike, OneHot, GatherElements, GatherND, ScatterElements,
ScatterND, Trilu, TopK, Compress, ReverseSequence (no arithmetic on element values: registered for
the ``float`` and ``int`` variants), and CumSum, Hardmax, MeanVarianceNormalization (arithmetic:
``float`` only, so a quantized tensor is never summed as codes).

Index inputs may be negative (counted from the end, as ONNX allows); an index outside the axis is an
InputError naming the node.  Scatter reductions follow ONNX: none | add | mul | max | min, applied in
index order (duplicate indices with ``none`` keep the last update, as the reference does).
"""
from __future__ import annotations

import numpy as np

from refinterp.errors import InputError, UnsupportedOpError
from ..registry import attr_plan, kernel
from ..int.shape import BOTH, ints


_plan = attr_plan


def _wrap(plan, idx: np.ndarray, size: int) -> np.ndarray:
    idx = np.asarray(idx, np.int64)
    if idx.size and (idx.min() < -size or idx.max() >= size):
        raise InputError(f"{plan.where}: index out of range for an axis of size {size}")
    return np.where(idx < 0, idx + size, idx)


# -- generators --------------------------------------------------------------------------------

@kernel("ConstantOfShape", BOTH, prepare=_plan)
def _constant_of_shape(plan, shape):
    v = plan.attr("value")
    v = np.zeros(1, np.float32) if v is None else np.asarray(v)
    dims = ints(shape)
    if any(d < 0 for d in dims):
        raise InputError(f"{plan.where}: negative dimension in shape {dims}")
    return np.full(dims, v.ravel()[0], dtype=v.dtype)


@kernel("Range", BOTH, prepare=_plan)
def _range(plan, start, limit, delta):
    s, l, d = (np.asarray(v).reshape(()) for v in (start, limit, delta))
    if d == 0:
        raise InputError(f"{plan.where}: delta is 0")
    n = max(int(np.ceil((float(l) - float(s)) / float(d))), 0)
    return (s + np.arange(n, dtype=s.dtype) * d).astype(s.dtype)  # start + i * delta, in the input type


@kernel("NonZero", BOTH, prepare=_plan)
def _nonzero(plan, x):
    x = np.asarray(x)
    return np.asarray(np.nonzero(x.reshape(1) if x.ndim == 0 else x), dtype=np.int64)


@kernel("EyeLike", BOTH, prepare=_plan)
def _eye_like(plan, x):
    dt = plan.out_dtype or x.dtype
    return np.eye(x.shape[0], x.shape[1], k=int(plan.attr("k", 0)), dtype=dt)


@kernel("OneHot", BOTH, prepare=_plan)
def _one_hot(plan, indices, depth, values, off_value=None):
    """ONNX (indices, depth, values = [off, on]): negative indices count from ``depth``; TFLite
    ONE_HOT (indices, depth, on, off): negative indices select nothing.  Out-of-range indices give
    an all-off row in both."""
    tflite = off_value is not None
    if tflite:
        values = np.stack([np.asarray(off_value).reshape(()), np.asarray(values).reshape(())])
    d = int(np.asarray(depth).ravel()[0])
    idx = np.asarray(indices).astype(np.int64)
    if not tflite:
        idx = np.where(idx < 0, idx + d, idx)
    ax = int(plan.attr("axis", -1))
    ax = ax + idx.ndim + 1 if ax < 0 else ax
    hot = np.expand_dims(idx, ax) == np.arange(d).reshape([d if i == ax else 1 for i in range(idx.ndim + 1)])
    off, on = np.asarray(values).ravel()[:2]
    return np.where(hot, on, off).astype(np.asarray(values).dtype)


# -- gather / scatter --------------------------------------------------------------------------

@kernel("GatherElements", BOTH, prepare=_plan)
def _gather_elements(plan, data, indices):
    ax = int(plan.attr("axis", 0)) % data.ndim
    return np.take_along_axis(data, _wrap(plan, indices, data.shape[ax]), axis=ax)


def _gather_nd(plan, data, indices, batch_dims: int):
    idx = np.asarray(indices, np.int64)
    k = idx.shape[-1]
    if k > data.ndim - batch_dims:
        raise InputError(f"{plan.where}: index depth {k} exceeds the data rank {data.ndim} - batch_dims")
    bshape = data.shape[:batch_dims]
    nb = int(np.prod(bshape, dtype=np.int64))
    d = data.reshape((nb,) + data.shape[batch_dims:])
    ix = idx.reshape((nb, -1, k))
    out = []
    for b in range(nb):
        sl = tuple(_wrap(plan, ix[b, :, j], d.shape[1 + j]) for j in range(k))
        out.append(d[b][sl])
    res = np.stack(out) if out else np.empty((0,) + d.shape[1 + k:], data.dtype)
    return res.reshape(idx.shape[:-1] + data.shape[batch_dims + k:])


@kernel("GatherND", BOTH, prepare=_plan)
def _gather_nd_k(plan, data, indices):
    return _gather_nd(plan, data, indices, int(plan.attr("batch_dims", 0)))


_REDUCE = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduction(plan):
    r = plan.attr("reduction", "none")
    r = r.decode() if isinstance(r, bytes) else str(r)
    if r != "none" and r not in _REDUCE:
        raise UnsupportedOpError(f"{plan.where}: reduction '{r}' is not one of none, add, mul, max, min")
    return r


@kernel("ScatterElements", BOTH, prepare=_plan)
def _scatter_elements(plan, data, indices, updates):
    ax = int(plan.attr("axis", 0)) % data.ndim
    out = np.array(data, copy=True)
    idx = _wrap(plan, indices, data.shape[ax])
    red = _reduction(plan)
    for pos in np.ndindex(*idx.shape):
        tgt = list(pos)
        tgt[ax] = idx[pos]
        tgt = tuple(tgt)
        out[tgt] = updates[pos] if red == "none" else _REDUCE[red](out[tgt], updates[pos])
    return out


@kernel("ScatterND", BOTH, prepare=_plan)
def _scatter_nd(plan, data, indices, updates):
    out = np.array(data, copy=True)
    idx = np.asarray(indices, np.int64)
    k = idx.shape[-1]
    red = _reduction(plan)
    flat = idx.reshape(-1, k)
    upd = np.asarray(updates).reshape((flat.shape[0],) + data.shape[k:])
    for i, t in enumerate(flat):
        tgt = tuple(int(_wrap(plan, t[j], data.shape[j])) for j in range(k))
        out[tgt] = upd[i] if red == "none" else _REDUCE[red](out[tgt], upd[i])
    return out


# -- selection ---------------------------------------------------------------------------------

@kernel("Trilu", BOTH, prepare=_plan)
def _trilu(plan, x, k=None):
    kk = 0 if k is None else int(np.asarray(k).ravel()[0])
    if x.ndim < 2:
        raise InputError(f"{plan.where}: Trilu needs a tensor of rank >= 2")
    rows, cols = x.shape[-2:]
    keep = np.triu(np.ones((rows, cols), bool), kk) if int(plan.attr("upper", 1)) else \
        np.tril(np.ones((rows, cols), bool), kk)
    return np.where(keep, x, np.zeros((), x.dtype))


@kernel("TopK", BOTH, prepare=_plan)
def _topk(plan, x, k):
    kk = int(np.asarray(k).ravel()[0])
    ax = int(plan.attr("axis", -1)) % x.ndim
    if not 0 <= kk <= x.shape[ax]:
        raise InputError(f"{plan.where}: k = {kk} outside 0..{x.shape[ax]}")
    largest = int(plan.attr("largest", 1))
    # equal values keep the lower index first (ONNX); a stable sort of -x does that for largest
    key = -x.astype(np.float64 if x.dtype.kind == "f" else np.int64) if largest else x
    order = np.argsort(key, axis=ax, kind="stable")
    idx = np.take(order, np.arange(kk), axis=ax)
    dts = plan.out_dtypes
    idt = np.dtype(dts[1]) if len(dts) > 1 and dts[1] and np.dtype(dts[1]).kind in "iu" else np.int64
    return np.take_along_axis(x, idx, axis=ax), idx.astype(idt)  # TFLite TOPK_V2: int32 indices


@kernel("Compress", BOTH, prepare=_plan)
def _compress(plan, x, condition):
    cond = np.asarray(condition).astype(bool).ravel()
    ax = plan.attr("axis")
    if ax is None:
        return np.compress(cond, x.ravel())  # a shorter condition selects from the leading elements
    return np.compress(cond, x, axis=int(ax) % x.ndim)


@kernel("ReverseSequence", BOTH, prepare=_plan)
def _reverse_sequence(plan, x, sequence_lens):
    bax, tax = int(plan.attr("batch_axis", 1)), int(plan.attr("time_axis", 0))
    out = np.array(x, copy=True)
    for b, n in enumerate(np.asarray(sequence_lens).astype(np.int64).ravel()):
        src = [slice(None)] * x.ndim
        src[bax] = b
        src[tax] = slice(0, int(n))
        dst = list(src)
        dst[tax] = slice(int(n) - 1, None, -1) if n > 0 else slice(0, 0)
        out[tuple(src)] = x[tuple(dst)]
    return out


# -- arithmetic (float only) ---------------------------------------------------------------------

def _scan(plan, x, axis, fn, identity):
    ax = int(np.asarray(axis).ravel()[0]) % max(x.ndim, 1)
    y = np.flip(x, ax) if int(plan.attr("reverse", 0)) else x
    c = fn(y, axis=ax, dtype=x.dtype)  # running sum / product in the input type, in axis order
    if int(plan.attr("exclusive", 0)):
        first = np.full_like(np.take(c, [0], axis=ax), identity)
        c = np.concatenate([first, np.take(c, np.arange(c.shape[ax] - 1), axis=ax)], axis=ax)
    return np.flip(c, ax) if int(plan.attr("reverse", 0)) else c


@kernel("CumSum", "float", prepare=_plan)
def _cumsum(plan, x, axis):
    return _scan(plan, x, axis, np.cumsum, 0)


@kernel("CumProd", "float", prepare=_plan)
def _cumprod(plan, x, axis):
    return _scan(plan, x, axis, np.cumprod, 1)


@kernel("Hardmax", "float", prepare=_plan)
def _hardmax(plan, x):
    ax = int(plan.attr("axis", -1)) % x.ndim
    first = np.expand_dims(np.argmax(x, axis=ax), ax)
    out = np.zeros_like(x)
    np.put_along_axis(out, first, 1, axis=ax)
    return out


@kernel("MeanVarianceNormalization", "float", prepare=_plan)
def _mvn(plan, x):
    axes = tuple(ints(plan.attr("axes")) or (0, 2, 3))
    mean = np.mean(x, axis=axes, keepdims=True)
    std = np.sqrt(np.mean(np.square(x), axis=axes, keepdims=True) - np.square(mean))
    return ((x - mean) / (std + 1e-9)).astype(x.dtype)


# -- TFLite generators and helpers (no ONNX counterpart with the same inputs) ---------------------

@kernel("Fill", BOTH, prepare=_plan)
def _fill(plan, dims, value):
    v = np.asarray(value)
    return np.full(ints(dims), v.reshape(-1)[0], dtype=v.dtype)


@kernel("ZerosLike", BOTH, prepare=_plan)
def _zeros_like(plan, x):
    return np.zeros_like(x)


@kernel("Reverse", BOTH, prepare=_plan)
def _reverse(plan, x, axes):
    return np.flip(x, axis=tuple(a % x.ndim for a in ints(axes))).copy()


@kernel("BroadcastArgs", BOTH, prepare=_plan)
def _broadcast_args(plan, s0, s1):
    return np.asarray(np.broadcast_shapes(tuple(ints(s0)), tuple(ints(s1))), dtype=np.asarray(s0).dtype)


@kernel("ArgWhere", BOTH, prepare=_plan)
def _arg_where(plan, x):
    """TFLite WHERE with one input: int64 [count, rank] coordinates of the non-zero (true)
    elements in row-major order."""
    return np.argwhere(np.asarray(x) != 0).astype(np.int64)


@kernel("ScatterNdToShape", BOTH, prepare=_plan)
def _scatter_nd_to_shape(plan, indices, updates, shape):
    """TFLite SCATTER_ND: zeros of ``shape`` (updates' dtype) with each update slice *added* at its
    index (duplicates accumulate, in the updates' dtype: integers wrap).  An index outside
    ``shape`` is refused, as LiteRT's kernel refuses it."""
    out = np.zeros(ints(shape), dtype=np.asarray(updates).dtype)
    idx = np.asarray(indices).astype(np.int64)
    k = idx.shape[-1]
    flat_idx = idx.reshape(-1, k)
    upd = np.asarray(updates).reshape((flat_idx.shape[0],) + out.shape[k:])
    if np.any(flat_idx < 0) or np.any(flat_idx >= np.asarray(out.shape[:k])):
        raise InputError(f"{plan.where}: SCATTER_ND index out of bounds for shape {list(out.shape)}")
    with np.errstate(over="ignore"):
        np.add.at(out, tuple(flat_idx.T), upd)
    return out


@kernel("TensorScatter", BOTH, prepare=_plan)
def _tensor_scatter(plan, past, update, write_indices=None):
    """TensorScatter (opset 24, a KV-cache update): a copy of ``past`` with, per batch b (axis 0),
    update's slices along ``axis`` written at write_indices[b] + s (``mode`` circular: modulo the
    axis length; linear: must fit)."""
    ax = int(plan.attr("axis", -2)) % past.ndim
    mode = str(plan.attr("mode", "linear"))
    if ax == 0 or mode not in ("linear", "circular"):
        raise InputError(f"{plan.where}: axis {ax} / mode '{mode}' is not supported")
    if update.ndim != past.ndim or any(u != p for i, (u, p) in enumerate(zip(update.shape, past.shape)) if i != ax) \
            or update.shape[ax] > past.shape[ax]:
        raise InputError(f"{plan.where}: update {list(update.shape)} does not fit cache {list(past.shape)} "
                         f"along axis {ax}")
    n, size = update.shape[ax], past.shape[ax]
    starts = np.zeros(past.shape[0], np.int64) if write_indices is None else np.asarray(write_indices, np.int64)
    out = np.array(past, copy=True)
    view = np.moveaxis(out, ax, 1)  # [B, size, ...], writes land in ``out``
    for b in range(past.shape[0]):
        pos = starts[b] + np.arange(n)
        if mode == "circular":
            pos = pos % size
        elif n and (pos.min() < 0 or pos.max() >= size):
            raise InputError(f"{plan.where}: write index {int(starts[b])} + {n} overflows the cache of {size}")
        view[b, pos] = np.moveaxis(update[b], ax - 1, 0)
    return out


@kernel("Unique", BOTH, prepare=_plan)
def _unique(plan, x):
    """Unique values (``axis`` absent: of the flattened tensor) or unique slices along ``axis``;
    ``sorted`` 1: ascending, 0: in order of first occurrence.  Outputs Y, first-occurrence indices,
    inverse indices, counts (int64), by position."""
    ax = plan.attr("axis")
    ax = None if ax is None else int(ax) % max(x.ndim, 1)
    y, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True, return_counts=True, axis=ax)
    inverse = np.asarray(inverse).reshape(-1)
    if not int(plan.attr("sorted", 1)):
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        first, counts, inverse = first[order], counts[order], rank[inverse]
        y = np.take(x.reshape(-1) if ax is None else x, first, axis=0 if ax is None else ax)
    i64 = np.int64
    return y, first.astype(i64), inverse.astype(i64), counts.astype(i64)
