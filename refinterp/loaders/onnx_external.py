"""ONNX external data: validated before a single byte is read.

A tensor stored outside the model must live in a regular file inside the model's own folder:
absolute locations, ``..`` components and symlinks resolving outside the folder are refused
(ModelError naming the model file and the offending location).  The data is then read here with
the recorded offset/length; onnx's own loader never follows the locations.
"""
from __future__ import annotations

import os
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Iterator

from onnx import AttributeProto, GraphProto, ModelProto, TensorProto

from ..errors import ModelError
from ..limits import check_alloc


def _graph_tensors(g: GraphProto) -> Iterator[TensorProto]:
    yield from g.initializer
    for sp in g.sparse_initializer:
        yield sp.values
        yield sp.indices
    for n in g.node:
        for a in n.attribute:
            if a.type == AttributeProto.TENSOR:
                yield a.t
            elif a.type == AttributeProto.TENSORS:
                yield from a.tensors
            elif a.type == AttributeProto.SPARSE_TENSOR:
                yield a.sparse_tensor.values
                yield a.sparse_tensor.indices
            elif a.type == AttributeProto.GRAPH:
                yield from _graph_tensors(a.g)
            elif a.type == AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from _graph_tensors(sub)


def external_tensors(model: ModelProto) -> list[TensorProto]:
    return [t for t in _graph_tensors(model.graph) if t.data_location == TensorProto.EXTERNAL]


def _check_location(location: str, base: Path, where: str, tensor: str) -> Path:
    bad = f"tensor '{tensor}': external data location '{location}'"
    if not location:
        raise ModelError(f"{bad} is empty", where)
    if "\x00" in location:
        raise ModelError(f"{bad} contains a NUL byte", where)
    if PurePosixPath(location).is_absolute() or PureWindowsPath(location).is_absolute() \
            or PureWindowsPath(location).drive:
        raise ModelError(f"{bad} is an absolute path; only files inside the model's folder are allowed",
                         where)
    parts = location.replace("\\", "/").split("/")
    if ".." in parts:
        raise ModelError(f"{bad} contains '..'; only files inside the model's folder are allowed", where)
    root = base.resolve()
    candidate = base / location
    resolved = candidate.resolve()
    if resolved != root and root not in resolved.parents:
        raise ModelError(f"{bad} resolves outside the model's folder (to {resolved}); symlinks leaving "
                         f"the folder are refused", where)
    if not os.path.lexists(candidate):
        raise ModelError(f"{bad}: no such file", where)
    if not resolved.is_file():
        raise ModelError(f"{bad} is not a regular file", where)
    return resolved


def load_external(model: ModelProto, base: Path | None, where: str) -> None:
    """Validate every external location, then read the bytes into ``raw_data`` (in place)."""
    tensors = external_tensors(model)
    if not tensors:
        return
    if base is None:
        raise ModelError("the model refers to external data but has no folder to read it from "
                         "(save it to a file first)", where)
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        path = _check_location(location, base, where, t.name)
        try:
            offset = int(info.get("offset", "0") or 0)
            length = int(info["length"]) if info.get("length") else -1
        except ValueError:
            raise ModelError(f"tensor '{t.name}': external data offset/length are not integers",
                             where) from None
        size = path.stat().st_size
        if offset < 0 or offset > size or (length >= 0 and offset + length > size):
            raise ModelError(f"tensor '{t.name}': external data range (offset {offset}, length {length}) "
                             f"lies outside '{location}' ({size} bytes)", where)
        check_alloc(size - offset if length < 0 else length, 1, f"tensor '{t.name}': external data", where)
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read() if length < 0 else f.read(length)
        t.raw_data = data
        del t.external_data[:]
        t.data_location = TensorProto.DEFAULT
