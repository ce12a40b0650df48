"""``refinterp diff --explain`` on dumps captured from real runtimes: the best built-in scheme must be
the one that describes the runtime that made the dump.  Captures run in a child process
(`python -m refinterp capture`): LiteRT's reference kernels and TFLite Micro can abort.

Schemes still being written by other developers (tflite-optimized, tflite-xnnpack) are parameters
that skip, naming the missing file, until the file exists."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from refinterp import load  # noqa: E402
from refinterp.cli.main import main  # noqa: E402
from refinterp.schemes import list_schemes  # noqa: E402

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
MODELS = ("mobilenet_v2_tiny_int8", "ops_zoo_int8")
# (runtime, the scheme that describes it); tflm: either TFLM-like scheme, whichever explains more
CASES = [("litert-ref", "tflite-reference"), ("litert-opt", "tflite-optimized"),
         ("litert-xnnpack", "tflite-xnnpack"), ("tflm", None)]


def _capture(model, runtime, inputs, out):
    p = subprocess.run([sys.executable, "-m", "refinterp", "capture", model, "--runtime", runtime,
                        "--inputs", str(inputs), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return out


@pytest.mark.parametrize("runtime,expected", CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("model", MODELS)
def test_best_scheme_names_the_runtime(tmp_path, model, runtime, expected):
    if runtime == "tflm":
        pytest.importorskip("tflite_micro")
    have = {n for n, _ in list_schemes()}
    if expected is not None and expected not in have:
        pytest.skip(f"scheme '{expected}' does not exist yet (schemes/{expected}.yaml is being written)")
    path = str(FIX / f"{model}.tflite")
    g = load(path)
    shape = tuple(g.tensors[g.inputs[0]].shape)
    n = 1 if runtime == "tflm" else 2
    x = np.random.default_rng(7).integers(-128, 128, size=(n,) + shape, dtype=np.int8)
    np.savez(tmp_path / "in.npz", **{g.inputs[0]: x[0] if n == 1 else x})
    dump = _capture(path, runtime, tmp_path / "in.npz", tmp_path / "dump")
    out = tmp_path / "r.json"
    # the diff itself runs under float32, so its own scheme gives no hint to the tie-break
    rc = main(["diff", path, "--scheme", "float32", "--against", str(dump), "--explain", "--json", str(out),
               "--quiet"])
    rep = json.loads(out.read_text())
    assert rc in (0, 1)
    ex = rep["explain"]
    counts = {s["name"]: s["exact_tensors"] for s in ex["schemes"]}
    best = rep["best_scheme"]
    assert counts[best] == max(counts.values())
    if expected is None:  # TFLM: tflite-micro or tflite-reference, whichever explains more
        assert best in ("tflite-micro", "tflite-reference")
        if counts["tflite-micro"] == counts["tflite-reference"]:
            # documented tie-break: fewest per-op settings -> tflite-reference
            assert best == "tflite-reference"
    else:
        assert best == expected
    if runtime in ("litert-ref", "tflm"):  # verified schemes: the whole dump is reproduced
        compared = {s["name"]: s["compared_tensors"] for s in ex["schemes"]}
        assert counts[best] == compared[best] > 0 and ex["unexplained"] == []


# The ONNX Runtime counterparts (a discriminating QOperator model where onnxruntime-cpu alone explains
# the dump, and the ambiguous small CNN fixture whose tie must be reported) are in test_explain_ort.py.
