"""Nodes a backend refuses in Prepare are refused by refinterp's scheme for it when the Session is
built (a clear ModelError / UnsupportedOpError, never a silently computed answer), and nodes the
backend accepts are accepted.  Each case is run through the real runtime in a subprocess; the oracle
must refuse ("raised" in its report, not a signal) exactly when refinterp refuses."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

import refinterp
from refinterp.errors import ModelError, UnsupportedOpError
from tests.conformance._int_cases import SCHEME_OF
from tests.conformance._int_oracle import Aborted, run_batch
from tests.tflite_builder import TFLiteBuilder


def _pool(op: str, sx: float, so: float, zx: int, zo: int, dtype: str = "int8") -> bytes:
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 4, 4, 2), dtype, scale=sx, zero_point=zx)
    y = b.tensor("y", (1, 2, 2, 2), dtype, scale=so, zero_point=zo)
    b.op(op, [x], [y], options=dict(padding="VALID", stride_w=2, stride_h=2, filter_width=2, filter_height=2),
         version=3 if dtype == "int16" else 2)
    return b.build([x], [y])


def _sqdiff(dtype: str) -> bytes:
    b = TFLiteBuilder()
    s = 0.001 if dtype == "int16" else 0.05
    a = b.tensor("a", (1, 8), dtype, scale=s, zero_point=0)
    c = b.tensor("c", (1, 8), dtype, scale=s, zero_point=0)
    y = b.tensor("y", (1, 8), dtype, scale=s * 40, zero_point=0)
    b.op("SQUARED_DIFFERENCE", [a, c], [y])
    return b.build([a, c], [y])


def _prelu(dtype: str, alpha_dtype: str | None = None) -> bytes:
    b = TFLiteBuilder()
    z = 128 if dtype == "uint8" else 0
    x = b.tensor("x", (1, 2, 2, 4), dtype, scale=0.05, zero_point=z)
    al = b.const("alpha", np.full(4, z + 10, alpha_dtype or dtype), scale=0.02, zero_point=z)
    y = b.tensor("y", (1, 2, 2, 4), dtype, scale=0.04, zero_point=z)
    b.op("PRELU", [x, al], [y])
    return b.build([x], [y])


def _add(dtype: str) -> bytes:
    b = TFLiteBuilder()
    a = b.tensor("a", (1, 8), dtype, scale=0.05, zero_point=3)
    c = b.tensor("c", (1, 8), dtype, scale=0.07, zero_point=5)
    y = b.tensor("y", (1, 8), dtype, scale=0.1, zero_point=7)
    b.op("ADD", [a, c], [y], options=dict(fused_activation="NONE"))
    return b.build([a, c], [y])


def _feeds(model: bytes) -> dict[str, np.ndarray]:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.tflite"
        p.write_bytes(model)
        g = refinterp.load(p)
    rng = np.random.default_rng(0)
    return {n: rng.integers(-100, 100, g.tensors[n].shape).astype(g.tensors[n].dtype) for n in g.inputs}


POOL_PARAMS = [(0.05, 0.05, 0, 0), (0.05, 0.05, 0, 3), (0.05, 0.0500005, 0, 0), (0.05, 0.050002, 0, 0),
               (1e-3, 1.0009e-3, 0, 0), (100.0, 100.00001, 0, 0), (0.05, 0.0125, 0, 0)]
CASES = {
    "tflm": [(f"{op}:{dt},sx{sx:g},so{so:g},z{zx}/{zo}", _pool(op, sx, so, zx, zo, dt))
             for op in ("AVERAGE_POOL_2D", "MAX_POOL_2D") for dt in ("int8", "int16")
             for sx, so, zx, zo in POOL_PARAMS if dt == "int8" or zx == zo == 0]
    + [(f"PRELU:{dt}", _prelu(dt)) for dt in ("int8", "uint8")] + [("PRELU:int16,alpha int8", _prelu("int16", "int8"))]
    + [(f"ADD:{dt}", _add(dt)) for dt in ("int8", "uint8")],
    "ref": [(f"SQUARED_DIFFERENCE:{dt}", _sqdiff(dt)) for dt in ("int8", "int16")]
    + [(f"PRELU:{dt}", _prelu(dt)) for dt in ("int8", "uint8")] + [("PRELU:int16,alpha int8", _prelu("int16", "int8")),
                                                                   ("PRELU:int16,alpha int16", _prelu("int16"))]
    + [(f"AVERAGE_POOL_2D:int8,sx0.05,so0.0125", _pool("AVERAGE_POOL_2D", 0.05, 0.0125, 0, 0))],
    "opt": [(f"SQUARED_DIFFERENCE:{dt}", _sqdiff(dt)) for dt in ("int8", "int16")],
}


# Deliberate disagreements: LiteRT runs these, reading a buffer with the wrong element type (an int16
# PRELU alpha read as int8 bytes, checked in test_tflite_int_rails.py's history); refinterp refuses them.
WE_REFUSE = {("ref", "PRELU:int16,alpha int16")}


def _refinterp_refuses(model: bytes, scheme: str) -> str | None:
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.tflite"
        p.write_bytes(model)
        try:
            refinterp.Session(refinterp.load(p), scheme)
        except (ModelError, UnsupportedOpError) as e:
            return str(e)
    return None


@pytest.mark.parametrize("backend", sorted(CASES))
def test_refusals_match_the_backend(backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    cases = CASES[backend]
    oracle = run_batch([(m, _feeds(m)) for _, m in cases], backend)
    wrong, refused = [], 0
    for (cid, model), res in zip(cases, oracle):
        theirs = isinstance(res, Aborted)
        if theirs:
            assert "raised" in res.message, f"{cid}: {backend} oracle died instead of refusing: {res.message}"
        ours = _refinterp_refuses(model, SCHEME_OF[backend])
        refused += theirs
        if (backend, cid) in WE_REFUSE:
            theirs = True
        if theirs != (ours is not None):
            wrong.append(f"{cid}: {backend} {'refuses' if theirs else 'accepts'}, refinterp "
                         f"{'refuses (' + ours + ')' if ours else 'accepts'}")
    print(f"\n{backend}: {len(cases)} cases, {refused} refused by the backend, {len(wrong)} disagreements")
    assert not wrong, " || ".join(wrong)
    assert 0 < refused < len(cases)
