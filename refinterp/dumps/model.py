"""In-memory form of a dump read from disk, whatever its file format.

A dump holds one or more *samples* (inference runs).  Every tensor keeps one array per sample in
``DumpTensor.samples`` (same order for every tensor); ``Dump.num_samples`` is the common count.
Arrays are kept exactly as stored (integer codes stay integers); ``quant`` / ``fix_pos`` say how to
turn integer codes back into reals when the dump carries that information.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import QuantParams


@dataclass
class DumpTensor:
    name: str
    samples: list[np.ndarray]
    layout: str | None = None  # "NHWC" / "NCHW" when the dump says so
    quant: QuantParams | None = None
    fix_pos: int | None = None  # power-of-two fixed point: real = q * 2**-fix_pos
    node: str | None = None  # producing node name, when recorded
    op: str | None = None
    index: int | None = None  # execution index, when recorded
    file: str | None = None
    raw: bool = False  # samples are undecoded bytes (uint8): dtype decided against the model

    @property
    def data(self) -> np.ndarray:
        return self.samples[0]

    @property
    def dtype(self) -> np.dtype:
        return self.samples[0].dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.samples[0].shape)

    def effective_quant(self) -> QuantParams | None:
        """Affine params equivalent to the stored quantization (fix position becomes a scale)."""
        if self.quant is not None:
            return self.quant
        if self.fix_pos is not None:
            return QuantParams(np.float32(2.0 ** -self.fix_pos), 0)
        return None


@dataclass
class Dump:
    path: str
    format: str
    tensors: dict[str, DumpTensor] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def num_samples(self) -> int:
        return min((len(t.samples) for t in self.tensors.values()), default=0)

    def add(self, t: DumpTensor) -> None:
        self.tensors[t.name] = t

    def names(self) -> list[str]:
        return list(self.tensors)


def merge_samples(parts: list[Dump], path: str, fmt: str) -> Dump:
    """One dump per sample (per-sample subfolders/files) -> one dump with several samples.

    A tensor missing from some samples keeps only the samples that have it, in order; the
    comparison then uses as many samples as that tensor has.
    """
    out = Dump(path, fmt, meta={"sample_sources": [p.path for p in parts]})
    for p in parts:
        for name, t in p.tensors.items():
            have = out.tensors.get(name)
            if have is None:
                out.add(DumpTensor(name, list(t.samples), t.layout, t.quant, t.fix_pos, t.node, t.op, t.index,
                                   t.file, t.raw))
            else:
                have.samples.extend(t.samples)
    return out
