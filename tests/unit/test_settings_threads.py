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


def _run_py(code: str, **env_extra) -> str:
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                            "MKL_NUM_THREADS", "OPENBLAS_THREAD_TIMEOUT",
                                                            "REFINTERP_BLAS_THREADS")}
    env.update(env_extra)
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_blas_threads_during_runs_depend_on_import_order():
    """NumPy first (OpenBLAS already loaded with its default idle spin): refinterp's calls use one
    BLAS thread so no worker keeps spinning after they return; refinterp first: ``threads()``."""
    late = "import numpy, refinterp; from refinterp import settings; print(settings.blas_run_threads())"
    early = "import refinterp, numpy; from refinterp import settings; print(settings.blas_run_threads())"
    assert _run_py(late, REFINTERP_THREADS="2") == "1"
    assert _run_py(early, REFINTERP_THREADS="2") == "2"
    assert _run_py(late, REFINTERP_THREADS="2", OPENBLAS_THREAD_TIMEOUT="4") == "2"  # the user set it in time
    assert _run_py(late, REFINTERP_THREADS="2", REFINTERP_BLAS_THREADS="2") == "2"


def test_session_run_limits_blas_only_during_the_call():
    """Inside a kernel the BLAS pool is at refinterp's count; after ``run`` the caller's own setting is back."""
    code = """
import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits
import refinterp
from refinterp.runtime import Session
seen = []
orig = Session._exec_step
def spy(self, st, args, timing=False):
    seen.append([i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"])
    return orig(self, st, args, timing)
Session._exec_step = spy
g = refinterp.load("refinterp/models/demo_int8.tflite")
s = refinterp.Session(g, "float32")
x = np.zeros(g.tensors[g.inputs[0]].shape, np.int8)
with threadpool_limits(2, user_api="blas"):
    s.run({g.inputs[0]: x})
    after = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
print(seen[0] if seen else None, after)
"""
    out = _run_py(code, REFINTERP_THREADS="2")
    inside, after = out.split("] [")
    assert inside.strip("[") and set(inside.strip("[").split(", ")) == {"1"}, out
    assert set(after.strip("]").split(", ")) == {"2"}, out
