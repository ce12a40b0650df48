"""The model fuzz targets (tflite / onnx bytes and fields, test_fuzz_models.py) in a fresh process of
their own (see conftest.py): the child's pytest must pass; a child killed by a signal is a finding."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_fuzz_model_targets_in_their_own_process():
    env = {**os.environ, "REFINTERP_FUZZ_CHILD": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore",
                        str(HERE / "test_fuzz_models.py")], capture_output=True, text=True, env=env,
                       cwd=str(HERE.parents[1]), timeout=1500)
    tail = (r.stdout + r.stderr)[-3000:]
    print(tail[-600:])
    if r.returncode < 0:
        pytest.fail(f"finding: the fuzz process died of {signal.Signals(-r.returncode).name}:\n{tail}")
    assert r.returncode == 0, tail
