"""Pass/fail policy per tensor.

Quantized integer tensors are judged in LSBs of their own scale (``atol_lsb``, default 0: bit
exact).  Float tensors use Polygraphy's elementwise rule (an element fails when its absolute error
exceeds ``atol`` *and* its relative error exceeds ``rtol``).  Per-tensor overrides are given as
``NAME:VALUE`` (the last ``:`` separates the value, so TFLite names with ``:`` work).

Per-op expectation for the *local* error: data-movement ops copy or select values and must
reproduce the device's own inputs exactly whatever the tolerance, so any local error there is a
divergence.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import InputError

EXACT_OPS = frozenset({
    "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze", "ExpandDims", "Concat", "Split", "Slice",
    "StridedSlice", "Gather", "Identity", "Pad", "Tile", "Expand", "DepthToSpace", "SpaceToDepth", "Pack",
    "Unpack", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "Relu", "Relu6", "ReluN1To1", "Shape",
    "ArgMax", "ArgMin", "Where",
})


def parse_overrides(values: list[str] | None, what: str, cast=float) -> tuple[float | None, dict[str, float]]:
    """``["1", "conv:2"]`` -> (default 1, {"conv": 2})."""
    default = None
    per: dict[str, float] = {}
    for v in values or []:
        name, sep, num = v.rpartition(":")
        try:
            val = cast(num if sep else v)
        except ValueError:
            raise InputError(f"{what}: expected a number or NAME:NUMBER, got '{v}'") from None
        if val < 0:
            raise InputError(f"{what}: tolerance must be >= 0, got '{v}'")
        if sep and name:
            per[name] = val
        else:
            default = val
    return default, per


@dataclass
class Policy:
    atol_lsb: float = 0.0
    atol: float = 1e-5
    rtol: float = 1e-4
    lsb_overrides: dict[str, float] = field(default_factory=dict)
    atol_overrides: dict[str, float] = field(default_factory=dict)
    rtol_overrides: dict[str, float] = field(default_factory=dict)

    def lsb_for(self, name: str) -> float:
        return self.lsb_overrides.get(name, self.atol_lsb)

    def float_for(self, name: str) -> tuple[float, float]:
        return self.atol_overrides.get(name, self.atol), self.rtol_overrides.get(name, self.rtol)

    def describe(self) -> dict:
        return {"atol_lsb": self.atol_lsb, "atol": self.atol, "rtol": self.rtol,
                "overrides": {"atol_lsb": self.lsb_overrides, "atol": self.atol_overrides,
                              "rtol": self.rtol_overrides}}

    @classmethod
    def from_args(cls, atol_lsb=None, atol=None, rtol=None) -> "Policy":
        p = cls()
        d, p.lsb_overrides = parse_overrides(atol_lsb, "--atol-lsb")
        p.atol_lsb = p.atol_lsb if d is None else d
        d, p.atol_overrides = parse_overrides(atol, "--atol")
        p.atol = p.atol if d is None else d
        d, p.rtol_overrides = parse_overrides(rtol, "--rtol")
        p.rtol = p.rtol if d is None else d
        return p
