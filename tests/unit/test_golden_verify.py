"""--verify on make: whole-model fallback for ops without a one-op writer; child aborts are contained."""
from __future__ import annotations

from pathlib import Path

import pytest

from refinterp.cli.main import main
from refinterp.golden import sweep_cases
from refinterp.golden.case import list_cases, read_case

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"


def test_make_verify_ops_zoo_all_match(tmp_path, capsys):
    pytest.importorskip("ai_edge_litert")
    out = tmp_path / "zoo"
    rc = main(["golden", "make", str(FIX / "ops_zoo_int8.tflite"), "--scheme", "tflite-reference", "--out",
               str(out), "--verify", "litert-ref", "--quiet"])
    text = capsys.readouterr().out
    assert rc == 0, text
    cases = [read_case(p) for p in list_cases(out)]
    methods = {c.meta["provenance"]["verified_against"]["method"].split(",")[0] for c in cases}
    assert methods == {"one-op model per case", "whole-model run"}
    assert all(c.meta["provenance"]["bit_exact"] is True for c in cases), text


def test_make_verify_reports_what_litert_cannot_run(tmp_path, capsys):
    """BUILTIN_REF has no int8 DEPTH_TO_SPACE v2: those cases are reported, not marked bit-exact."""
    pytest.importorskip("ai_edge_litert")
    out = tmp_path / "ds"
    rc = main(["golden", "make", str(FIX / "depth_space_int8.tflite"), "--scheme", "tflite-reference", "--out",
               str(out), "--verify", "litert-ref", "--quiet"])
    text = capsys.readouterr().out
    assert rc == 0
    bits = {read_case(p).meta["source_op"]: read_case(p).meta["provenance"]["bit_exact"] for p in list_cases(out)}
    assert bits["CONV_2D"] is True and bits["DEPTH_TO_SPACE"] is None
    assert "NOT VERIFIED" in text and "DEPTH_TO_SPACE" in text


def test_child_abort_is_contained(tmp_path, monkeypatch):
    pytest.importorskip("ai_edge_litert")
    from refinterp.golden import verify

    fake = tmp_path / "crashing_child.py"
    fake.write_text(
        "import os, sys\nfrom pathlib import Path\nfrom refinterp.golden import litert_child as m\n"
        "real = m.run_one\n"
        "def run_one(model, feeds, keep_all=False):\n"
        "    if (Path(sys.argv[1]) / 'current.txt').read_text() == '1':\n"
        "        os.abort()\n"
        "    return real(model, feeds, keep_all)\n"
        "m.run_one = run_one\nsys.exit(m.main(sys.argv[1]))\n")
    monkeypatch.setattr(verify, "CHILD_ARGS", [str(fake)])
    cases = sweep_cases("MUL", "tflite-reference", 4)
    counts = verify.verify_cases(cases)
    assert counts["match"] == 3 and counts["error"] == 1
    v = cases[1].meta["provenance"]["verified_against"]
    assert v["result"] == "error" and "killed by SIGABRT" in v["detail"]
    assert cases[1].meta["provenance"]["bit_exact"] is None


@pytest.mark.parametrize("dtype", ["int8", "int16"])
def test_sweeps_verified_against_tflite_micro(dtype):
    """tflite-micro scheme sweeps re-run by the TFLM interpreter (one-op models, child process)."""
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("tflite_micro")
    from refinterp.golden import sweep_ops
    from refinterp.golden.verify import verify_cases

    cases = []
    for op in sweep_ops():
        cases += sweep_cases(op, "tflite-micro", 10, seed=4, dtype=dtype)
    counts = verify_cases(cases, "tflm")
    assert cases[0].meta["provenance"]["verified_against"]["runtime"] == "tflite-micro"
    bad = [(c.name, c.meta["provenance"]["verified_against"].get("detail")) for c in cases
           if c.meta["provenance"]["bit_exact"] is not True]
    assert bad == [] and counts["match"] == len(cases)


def test_make_verify_tflm(tmp_path, capsys):
    pytest.importorskip("ai_edge_litert")
    pytest.importorskip("tflite_micro")
    rc = main(["golden", "make", str(FIX / "mobilenet_tiny_int16x8.tflite"), "--scheme", "tflite-micro", "--out",
               str(tmp_path / "m"), "--verify", "tflm", "--quiet"])
    assert rc == 0 and "32 match, 0 mismatch" in capsys.readouterr().out
