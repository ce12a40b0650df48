"""Float32 TFLite models built in code: refinterp (scheme float32) vs LiteRT (default resolver).

Every tensor both produce (outputs and intermediates) must agree within rtol 1e-4 / atol 1e-5;
integer tensors (ARG_MAX, SHAPE) exactly.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from tests.conformance import litert_oracle  # noqa: E402
from tests.conformance.litert_oracle import OracleAborted, run_litert, run_litert_subprocess  # noqa: E402
from tests.conformance.tflite_float_cases import CASES  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

RTOL, ATOL = 1e-4, 1e-5


@pytest.mark.parametrize("resolver", ["default", "opt"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_float_model_matches_litert(name, resolver, tmp_path):
    rng = np.random.default_rng(sum(map(ord, name)))
    b, ins, outs, feeds = CASES[name](rng)
    data = b.build(ins, outs)
    want = run_litert(data, feeds, resolver=resolver)
    if resolver == "default":
        # XNNPACK consumes float16 weights itself: LiteRT never fills the DEQUANTIZE outputs.
        for op in b.operators:
            if b.opcodes[op.opcodeIndex].builtinCode == 6:  # DEQUANTIZE
                for o in op.outputs:
                    want.pop(b.name_of(o), None)
    path = tmp_path / f"{name}.tflite"
    path.write_bytes(data)
    got = refinterp.Session(refinterp.load(path), scheme="float32").run(feeds, capture="all")
    out_names = [b.name_of(i) for i in outs]
    for o in out_names:
        assert o in got, f"refinterp produced no output '{o}'"
    checked = 0
    for tname, g in got.items():
        if tname not in want or tname in feeds:
            continue
        w = want[tname]
        assert g.shape == w.shape, f"{tname}: shape {g.shape} vs LiteRT {w.shape}"
        if w.dtype.kind in "iub":
            np.testing.assert_array_equal(g, w, err_msg=tname)
        else:
            np.testing.assert_allclose(g.astype(np.float32), w, rtol=RTOL, atol=ATOL, err_msg=tname)
        checked += 1
    assert checked >= len(out_names)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"


@pytest.mark.parametrize("fname", ["small_cnn_float32.tflite", "small_cnn_float16w.tflite"])
def test_converter_float_model_matches_litert(fname):
    """Models written by the TFLite converter (fused names, signature tensors, float16 weights)."""
    path = FIXTURES / fname
    g = refinterp.load(path)
    rng = np.random.default_rng(3)
    feeds = {n: rng.uniform(-1, 1, g.tensors[n].shape).astype(np.float32) for n in g.inputs}
    want = run_litert(path.read_bytes(), feeds, resolver="opt")
    got = refinterp.Session(g, scheme="float32").run(feeds, capture="all")
    compared = [n for n in got if n in want]
    assert set(g.outputs) <= set(compared) and len(compared) >= len(g.nodes)
    for n in compared:
        np.testing.assert_allclose(got[n], want[n], rtol=RTOL, atol=ATOL, err_msg=n)


def test_oracle_subprocess_matches_in_process():
    b, ins, outs, feeds = CASES["small_net"](np.random.default_rng(0))
    data = b.build(ins, outs)
    here = run_litert(data, feeds, resolver="opt")
    child = run_litert_subprocess(data, feeds, resolver="ref")
    assert set(here) == set(child)
    np.testing.assert_allclose(child["probs"], here["probs"], rtol=RTOL, atol=ATOL)


def test_oracle_reports_abort_and_prepare_errors(monkeypatch):
    b, ins, outs, feeds = CASES["relu"](np.random.default_rng(0))
    data = b.build(ins, outs)
    monkeypatch.setattr(litert_oracle, "CHILD_CODE", "import os; os.abort()")
    with pytest.raises(OracleAborted, match="SIGABRT"):
        run_litert_subprocess(data, feeds, resolver="ref")
    monkeypatch.undo()
    bad = TFLiteBuilder()
    a, c, y = bad.tensor("a", [2, 3]), bad.tensor("c", [3, 3]), bad.tensor("y", [2, 3])
    bad.op("ADD", [a, c], [y])
    with pytest.raises(OracleAborted, match="not broadcastable"):
        run_litert_subprocess(bad.build([a, c], [y]), {"a": np.zeros((2, 3), np.float32),
                                                        "c": np.zeros((3, 3), np.float32)}, resolver="ref")
