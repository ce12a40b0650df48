"""Results of a diff: one ``TensorResult`` per model tensor (execution order) plus the summary."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .metrics import Metrics

# status values
EXACT, WITHIN, DIVERGED, MISSING, UNALIGNED = "exact", "within", "diverged", "missing", "unaligned"
UNMODELLED = "unmodelled"  # produced by a node the scheme does not model: not compared (compare/engine.py)
PASSING = (EXACT, WITHIN)


@dataclass
class TensorResult:
    name: str
    op: str  # canonical op of the producer, "Input" for graph inputs
    node: str | None
    index: int | None  # producer's execution index (None for graph inputs)
    status: str
    dtype: str = ""
    shape: list[int] | None = None
    quantized: bool = False
    scale: float | None = None  # first scale (per-channel tensors: channel 0, as QuantizationDebugger)
    zero_point: int | None = None
    tensor_index: int | None = None  # TFLite tensor index when known
    dump_name: str | None = None
    match: str | None = None  # exact / sanitised / mapping
    notes: list[str] = field(default_factory=list)
    tolerance: dict[str, Any] = field(default_factory=dict)
    metrics: Metrics | None = None
    local: Metrics | None = None
    local_status: str | None = None  # exact / within / diverged / None (not re-runnable)
    local_expect: str = "tolerance"  # "exact" for data movement with unchanged quantization
    explanation: dict[str, Any] | None = None  # ``--explain``: which arithmetic reproduces the tensor

    @property
    def cause(self) -> str | None:
        if self.status != DIVERGED:
            return None
        if self.local_status is None:
            return "unknown"
        return "local" if self.local_status == DIVERGED else "inherited"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "op": self.op, "node": self.node, "index": self.index, "status": self.status,
            "cause": self.cause, "dtype": self.dtype, "shape": self.shape, "quantized": self.quantized,
            "scale": self.scale, "zero_point": self.zero_point, "tensor_index": self.tensor_index,
            "dump_name": self.dump_name, "match": self.match, "notes": self.notes,
            "tolerance": self.tolerance,
            "metrics": self.metrics.to_json() if self.metrics else None,
            "local_status": self.local_status, "local_expect": self.local_expect,
            "local_metrics": self.local.to_json() if self.local else None,
            **({"explanation": self.explanation} if self.explanation is not None else {}),
        }


@dataclass
class DiffResult:
    model: str | None
    model_format: str
    scheme: dict[str, Any]
    refinterp_version: str
    dump: dict[str, Any]
    num_samples: int
    policy: dict[str, Any]
    tensors: list[TensorResult]
    dump_only: list[str] = field(default_factory=list)
    ambiguous: list[str] = field(default_factory=list)
    input_checks: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    explanation: dict[str, Any] | None = None  # ``--explain`` summary (compare.explain.Explanation.to_json)

    @property
    def first_divergence(self) -> TensorResult | None:
        return next((t for t in self.tensors if t.status == DIVERGED), None)

    @property
    def first_local_divergence(self) -> TensorResult | None:
        return next((t for t in self.tensors if t.local_status == DIVERGED), None)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.status] = out.get(t.status, 0) + 1
        return out

    @property
    def passed(self) -> bool:
        return all(t.status in PASSING or t.status in (MISSING, UNMODELLED) for t in self.tensors)

    def stamp(self) -> dict[str, Any]:
        return {"scheme": self.scheme, "refinterp_version": self.refinterp_version}

    def to_json(self) -> dict[str, Any]:
        fd, fl = self.first_divergence, self.first_local_divergence
        return {
            "refinterp_version": self.refinterp_version,
            "scheme": self.scheme,
            "model": {"path": self.model, "format": self.model_format},
            "dump": self.dump,
            "samples": self.num_samples,
            "policy": self.policy,
            "first_divergence": fd.name if fd else None,
            "first_local_divergence": fl.name if fl else None,
            "passed": self.passed,
            "counts": self.counts(),
            "input_checks": self.input_checks,
            "dump_only": self.dump_only,
            "ambiguous": self.ambiguous,
            "notes": self.notes,
            **({"best_scheme": self.explanation["best_scheme"], "explain": self.explanation}
               if self.explanation is not None else {}),
            "tensors": [t.to_json() for t in self.tensors],
        }
