"""Converter-made int8 MobileNet-style model: dumps captured from LiteRT (reference kernels and the
XNNPACK resolver) and from TFLite Micro, diffed under the integer schemes.  Runtimes that can abort
the process run in a child process (`python -m refinterp capture`)."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from refinterp import load  # noqa: E402
from refinterp.cli.main import main  # noqa: E402
from refinterp.dumps.npydir import read_npy_dump  # noqa: E402

MODEL = str(Path(__file__).resolve().parents[1] / "fixtures" / "tflite" / "mobilenet_v2_tiny_int8.tflite")


def _capture(runtime, inputs, out):
    p = subprocess.run([sys.executable, "-m", "refinterp", "capture", MODEL, "--runtime", runtime,
                        "--inputs", str(inputs), "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def dumps(tmp_path_factory):
    d = tmp_path_factory.mktemp("litert")
    g = load(MODEL)
    info = g.tensors[g.inputs[0]]
    x = np.random.default_rng(11).integers(-128, 128, size=(2,) + tuple(info.shape), dtype=np.int8)
    np.savez(d / "in.npz", **{g.inputs[0]: x})
    return d, g, {rt: _capture(rt, d / "in.npz", d / rt) for rt in ("litert-ref", "litert-xnnpack")}


def _diff(dump, scheme, out, *extra):
    rc = main(["diff", MODEL, "--scheme", scheme, "--against", str(dump), "--json", str(out), "--quiet", *extra])
    return rc, json.loads(Path(out).read_text())


def test_reference_kernels_dump_is_bit_exact_under_tflite_reference(dumps):
    d, g, caps = dumps
    rc, rep = _diff(caps["litert-ref"], "tflite-reference", d / "ref.json")
    assert rc == 0 and rep["first_divergence"] is None and rep["samples"] == 2
    assert all(t["status"] == "exact" for t in rep["tensors"])


def test_xnnpack_dump_first_divergence_and_one_lsb_local_error(dumps):
    d, g, caps = dumps
    ref = read_npy_dump(caps["litert-ref"])
    xnn = read_npy_dump(caps["litert-xnnpack"])
    # oracle: the first tensor (execution order) where the two real runtimes disagree
    differing = [n for n in ref.tensors if any(not np.array_equal(a, b) for a, b in
                                               zip(ref.tensors[n].samples, xnn.tensors[n].samples))]
    rc, rep = _diff(caps["litert-xnnpack"], "tflite-reference", d / "xnn.json")
    if not differing:
        assert rc == 0 and rep["first_divergence"] is None
        return
    assert rc == 1 and rep["first_divergence"] == differing[0]
    by = {t["name"]: t for t in rep["tensors"]}
    assert {n for n, t in by.items() if t["status"] == "diverged"} == set(differing)
    for n in differing:
        lm = by[n]["local_metrics"]
        assert lm is not None and lm["max_abs_lsb"] <= 1, (n, lm["max_abs_lsb"])
    # a per-tensor LSB tolerance as large as the accumulated error makes everything pass
    worst = max(int(by[n]["metrics"]["max_abs_lsb"]) for n in differing)
    rc2, _ = _diff(caps["litert-xnnpack"], "tflite-reference", d / "xnn2.json", "--atol-lsb", str(worst))
    assert rc2 == 0


def test_tflm_layer_by_layer_file_diffs_clean(dumps, tmp_path):
    pytest.importorskip("tflite_micro")
    d, g, _ = dumps
    np.savez(tmp_path / "in1.npz", **{g.inputs[0]: np.load(d / "in.npz")[g.inputs[0]][0]})
    cap = read_npy_dump(_capture("tflm", tmp_path / "in1.npz", tmp_path / "tflm"))
    # re-express the TFLM capture as TFLM's own layer-by-layer file (tensors by index, no names)
    from refinterp.dumps.tflm import write_tflm

    idx = {n: g.tensors[n].index for n in cap.tensors}
    producers = g.producer()
    write_tflm(tmp_path / "lbl.bin", {idx[n]: cap.tensors[n].data for n in g.inputs},
               [(producers[n].index, idx[n], t.data) for n, t in cap.tensors.items() if n in producers])
    rc = main(["diff", MODEL, "--scheme", "tflite-micro", "--against", str(tmp_path / "lbl.bin"),
               "--json", str(tmp_path / "r.json"), "--quiet"])
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["dump"]["format"] == "tflm" and rep["dump"]["matched"] == len(cap.tensors)
    assert rc == 0 and rep["first_divergence"] is None
