"""The same input options (``--inputs`` / ``--input NAME=F.npy`` / ``--random-inputs SEED``) on every
subcommand that takes model inputs: run, capture, diff, golden make."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refinterp.cli.common import random_inputs

MODEL = Path(__file__).resolve().parents[2] / "refinterp/models/demo_int8.tflite"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "refinterp", *map(str, args)], capture_output=True, text=True,
                          timeout=300)


def test_capture_and_diff_with_the_same_random_seed(tmp_path):
    pytest.importorskip("ai_edge_litert", reason="ai-edge-litert (test extra) not installed")
    cap = _cli("capture", MODEL, "--runtime", "litert-xnnpack", "--random-inputs", 7, "--out", tmp_path / "dev")
    assert cap.returncode == 0, cap.stderr
    d = _cli("diff", MODEL, "--scheme", "tflite-xnnpack", "--against", tmp_path / "dev", "--random-inputs", 7,
             "--json", tmp_path / "r.json")
    assert d.returncode == 0, d.stdout[-2000:] + d.stderr
    # a different seed is a different input: the dump's own input no longer matches
    d2 = _cli("diff", MODEL, "--scheme", "tflite-xnnpack", "--against", tmp_path / "dev", "--random-inputs", 8)
    assert d2.returncode == 1


def test_capture_takes_an_input_npy_and_refuses_no_inputs(tmp_path):
    pytest.importorskip("ai_edge_litert", reason="ai-edge-litert (test extra) not installed")
    import refinterp

    g = refinterp.load(str(MODEL))
    (name, x), = random_inputs(g, 3).items()
    np.save(tmp_path / "x.npy", x)
    cap = _cli("capture", MODEL, "--runtime", "litert-opt", "--input", f"{name}=" + str(tmp_path / "x.npy"),
               "--out", tmp_path / "dev")
    assert cap.returncode == 0, cap.stderr
    import json

    entry = next(t for t in json.loads((tmp_path / "dev" / "manifest.json").read_text())["tensors"] if t["name"] == name)
    assert np.array_equal(np.load(tmp_path / "dev" / entry["file"], allow_pickle=False), x)
    none = _cli("capture", MODEL, "--runtime", "litert-opt", "--out", tmp_path / "dev2")
    assert none.returncode == 2 and "--random-inputs" in none.stderr


def test_golden_make_takes_input_npy(tmp_path):
    import refinterp

    g = refinterp.load(str(MODEL))
    (name, x), = random_inputs(g, 5).items()
    np.save(tmp_path / "x.npy", x)
    r = _cli("golden", "make", MODEL, "--scheme", "tflite-reference", "--input", f"{name}={tmp_path / 'x.npy'}",
             "--out", tmp_path / "g", "--ops", "CONV_2D")
    assert r.returncode == 0, r.stderr
    assert any((tmp_path / "g").iterdir())
