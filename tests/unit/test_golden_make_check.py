"""golden make -> check on converter-made models; failing cases are named with the first difference."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import refinterp
from refinterp.cli.common import random_inputs
from refinterp.cli.main import main
from refinterp.errors import GoldenError
from refinterp.golden import check_dir, make_cases, read_case, write_cases
from refinterp.golden.case import TENSORS_FILE, list_cases

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
MODELS = ["mobilenet_v2_tiny_int8", "mobilenet_tiny_int16x8", "ops_zoo_int8", "attention_block_int8",
          "mobilenet_v3_tiny_int8", "depth_space_int8"]


@pytest.fixture(scope="module")
def mnv2_cases(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("golden") / "mnv2"
    rc = main(["golden", "make", str(FIX / "mobilenet_v2_tiny_int8.tflite"), "--scheme", "tflite-reference",
               "--out", str(out), "--random-inputs", "3", "--quiet"])
    assert rc == 0
    return out


@pytest.mark.parametrize("scheme", ["tflite-reference", "tflite-micro"])
@pytest.mark.parametrize("model", MODELS)
def test_make_then_check_passes(tmp_path, model, scheme):
    g = refinterp.load(FIX / f"{model}.tflite")
    cases = make_cases(g, scheme, random_inputs(g, 1))
    assert len(cases) == len(g.nodes)
    write_cases(tmp_path / "g", cases)
    results = check_dir(tmp_path / "g")
    assert [r.message for r in results if not r.ok] == []
    assert len(results) == len(g.nodes)


def test_case_contents(mnv2_cases):
    folders = list_cases(mnv2_cases)
    assert len(folders) == 32
    c = read_case(folders[0])
    m = c.meta
    assert folders[0].name.startswith("0000_CONV_2D_")
    assert m["op"] == "Conv" and m["source_op"] == "CONV_2D"
    assert m["scheme"]["name"] == "tflite-reference" and m["scheme"]["variant"] == "tflite_ref"
    plan = m["plan"]
    assert len(plan["multiplier"]) == len(plan["shift"]) == c.arrays["input.1"].shape[0]
    assert plan["rounding"] == "double" and len(plan["clamp"]) == 2
    prov = m["provenance"]
    assert prov["source_model"]["sha256"] and prov["refinterp_version"] == refinterp.__version__
    assert prov["bit_exact"] is None and prov["verified_against"] is None
    assert m["inputs"][1]["const"] and m["inputs"][1]["quant"]["axis"] == 0
    assert c.arrays["acc.0"].dtype == np.int32
    index = json.loads((mnv2_cases / "index.json").read_text())
    assert [e["case"] for e in index["cases"]] == [f.name for f in folders]


def test_accumulator_matches_brute_force(mnv2_cases):
    """acc = bias + sum((x - zx) * w) for the stem conv (SAME, stride 2), computed point by point."""
    c = read_case(list_cases(mnv2_cases)[0])
    x, w, b = (c.arrays[f"input.{k}"].astype(np.int64) for k in range(3))
    zx = c.meta["inputs"][0]["quant"]["zero_point"][0]
    acc = c.arrays["acc.0"]
    xp = np.pad(x - zx, ((0, 0), (0, 1), (0, 1), (0, 0)))  # SAME, 64 -> 32 with stride 2: pad end by 1
    for (oy, ox) in [(0, 0), (5, 7), (31, 31), (17, 3)]:
        patch = xp[0, 2 * oy:2 * oy + 3, 2 * ox:2 * ox + 3, :]
        want = b + np.einsum("hwc,ohwc->o", patch, w)
        np.testing.assert_array_equal(acc[0, oy, ox], want)


def test_ops_filter(tmp_path):
    out = tmp_path / "only"
    assert main(["golden", "make", str(FIX / "mobilenet_v2_tiny_int8.tflite"), "--scheme", "tflite-reference",
                 "--out", str(out), "--ops", "ADD,softmax", "--quiet"]) == 0
    names = [p.name.split("_")[1] for p in list_cases(out)]
    assert names == ["ADD"] * 4 + ["SOFTMAX"]


def test_inputs_npz(tmp_path):
    g = refinterp.load(FIX / "depth_space_int8.tflite")
    x = random_inputs(g, 9)
    np.savez(tmp_path / "in.npz", **x)
    assert main(["golden", "make", str(FIX / "depth_space_int8.tflite"), "--scheme", "tflite-reference",
                 "--out", str(tmp_path / "g"), "--inputs", str(tmp_path / "in.npz"), "--quiet"]) == 0
    first = read_case(list_cases(tmp_path / "g")[0])
    np.testing.assert_array_equal(first.arrays["input.0"], x[g.inputs[0]])


def test_flipped_value_fails_and_names_case(mnv2_cases, tmp_path, capsys):
    import shutil

    d = tmp_path / "flip"
    shutil.copytree(mnv2_cases, d)
    victim = list_cases(d)[5]
    with np.load(victim / TENSORS_FILE) as z:
        arrays = {k: z[k] for k in z.files}
    out = arrays["output.0"]
    idx = (0, 3, 4, 7)
    old = int(out[idx])
    out[idx] = old + 1 if old < 127 else old - 1
    np.savez(victim / TENSORS_FILE, **arrays)
    rc = main(["golden", "check", str(d), "--quiet"])
    text = capsys.readouterr()
    assert rc == 1
    fails = [line for line in text.out.splitlines() if line.startswith("FAIL")]
    assert len(fails) == 1 and victim.name in fails[0]
    assert f"index {list(idx)}" in fails[0] and f"expected {int(out[idx])}" in fails[0] and f"got {old}" in fails[0]
    assert "31 passed, 1 failed" in text.err


def test_wrong_user_kernel_fails_with_message(mnv2_cases, tmp_path, monkeypatch, capsys):
    (tmp_path / "my_kernels.py").write_text(
        "import numpy as np\n"
        "def off_by_one(case, inputs):\n"
        "    shape = case['outputs'][0]['shape']; dt = case['outputs'][0]['dtype']\n"
        "    return [np.full(shape, 1, dt)]\n"
        "def boom(case, inputs):\n"
        "    raise RuntimeError('not implemented for ' + case['op'])\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = main(["golden", "check", str(mnv2_cases), "--kernel", "my_kernels:off_by_one", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1 and "first difference at index" in out and "0000_CONV_2D" in out
    rc = main(["golden", "check", str(mnv2_cases), "--kernel", "my_kernels:boom", "--quiet"])
    out = capsys.readouterr().out
    assert rc == 1 and "user kernel raised RuntimeError: not implemented for Conv" in out
    assert main(["golden", "check", str(mnv2_cases), "--kernel", "my_kernels:nothere"]) == 2
    assert "has no callable 'nothere'" in capsys.readouterr().err


def test_user_kernel_that_is_right_passes(mnv2_cases, tmp_path, monkeypatch):
    """A callable computing Add with the plan from case.json (not refinterp's kernel) passes ADD cases."""
    (tmp_path / "echo_kernels.py").write_text(
        "import numpy as np\n"
        "from refinterp.golden.check import _refinterp_outputs\n"
        "from refinterp.golden.case import read_case\n"
        "def via_refinterp(case, inputs):\n"
        "    return _refinterp_outputs(read_case(case['dir']), None)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["golden", "check", str(mnv2_cases), "--kernel", "echo_kernels:via_refinterp", "--quiet"]) == 0


def test_refuses_non_empty_out(tmp_path, mnv2_cases):
    (tmp_path / "keep.txt").write_text("x")
    args = ["golden", "make", str(FIX / "depth_space_int8.tflite"), "--scheme", "tflite-reference",
            "--out", str(tmp_path), "--quiet"]
    assert main(args) == 2
    assert main(args + ["--overwrite"]) == 2  # foreign file: never wiped
    assert (tmp_path / "keep.txt").exists()
    (tmp_path / "keep.txt").unlink()
    out = tmp_path / "g"
    assert main(args[:5] + ["--out", str(out), "--quiet"]) == 0
    assert main(args[:5] + ["--out", str(out), "--quiet"]) == 2
    assert main(args[:5] + ["--out", str(out), "--quiet", "--overwrite"]) == 0
    assert len(list_cases(out)) == 5


def test_malformed_inputs():
    with pytest.raises(GoldenError):
        check_dir("/nonexistent/golden")
    with pytest.raises(GoldenError):
        read_case(FIX)


@pytest.mark.parametrize("scheme", ["onnxruntime-cpu", "onnx-reference"])
@pytest.mark.parametrize("model", ["small_cnn_qdq_s8s8", "small_cnn_qop_u8s8"])
def test_make_then_check_onnx(tmp_path, model, scheme):
    path = FIX.parent / "onnx" / f"{model}.onnx"
    g = refinterp.load(path)
    cases = make_cases(g, scheme, random_inputs(g, 2))
    write_cases(tmp_path / "g", cases)
    results = check_dir(tmp_path / "g")
    assert results and [r.message for r in results if not r.ok] == []
