"""The device's side of a diff: a dump's tensors matched to the model's, fitted to their shapes, and handed to
the Session as stored values (inputs of a node's local re-run; anchors for the nodes the scheme does not model)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..dumps.model import Dump
from ..ir import Graph, TensorInfo
from .align import fit_shape, model_layout
from .convert import is_int, to_stored


def resolve_index_names(dump: Dump, graph: Graph) -> None:
    """Dumps that name tensors by TFLite tensor index (``#<index>``) get the model's names."""
    from ..dumps.tflm import INDEX_NAMES

    if dump.meta.get("names") != INDEX_NAMES:
        return
    by_index = {t.index: n for n, t in graph.tensors.items() if t.index is not None}
    renamed = {}
    for name, t in dump.tensors.items():
        model_name = by_index.get(int(name[1:])) if name[1:].isdigit() else None
        t.name = model_name or name
        renamed[t.name] = t
    dump.tensors = renamed
    dump.meta["names"] = "resolved"


def decode_raw(dt, info: TensorInfo | None, target: tuple[int, ...]) -> None:
    """Undecoded bytes -> values: float32 (the usual device default) when the byte count allows it,
    else the model's storage dtype (native output files)."""
    size = max(int(np.prod(target)) if target else 1, 1)
    nbytes = dt.samples[0].size
    model_dt = np.dtype(info.dtype) if info is not None else np.dtype(np.float32)
    if nbytes == size * model_dt.itemsize and model_dt.itemsize != 4:
        use = model_dt
    elif nbytes % (4 * size) == 0:
        use = np.dtype(np.float32)
    elif nbytes % (model_dt.itemsize * size) == 0:
        use = model_dt
    else:
        use = np.dtype(np.float32) if nbytes % 4 == 0 else np.dtype(np.uint8)
    use = np.dtype(use).newbyteorder("<")
    dt.samples = [np.frombuffer(s.tobytes(), use).astype(use.newbyteorder("=")) for s in dt.samples]
    dt.raw = False


class Alignment:
    """The dump's tensors matched to model tensors and fitted to their shapes (per sample)."""

    def __init__(self, graph: Graph, dump: Dump, nm) -> None:
        self.graph, self.dump, self.nm = graph, dump, nm
        self.aligned: dict[str, list[np.ndarray]] = {}
        self.notes: dict[str, list[str]] = {}
        self.unaligned: set[str] = set()
        self.dev_qp: dict[str, Any] = {}

    def dump_tensor(self, name: str):
        return self.dump.tensors[self.nm.pairs[name][0]]

    def align(self, name: str, target: tuple[int, ...]) -> None:
        dt = self.dump_tensor(name)
        if dt.raw:
            decode_raw(dt, self.graph.tensors.get(name), target)
        shaped = fit_shape(dt.samples, target, model_layout(self.graph, name, len(target)), dt.layout)
        if shaped is None:
            self.unaligned.add(name)
            self.notes[name] = [f"dump shape {list(dt.shape)} does not fit model shape {list(target)}"]
            return
        self.aligned[name] = shaped.samples
        self.notes[name] = shaped.notes + ([shaped.layout_note] if shaped.layout_note else [])

    def device(self, name: str, si: int) -> np.ndarray | None:
        """The device's value of ``name`` in sample ``si`` (None: not in the dump / not aligned)."""
        samples = self.aligned.get(name)
        return samples[si] if samples is not None and si < len(samples) else None

    def params(self, name: str, dv: np.ndarray) -> tuple[Any, Any, TensorInfo | None]:
        """(model quant params, device quant params, tensor info) for ``_Acc.add``; stored device
        integers without params of their own use the model's."""
        info = self.graph.tensors.get(name)
        qp = info.quant if info is not None else None
        return qp, self.dev_qp[name] or (qp if is_int(dv) else None), info

    def device_inputs(self, node, si: int) -> list[np.ndarray | None] | None:
        """The node's inputs as the device had them (constants: None, the Session supplies them);
        None when one of them is not in the dump."""
        args: list[np.ndarray | None] = []
        for name in node.inputs:
            info = self.graph.tensors.get(name) if name else None
            if not name or (info is not None and info.const is not None):
                args.append(None)
                continue
            dv = self.device(name, si)
            if dv is None:
                return None
            args.append(to_stored(dv, self.dev_qp[name], info))
        return args

    def stored(self, name: str, si: int) -> np.ndarray | None:
        """The device's value of ``name`` in sample ``si`` in the model's stored form, aligned on first use
        (before the run: to the model's static shape, else the dump's); None when the dump lacks it."""
        info = self.graph.tensors.get(name) if name else None
        if info is None or name not in self.nm.pairs:
            return None
        if name not in self.aligned and name not in self.unaligned:
            static = info.shape is not None and all(d is not None and d >= 0 for d in info.shape)
            self.align(name, tuple(info.shape) if static else tuple(self.dump_tensor(name).data.shape))
        dv = self.device(name, si)
        return None if dv is None else to_stored(dv, self.dev_qp[name], info)


class Anchors(Mapping):
    """The device's values of sample ``si`` as the Session's anchors, converted only when a node asks (a stub,
    or a node whose kernel refuses its inputs when run)."""

    def __init__(self, al: "Alignment", si: int) -> None:
        self.al, self.si, self.cache = al, si, {}

    def __getitem__(self, name: str) -> np.ndarray:
        if name not in self.cache:
            self.cache[name] = self.al.stored(name, self.si)
        if self.cache[name] is None:
            raise KeyError(name)
        return self.cache[name]

    def __contains__(self, name) -> bool:
        try:
            self[name]
        except KeyError:
            return False
        return True

    def __iter__(self):
        return iter(n for n in self.al.nm.pairs if n in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)
