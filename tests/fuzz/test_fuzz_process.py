"""The fuzz tests (test_fuzz_files.py, test_fuzz_models.py, test_regressions.py) in a fresh process of
their own (see conftest.py): the child's pytest must pass; a child killed by a signal is a finding."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def test_fuzz_in_its_own_process():
    env = {**os.environ, "REFINTERP_FUZZ_CHILD": "1"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", str(HERE)],
                       capture_output=True, text=True, env=env, cwd=str(HERE.parents[1]), timeout=1500)
    tail = (r.stdout + r.stderr)[-3000:]
    print(tail[-800:])
    if r.returncode < 0:
        pytest.fail(f"finding: the fuzz process died of {signal.Signals(-r.returncode).name}:\n{tail}")
    assert r.returncode == 0, tail
