"""Single-op quantized TFLite cases for the element-wise / activation / misc conformance tests.

A ``Case`` is one model (built with ``tests/tflite_builder.py``) plus its feeds.  ``Suite`` runs
all its cases through one oracle child per backend (``_int_oracle.run_batch``) and refinterp under
the matching scheme, then reports per case (compared tensors, differing elements, notes).
"""
from __future__ import annotations

import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _int_oracle import Aborted, compare, run_batch  # noqa: E402

from tests.tflite_builder import TFLiteBuilder  # noqa: E402

SCHEMES = {"ref": "tflite-reference", "tflm": "tflite-micro"}


@dataclass
class Case:
    id: str
    model: bytes
    feeds: dict[str, np.ndarray]
    op: str = ""
    backends: tuple[str, ...] = ("ref",)
    expect_abort: dict[str, str] = field(default_factory=dict)  # backend -> reason (strict xfail)


def codes(dtype: str, n16: int = 4099) -> np.ndarray:
    """Every code of an 8-bit type; for int16 a spread incl. both extremes and zero."""
    info = np.iinfo(dtype)
    if info.bits == 8:
        return np.arange(info.min, info.max + 1, dtype=dtype)
    v = np.unique(np.concatenate([np.linspace(info.min, info.max, n16).round(),
                                  [info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max]]))
    return v.astype(dtype)


def rand(rng, shape, dtype) -> np.ndarray:
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


def unary(op: str, dtype: str, qin, qout, x: np.ndarray, options=None, version: int = 1,
          out_dtype: str | None = None, in_dtype: str | None = None) -> tuple[bytes, dict]:
    b = TFLiteBuilder()
    idt = in_dtype or dtype
    i = b.tensor("x", list(x.shape), idt, *(qin or (None, None)))
    o = b.tensor("y", list(x.shape), out_dtype or dtype, *(qout or (None, None)))
    b.op(op, [i], [o], options=options, version=version)
    return b.build([i], [o]), {"x": x.astype(idt)}


def binary(op: str, dtype: str, q1, q2, qo, a: np.ndarray, b_: np.ndarray, options=None,
           version: int = 1) -> tuple[bytes, dict]:
    b = TFLiteBuilder()
    out_shape = list(np.broadcast_shapes(a.shape, b_.shape))
    i1 = b.tensor("a", list(a.shape), dtype, *q1)
    i2 = b.tensor("b", list(b_.shape), dtype, *q2)
    o = b.tensor("y", out_shape, dtype, *qo)
    b.op(op, [i1, i2], [o], options=options, version=version)
    return b.build([i1, i2], [o]), {"a": a.astype(dtype), "b": b_.astype(dtype)}


def run_ours(model: bytes, feeds: dict, scheme: str) -> dict[str, np.ndarray]:
    import refinterp

    with tempfile.TemporaryDirectory(prefix="qcase_") as tmp:
        p = Path(tmp) / "m.tflite"
        p.write_bytes(model)
        sess = refinterp.Session(refinterp.load(str(p)), scheme=scheme)
        return sess.run(feeds, capture="all")


class Suite:
    """Lazily runs every case once per backend; ``check(case_id, backend)`` gives the outcome."""

    def __init__(self, cases: list[Case]) -> None:
        self.cases = {c.id: c for c in cases}
        if len(self.cases) != len(cases):
            raise ValueError("duplicate case ids")
        self._oracle: dict[str, dict[str, object]] = {}

    def params(self) -> list[tuple[str, str]]:
        return [(c.id, be) for c in self.cases.values() for be in c.backends]

    def oracle(self, backend: str, case_id: str):
        if backend not in self._oracle:
            todo = [c for c in self.cases.values() if backend in c.backends]
            res = run_batch([(c.model, c.feeds) for c in todo], backend)
            self._oracle[backend] = {c.id: r for c, r in zip(todo, res)}
        return self._oracle[backend][case_id]

    def check(self, case_id: str, backend: str) -> tuple[int, int, list[str]]:
        """(tensors compared, differing elements, notes); raises ``OracleAbort`` on an abort."""
        c = self.cases[case_id]
        o = self.oracle(backend, case_id)
        if isinstance(o, Aborted):
            raise OracleAbort(o.message)
        ours = run_ours(c.model, c.feeds, SCHEMES[backend])
        return compare(o, ours)


class OracleAbort(RuntimeError):
    pass


def assert_case(suite: Suite, case_id: str, backend: str, min_tensors: int = 2) -> None:
    """0 differing elements on every compared tensor; an expected oracle failure is a strict xfail
    (the test fails if the oracle unexpectedly runs the model)."""
    import pytest

    reason = suite.cases[case_id].expect_abort.get(backend)
    if reason:
        with pytest.raises(OracleAbort):
            suite.check(case_id, backend)
        pytest.xfail(f"oracle gap (finding): {reason}")
    try:
        tensors, diff, notes = suite.check(case_id, backend)
    except OracleAbort as e:
        pytest.fail(f"oracle aborted (finding): {e}")
    assert tensors >= min_tensors, notes
    assert diff == 0, notes
