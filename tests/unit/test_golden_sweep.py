"""golden sweep: the axes are really swept, cases re-check, and LiteRT's reference kernels agree."""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

import refinterp
from refinterp.cli.main import main
from refinterp.errors import GoldenError
from refinterp.golden import check_dir, sweep_cases, sweep_ops, write_cases
from refinterp.golden.case import list_cases, read_case

REQUIRED = ["CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "ADD", "MUL", "AVERAGE_POOL_2D", "SOFTMAX",
            "LOGISTIC"]


def test_required_ops_present():
    from refinterp.cli.golden_cmd import SWEEP_OPS

    assert set(REQUIRED) <= set(sweep_ops())
    assert list(SWEEP_OPS) == sweep_ops()


@pytest.mark.parametrize("dtype", ["int8", "int16"])
@pytest.mark.parametrize("op", sweep_ops())
def test_sweep_checks_and_is_deterministic(op, dtype, tmp_path):
    a = sweep_cases(op, "tflite-reference", 14, seed=5, dtype=dtype)
    b = sweep_cases(op, "tflite-reference", 14, seed=5, dtype=dtype)
    for x, y in zip(a, b):
        assert x.meta["name"] == y.meta["name"]
        for k in x.arrays:
            np.testing.assert_array_equal(x.arrays[k], y.arrays[k])
    write_cases(tmp_path / op, a)
    assert all(r.ok for r in check_dir(tmp_path / op))
    scen = [c.meta["provenance"]["sweep"]["axes"]["scenario"] for c in a]
    assert len(set(scen)) >= 8


def test_check_under_another_scheme(tmp_path):
    """check --scheme S re-runs cases made under another scheme: a case passes iff S gives its outputs.
    16x8 FULLY_CONNECTED requantizes differently in LiteRT (float64) and TFLM (fixed point)."""
    ref = sweep_cases("FULLY_CONNECTED", "tflite-reference", 12, seed=2, dtype="int16")
    micro = sweep_cases("FULLY_CONNECTED", "tflite-micro", 12, seed=2, dtype="int16")
    write_cases(tmp_path / "ref", ref)
    results = check_dir(tmp_path / "ref", scheme="tflite-micro")
    for r, a, b in zip(results, ref, micro):
        same = np.array_equal(a.arrays["output.0"], b.arrays["output.0"])
        assert r.ok == same, (r.case, r.message)
        assert same or "first difference at index" in r.message
    assert any(not r.ok for r in results) and any(r.ok for r in results)


def test_sweep_axes_are_exercised():
    conv = sweep_cases("CONV_2D", "tflite-reference", 16)
    axes = [c.meta["provenance"]["sweep"]["axes"] for c in conv]
    assert {a["input_zero_point"] for a in axes} >= {-128, 127}
    assert {a["padding"] for a in axes} == {"SAME_UPPER", "VALID"}
    assert {2, 3} <= {a["strides"][0] for a in axes} and 2 in {a["dilations"][0] for a in axes}
    assert any(a["cin"] % 2 for a in axes) and {"RELU", "RELU6"} <= {a["activation"] for a in axes}
    by = {a["scenario"]: c for a, c in zip(axes, conv)}
    y = by["scale_huge"].arrays["output.0"]
    assert np.isin(y, [-128, 127]).mean() > 0.5  # saturation: most outputs hit the clamp
    tiny = by["scale_tiny"]
    assert np.all(tiny.arrays["output.0"] == tiny.meta["outputs"][0]["quant"]["zero_point"][0])
    plan_shift = by["ties"].meta["plan"]["shift"]
    assert all(isinstance(s, int) for s in plan_shift)
    logi = [c for c in sweep_cases("LOGISTIC", "tflite-reference", 1)][0]
    assert sorted(logi.arrays["input.0"].ravel().tolist()) == list(range(-128, 128))


def test_unknown_op_and_bad_count():
    with pytest.raises(GoldenError, match="no sweep for op 'CONCAT'"):
        sweep_cases("CONCAT", "tflite-reference", 2)
    with pytest.raises(GoldenError):
        sweep_cases("ADD", "tflite-reference", 0)
    with pytest.raises(GoldenError, match="--dtype"):
        sweep_cases("ADD", "tflite-reference", 2, dtype="uint8")


def test_writer_round_trips_through_the_loader():
    """The one-op TFLite written for --verify loads back with the same canonical attributes."""
    pytest.importorskip("ai_edge_litert")
    from refinterp.golden.tflite_writer import case_to_tflite

    for op in sweep_ops():
        for c in sweep_cases(op, "tflite-reference", 6):
            data, feeds, outs = case_to_tflite(c)
            with tempfile.NamedTemporaryFile(suffix=".tflite") as f:
                f.write(data)
                f.flush()
                g = refinterp.load(f.name)
            assert g.nodes[0].op == c.meta["op"]
            assert g.nodes[0].attrs == c.meta["attrs"], (op, c.name)


@pytest.mark.parametrize("dtype,count", [("int8", 16), ("int16", 12)])
def test_sweeps_verified_against_litert_reference(dtype, count):
    """Every sweep op re-run by LiteRT BUILTIN_REF (one-op models, child process): 0 mismatches."""
    pytest.importorskip("ai_edge_litert")
    from refinterp.golden.verify import verify_cases

    cases = []
    for op in sweep_ops():
        cases += sweep_cases(op, "tflite-reference", count, seed=11, dtype=dtype)
    assert all(c.arrays["output.0"].dtype == np.dtype(dtype) for c in cases)
    counts = verify_cases(cases)
    bad = [(c.name, c.meta["provenance"]["verified_against"]) for c in cases
           if c.meta["provenance"]["bit_exact"] is not True]
    assert bad == [] and counts["match"] == len(cases)


def test_cli_sweep_with_verify_and_flagged_mismatch(tmp_path, capsys):
    pytest.importorskip("ai_edge_litert")
    from refinterp.golden.verify import verify_cases

    out = tmp_path / "s"
    assert main(["golden", "sweep", "--op", "ADD", "--scheme", "tflite-reference", "--count", "5", "--out",
                 str(out), "--verify", "litert-ref", "--quiet"]) == 0
    assert "5 match, 0 mismatch" in capsys.readouterr().out
    case = read_case(list_cases(out)[2])
    prov = case.meta["provenance"]
    assert prov["bit_exact"] is True and prov["verified_against"]["resolver"] == "BUILTIN_REF"
    assert prov["sweep"]["axes"]["scenario"] == "zp_max"
    # a golden that disagrees with the runtime is flagged, with LiteRT's own output kept next to it
    case.arrays["output.0"].flat[0] ^= 1
    verify_cases([case])
    prov = case.meta["provenance"]
    assert prov["bit_exact"] is False and prov["verified_against"]["result"] == "mismatch"
    assert "first difference at index" in prov["verified_against"]["detail"]
    assert "runtime.output.0" in case.arrays


def test_make_verify_flags_float_model_mismatches(tmp_path, capsys):
    """Float kernels are not bit-exact with LiteRT: those cases must be flagged, and exit 1."""
    pytest.importorskip("ai_edge_litert")
    fix = Path(__file__).resolve().parents[1] / "fixtures" / "tflite" / "small_cnn_float32.tflite"
    rc = main(["golden", "make", str(fix), "--scheme", "float32", "--out", str(tmp_path / "f"),
               "--verify", "litert-ref", "--quiet", "--ops", "CONV_2D,MAX_POOL_2D"])
    out = capsys.readouterr().out
    flagged = [read_case(p) for p in list_cases(tmp_path / "f")]
    bits = {c.meta["source_op"]: c.meta["provenance"]["bit_exact"] for c in flagged}
    assert bits["MAX_POOL_2D"] is True
    if any(b is False for b in bits.values()):
        assert rc == 1 and "MISMATCH" in out
    else:
        assert rc == 0
