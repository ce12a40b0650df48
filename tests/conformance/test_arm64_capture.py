"""``refinterp capture --arch arm64``: the aarch64 LiteRT / ONNX Runtime / tflite-runtime 2.14 builds
under qemu as a per-layer "device" dump, read back by ``refinterp diff`` and ranked by ``--explain``.
Every capture runs through the CLI in a subprocess."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conformance._int_oracle import arm64_skip_reason

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "refinterp" / "models" / "demo_int8.tflite"
QDQ = ROOT / "tests" / "fixtures" / "onnx" / "small_cnn_qdq_s8s8.onnx"


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "refinterp", *args], capture_output=True, text=True, timeout=600,
                          cwd=ROOT, env=env)


def _capture_and_explain(tmp_path: Path, model: Path, runtime: str, arch: str, scheme: str, core: str = "a76"):
    dump = tmp_path / "dump"
    r = _cli("capture", str(model), "--runtime", runtime, "--arch", arch, "--arm-core", core, "--random-inputs", "3",
             "--out", str(dump))
    assert r.returncode == 0, r.stderr
    report = tmp_path / "report.json"
    d = _cli("diff", str(model), "--scheme", scheme, "--against", str(dump), "--explain", "--json", str(report))
    assert d.returncode in (0, 1), d.stderr
    return d.returncode, json.loads(report.read_text())


@pytest.mark.skipif(arm64_skip_reason("opt-arm64") is not None, reason=arm64_skip_reason("opt-arm64") or "")
@pytest.mark.parametrize("runtime,arch,model,scheme,core", [
    ("litert-opt", "arm64", DEMO, "tflite-optimized-arm64", "a76"),
    ("litert-opt", "arm64", DEMO, "tflite-optimized-arm64", "a53"),
    ("litert-xnnpack", "arm64", DEMO, "tflite-xnnpack-arm64", "i8mm"),
    ("onnxruntime", "arm64", QDQ, "onnxruntime-arm64", "a76"),
    ("litert-opt", "arm64-tflite2.14", DEMO, "tflite-optimized-arm64-2.14", "a76"),
])
def test_arm_dump_is_explained_by_its_scheme(tmp_path, runtime, arch, model, scheme, core):
    """The emulated ARM dump (3 samples) equals the matching scheme on every tensor, and --explain
    names that scheme (or one that computes identically on this model) as the best."""
    if "2.14" in arch and arm64_skip_reason("opt-arm64-2.14"):
        pytest.skip(arm64_skip_reason("opt-arm64-2.14"))
    rc, rep = _capture_and_explain(tmp_path, model, runtime, arch, scheme, core)
    assert rc == 0, "the ARM dump diverges from its scheme"
    best = rep["explain"]["best_scheme"]
    assert scheme in [best, *rep["explain"]["equally_explained_by"]], (best, rep["explain"]["equally_explained_by"])


@pytest.mark.skipif(arm64_skip_reason("opt-arm64") is not None, reason=arm64_skip_reason("opt-arm64") or "")
def test_x86_scheme_diverges_on_the_arm_dump(tmp_path):
    """LiteRT's x86 optimized kernels do not explain the ARM dump: the diff finds the first conv."""
    rc, rep = _capture_and_explain(tmp_path, DEMO, "litert-opt", "arm64", "tflite-optimized")
    assert rc == 1
    assert rep["explain"]["best_scheme"] == "tflite-optimized-arm64"


def test_refusals_are_one_line(tmp_path):
    """No aarch64 build of TFLite Micro; a missing environment names what to do (no traceback)."""
    r = _cli("capture", str(DEMO), "--runtime", "tflm", "--arch", "arm64", "--random-inputs", "1",
             "--out", str(tmp_path / "a"))
    assert r.returncode == 2 and "no aarch64 build" in r.stderr and "Traceback" not in r.stderr
    env = dict(os.environ, REFINTERP_ARM64_ENV=str(tmp_path / "empty"))
    r = _cli("capture", str(DEMO), "--runtime", "litert-opt", "--arch", "arm64", "--random-inputs", "1",
             "--out", str(tmp_path / "b"), env=env)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert "python -m refinterp.dumps.arm64_env" in r.stderr or "qemu" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert not (tmp_path / "b").exists() or not any((tmp_path / "b").iterdir())
