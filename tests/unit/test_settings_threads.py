"""``import refinterp`` sets the thread environment (BLAS / Numba thread counts, wait policies)."""
from __future__ import annotations


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
