"""refinterp sensitivity: per-node fallbacks (float output, or output on a 16-bit grid; consumers
reading floats) ranked by the final-output gain against float32; greedy picks; the written scheme
reproduces the reported metric."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

import refinterp
from refinterp.cli.main import main
from refinterp.errors import ModelError
from refinterp.ir import dequantize
from refinterp.samples import feed_samples
from refinterp.sensitivity import analyse
from refinterp.sensitivity.engine import fix_scheme
from refinterp.sensitivity.metrics import METRICS
from tests.tflite_builder import TFLiteBuilder


def _fc(b, x, w, so, name):
    y = b.tensor(name, (4, w.shape[0]), "int8", scale=so, zero_point=0)
    b.op("FULLY_CONNECTED", [x, b.const(name + "_w", w, scale=0.02, zero_point=0)], [y],
         options=dict(fused_activation="NONE"), version=4)
    return y


def _build(ws, scales):
    b = TFLiteBuilder()
    x = b.tensor("x", (4, 16), "int8", scale=0.02, zero_point=0)
    h = x
    for i, (w, so) in enumerate(zip(ws, scales)):
        h = _fc(b, h, w, so, f"fc{i + 1}")
    return b.build([x], [h])


def fragile_model(tmp_path, coarse: float = 12.0):
    """x -> fc1 -> fc2 -> fc3 with output scales calibrated on float32 runs (max |y| / 127), except
    fc2's, ``coarse`` times too large (its outputs fall on a few codes)."""
    rng = np.random.default_rng(7)
    ws = [rng.integers(-60, 61, (16, 16)).astype(np.int8) for _ in range(3)]
    feeds = {"x": rng.integers(-100, 101, (8, 4, 16)).astype(np.int8)}  # 8 samples
    tmp_path.mkdir(parents=True, exist_ok=True)
    p = tmp_path / f"fragile_{coarse:g}.tflite"
    scales = [1.0, 1.0, 1.0]
    for i in range(3):  # calibrate layer by layer (each layer's float input depends on the scales before)
        p.write_bytes(_build(ws, scales))
        g = refinterp.load(p)
        s = refinterp.Session(g, "float32")
        peak = max(float(np.abs(s.run({"x": x}, capture="all")[f"fc{i + 1}"]).max()) for x in feeds["x"])
        scales[i] = float(np.float32(peak / 127 * (coarse if i == 1 else 1.0)))
    p.write_bytes(_build(ws, scales))
    return p, feeds


def _metric(scheme, path, samples, metric="cosine"):
    g = refinterp.load(path)
    s, r = refinterp.Session(g, scheme), refinterp.Session(g, "float32")
    got, want = [], []
    for f in samples:
        o = g.outputs[0]
        v = s.run(f)[o]
        got.append({o: dequantize(v, g.tensors[o].quant) if v.dtype.kind in "iu" else v})
        want.append({o: r.run(f)[o]})
    return METRICS[metric](got, want)


@pytest.mark.parametrize("metric,mode", [("cosine", "float"), ("sqnr", "int16"), ("mse", "both")])
def test_fragile_layer_ranks_first_and_the_scheme_reproduces_the_metric(tmp_path, metric, mode):
    path, feeds = fragile_model(tmp_path)
    g = refinterp.load(path)
    samples = feed_samples(g, feeds)
    res = analyse(refinterp.Session(g, "tflite-reference"), refinterp.Session(g, "float32"), samples,
                  metric=metric, budget=2, mode=mode)
    assert {r["fallback"] for r in res.ranking} == ({"float", "int16"} if mode == "both" else {mode})
    assert res.samples == 8 and [r["node"] for r in res.ranking][:1] == ["fc2"]
    assert res.ranking[0]["gain"] > 0 and res.selected[0]["node"] == "fc2"
    # its own error (from the reference's inputs, against its float computation) singles it out too
    loc = {r["node"]: r["local_error"] for r in res.ranking}
    assert loc["fc2"] < min(loc["fc1"], loc["fc3"]) - 10  # dB
    better = (res.final < res.baseline) if metric == "mse" else (res.final > res.baseline)
    assert better
    # the written scheme, run as a user would, gives the reported final metric
    fix = tmp_path / "fix.yaml"
    fix.write_text(yaml.safe_dump(fix_scheme(res, "tflite-reference")))
    assert _metric(str(fix), path, samples, metric) == pytest.approx(res.final, rel=1e-12)
    assert _metric("tflite-reference", path, samples, metric) == pytest.approx(res.baseline, rel=1e-12)
    # fc2 keeps a float output, so its consumer fc3 reads floats
    own = True if res.selected[0]["fallback"] == "float" else "int16"
    assert res.overrides["fc2"] == {"compute": "float", "float_output": own}
    assert res.overrides["fc3"]["compute"] == "float"


def test_well_scaled_model_gains_less(tmp_path):
    """The same model with fc2 calibrated like the others: its best single fallback gains far less."""
    res = {}
    for coarse in (12.0, 1.0):
        path, feeds = fragile_model(tmp_path, coarse)
        g = refinterp.load(path)
        res[coarse] = analyse(refinterp.Session(g, "tflite-reference"), refinterp.Session(g, "float32"),
                              feed_samples(g, feeds), metric="sqnr", budget=1)
    assert res[1.0].baseline > res[12.0].baseline + 10  # dB
    assert res[1.0].ranking[0]["gain"] < res[12.0].ranking[0]["gain"] / 4


def test_float_output_needs_float_consumers(tmp_path):
    path, _ = fragile_model(tmp_path)
    s = tmp_path / "bad.yaml"
    s.write_text("name: bad\nextends: tflite-reference\nnodes:\n  fc2: {compute: float, float_output: true}\n")
    with pytest.raises(ModelError, match="fc3"):
        refinterp.Session(refinterp.load(path), str(s))


def test_cli_writes_json_html_scheme_and_run_accepts_it(tmp_path, capsys):
    path, feeds = fragile_model(tmp_path)
    np.savez(tmp_path / "in.npz", **feeds)
    out = [str(tmp_path / n) for n in ("s.json", "s.html", "fix.yaml")]
    args = ["sensitivity", str(path), "--scheme", "tflite-reference", "--inputs", str(tmp_path / "in.npz"),
            "--metric", "sqnr", "--budget", "2", "--json", out[0], "--html", out[1], "--write-scheme", out[2]]
    assert main(args + ["--quiet"]) == 0
    data = json.loads(open(out[0]).read())
    assert data["ranking"][0]["node"] == "fc2" and data["final"] > data["baseline"]
    assert set(data) >= {"scheme", "reference", "metric", "baseline", "ranking", "selected", "final"}
    assert "<svg" in open(out[1]).read() and "fc2" in open(out[1]).read()
    assert main(["run", str(path), "--scheme", out[2], "--random-inputs", "1", "--quiet"]) == 0
    capsys.readouterr()
    assert main(args + ["--quiet"]) == 2  # outputs exist: nothing overwritten without --overwrite
    assert "exists" in capsys.readouterr().err
    assert main(args + ["--quiet", "--overwrite"]) == 0


def test_against_a_float_model_file(tmp_path, capsys):
    """--against FILE: outputs matched by name (here the model itself run in float32: the same
    reference as the default, so the same baseline); a file whose outputs match neither by name nor
    by number is refused in one line."""
    path, feeds = fragile_model(tmp_path)
    np.savez(tmp_path / "in.npz", **feeds)
    base = ["sensitivity", str(path), "--scheme", "tflite-reference", "--inputs", str(tmp_path / "in.npz"),
            "--budget", "1", "--quiet"]
    assert main(base + ["--json", str(tmp_path / "a.json")]) == 0
    assert main(base + ["--json", str(tmp_path / "b.json"), "--against", str(path)]) == 0
    a, b = (json.loads((tmp_path / n).read_text()) for n in ("a.json", "b.json"))
    assert a["baseline"] == b["baseline"] and a["ranking"] == b["ranking"] and b["reference"] == str(path)
    two = TFLiteBuilder()
    x = two.tensor("x", (4, 16), "float32")
    y1, y2 = two.tensor("y1", (4, 16), "float32"), two.tensor("y2", (4, 16), "float32")
    two.op("RELU", [x], [y1])
    two.op("RELU", [x], [y2])
    other = tmp_path / "two_outputs.tflite"
    other.write_bytes(two.build([x], [y1, y2]))
    capsys.readouterr()
    assert main(base + ["--against", str(other)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "outputs" in err


@pytest.mark.parametrize("scheme", ["tflite-reference", "tflite-xnnpack"])
def test_converter_made_model(scheme, tmp_path):
    """A converter-made MobileNetV2-style int8 model: the written scheme's final-output SQNR against
    float32 is the reported one and better than the plain scheme's."""
    from pathlib import Path

    from refinterp.cli.common import random_inputs

    path = Path(__file__).resolve().parents[1] / "fixtures" / "tflite" / "mobilenet_v2_tiny_int8.tflite"
    g = refinterp.load(path)
    samples = [random_inputs(g, seed) for seed in (1, 2)]
    res = analyse(refinterp.Session(g, scheme), refinterp.Session(g, "float32"), samples, metric="sqnr", budget=2)
    assert len(res.ranking) > 20 and res.selected and res.final > res.baseline
    fix = tmp_path / "fix.yaml"
    fix.write_text(yaml.safe_dump(fix_scheme(res, scheme)))
    assert _metric(str(fix), path, samples, "sqnr") == pytest.approx(res.final, rel=1e-12)
    assert _metric(scheme, path, samples, "sqnr") == pytest.approx(res.baseline, rel=1e-12)


def test_int16_grid_rounds_to_the_tensors_16_bit_steps(tmp_path):
    """float_output: int16 puts the node's output on s16 * k (s16 = range end / 32767, |k| <= 32767)."""
    path, feeds = fragile_model(tmp_path)
    fix = tmp_path / "g16.yaml"
    fix.write_text("name: g16\nextends: tflite-reference\nnodes:\n  fc2: {compute: float, float_output: int16}\n"
                   "  fc3: {compute: float}\n")
    g = refinterp.load(path)
    h = refinterp.Session(g, str(fix)).run({"x": feeds["x"][0]}, capture="all")["fc2"]
    q = g.tensors["fc2"].quant
    s16 = float(np.float32(q.scale[0])) * 128 / 32767  # int8, zero point 0: the larger end is -128 * s
    assert h.dtype == np.float32 and np.abs(h).max() > 0
    np.testing.assert_allclose(h / s16, np.rint(h / s16), atol=1e-3)
    assert np.abs(h / s16).max() <= 32767 + 1e-3


def test_workers_give_the_same_result(tmp_path):
    """--workers 2 (spawned processes) writes the same JSON as one process."""
    path, feeds = fragile_model(tmp_path)
    np.savez(tmp_path / "in.npz", **feeds)
    base = ["sensitivity", str(path), "--scheme", "tflite-reference", "--inputs", str(tmp_path / "in.npz"),
            "--mode", "both", "--budget", "2", "--quiet"]
    assert main(base + ["--json", str(tmp_path / "one.json")]) == 0
    assert main(base + ["--json", str(tmp_path / "two.json"), "--workers", "2"]) == 0
    assert (tmp_path / "one.json").read_text() == (tmp_path / "two.json").read_text()
