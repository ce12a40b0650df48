"""Sparse TFLite constants (``Tensor.sparsity``, the input of DENSIFY): decoded to dense at load.

TFLite's sparse format (schema ``SparsityParameters``; LiteRT ``internal/utils/sparsity_format_converter``):
the tensor's declared shape is the dense shape; ``traversal_order`` lists the storage order of the
``rank`` dense dimensions followed by ``len(block_map)`` block dimensions (block ``b`` splits dense
dimension ``block_map[b]`` into blocks of ``dim_metadata[rank + b].dense_size``); each storage level is
DENSE (``dense_size`` positions) or SPARSE_CSR (``array_segments`` / ``array_indices``: the positions of
the stored entries under each parent).  The buffer holds the stored values in traversal order; every
position not stored is 0.  Sizes are checked against the buffer before any allocation.
"""
from __future__ import annotations

from typing import Any

import numpy as np

import tflite

from ..errors import ModelError

_INDEX_VECTORS = {1: tflite.Int32Vector, 2: tflite.Uint16Vector, 3: tflite.Uint8Vector}  # SparseIndexVector


def _index_vector(kind: int, tab: Any, what: str, where: str) -> np.ndarray:
    cls = _INDEX_VECTORS.get(int(kind))
    if cls is None or tab is None:
        raise ModelError(f"{what}: sparse index vector of unknown type {kind}", where)
    v = cls()
    v.Init(tab.Bytes, tab.Pos)
    a = v.ValuesAsNumpy()
    return np.asarray(a if isinstance(a, np.ndarray) else [], np.int64)


def parse(sp: Any, rank: int, what: str, where: str) -> dict:
    order = [int(v) for v in np.asarray(sp.TraversalOrderAsNumpy()).ravel()] if not sp.TraversalOrderIsNone() \
        else list(range(rank))
    block_map = [int(v) for v in np.asarray(sp.BlockMapAsNumpy()).ravel()] if not sp.BlockMapIsNone() else []
    levels = []
    for k in range(sp.DimMetadataLength()):
        dm = sp.DimMetadata(k)
        if int(dm.Format()) == 0:
            levels.append(("dense", int(dm.DenseSize()), None, None))
        else:
            seg = _index_vector(dm.ArraySegmentsType(), dm.ArraySegments(), what, where)
            idx = _index_vector(dm.ArrayIndicesType(), dm.ArrayIndices(), what, where)
            levels.append(("csr", 0, seg, idx))
    if len(order) != rank + len(block_map) or len(levels) != len(order) or sorted(order) != list(range(len(order))):
        raise ModelError(f"{what}: inconsistent sparsity parameters (traversal order {order}, "
                         f"{len(block_map)} blocks, {len(levels)} dimension levels)", where)
    return {"order": order, "block_map": block_map, "levels": levels}


def densify(values: np.ndarray, shape: tuple[int, ...], params: dict, what: str, where: str) -> np.ndarray:
    """The dense array of ``shape`` that the stored ``values`` (traversal order) describe."""
    order, block_map, levels = params["order"], params["block_map"], params["levels"]
    rank = len(shape)
    # block sizes of the blocked dims; the level of dim d (dense or block) in storage order
    block_size = {block_map[b]: levels[order.index(rank + b)][1] for b in range(len(block_map))}
    out = np.zeros(int(np.prod(shape, dtype=np.int64)), values.dtype)
    coord = [0] * len(order)  # per storage dim (dense dims 0..rank-1, then block dims)
    stride = np.cumprod((list(shape[1:]) + [1])[::-1])[::-1]  # C-order strides of the dense shape
    counter = [0]

    def emit() -> None:
        if counter[0] >= values.size:
            raise ModelError(f"{what}: sparse tensor stores fewer values than its index arrays address", where)
        pos = 0
        for d in range(rank):
            c = coord[d]
            if d in block_size:
                c = c * block_size[d] + coord[rank + block_map.index(d)]
            if c >= shape[d]:
                raise ModelError(f"{what}: sparse index {c} outside dimension {d} of {list(shape)}", where)
            pos += c * int(stride[d])
        out[pos] = values[counter[0]]
        counter[0] += 1

    def walk(level: int, parent: int) -> None:
        if level == len(order):
            emit()
            return
        kind, size, seg, idx = levels[level]
        dim = order[level]
        if kind == "dense":
            for i in range(size):
                coord[dim] = i
                walk(level + 1, parent * size + i)
        else:
            if parent + 1 >= seg.size:
                raise ModelError(f"{what}: sparse segment array too short", where)
            for j in range(int(seg[parent]), int(seg[parent + 1])):
                if j >= idx.size:
                    raise ModelError(f"{what}: sparse index array too short", where)
                coord[dim] = int(idx[j])
                walk(level + 1, j)

    walk(0, 0)
    if counter[0] != values.size:
        raise ModelError(f"{what}: sparse tensor stores {values.size} values, its indices address {counter[0]}",
                         where)
    return out.reshape(shape)
