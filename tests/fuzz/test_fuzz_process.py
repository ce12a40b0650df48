"""The fuzz tests (test_fuzz_files.py, test_fuzz_models.py, test_regressions.py) in a fresh process of
their own (see conftest.py): the child's pytest must pass; a child killed by a signal is a finding.

The child starts as soon as the suite's collection is done (conftest.py ``pytest_collection_finish``),
so its fixed two-minute budget runs beside the other tests on the second core instead of after them;
this test waits for it and reads its output.  Run alone, the test starts the child itself."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
_RUN: dict = {}


def start_child() -> None:
    if "proc" in _RUN:
        return
    env = {**os.environ, "REFINTERP_FUZZ_CHILD": "1"}
    out = tempfile.TemporaryFile(mode="w+")
    _RUN["out"] = out
    _RUN["proc"] = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-W", "ignore", str(HERE)],
        stdout=out, stderr=subprocess.STDOUT, text=True, env=env, cwd=str(HERE.parents[1]))


def stop_child() -> None:
    """At the end of the session: a child still running (the test was not reached) is stopped."""
    proc = _RUN.get("proc")
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


def test_fuzz_in_its_own_process():
    start_child()
    proc = _RUN["proc"]
    try:
        rc = proc.wait(timeout=1500)
    except subprocess.TimeoutExpired:
        stop_child()
        pytest.fail("finding: the fuzz process did not finish in 1500 s")
    _RUN["out"].seek(0)
    tail = _RUN["out"].read()[-3000:]
    print(tail[-800:])
    if rc < 0:
        pytest.fail(f"finding: the fuzz process died of {signal.Signals(-rc).name}:\n{tail}")
    assert rc == 0, tail
