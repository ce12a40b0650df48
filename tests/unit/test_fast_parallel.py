"""Row-split parallelism (fast/parallel.py): split_rows covers every row exactly once, on the
worker threads, and propagates errors (the ORT depthwise split is compared with the NumPy path in
test_fast_ort.py); ``import refinterp`` sets the thread environment."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from refinterp.kernels.fast import parallel


def test_split_rows_partition_and_errors(monkeypatch):
    monkeypatch.setattr(parallel, "parts", lambda n, w: 3)
    hits = np.zeros(10, np.int64)
    names = set()

    def fn(r0, r1):
        hits[r0:r1] += 1
        names.add(threading.current_thread().name)

    parallel.split_rows(10, 1 << 30, fn)
    assert np.all(hits == 1)
    assert any(n.startswith("refinterp") for n in names) and threading.current_thread().name in names

    def bad(r0, r1):
        if r0 > 0:
            raise ValueError("part failed")

    with pytest.raises(ValueError, match="part failed"):
        parallel.split_rows(10, 1 << 30, bad)


def test_import_configures_threads_and_wait_policy():
    import os
    import subprocess
    import sys

    code = ("import os, refinterp; print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_WAIT_POLICY'], "
            "os.environ['OPENBLAS_THREAD_TIMEOUT'])")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                            "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
                                                            "OPENBLAS_THREAD_TIMEOUT")}
    out = subprocess.run([sys.executable, "-c", code], env={**env, "REFINTERP_THREADS": "1"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "PASSIVE", "4"]
    out = subprocess.run([sys.executable, "-c", code], env={**env, "REFINTERP_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["2", "ACTIVE", "4"]  # explicit settings win
