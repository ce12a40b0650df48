"""Performance knobs in one place: thread count and the Numba on-disk cache folder.

Environment (read once; set before the first ``import refinterp`` to affect BLAS):

* ``REFINTERP_THREADS``: threads for Numba ``parallel=True`` kernels and OpenBLAS (default: all
  CPUs).  Results never depend on it: every parallel kernel splits work over output elements whose
  arithmetic is independent of the split.
* ``REFINTERP_NUMBA_CACHE_DIR``: where Numba keeps compiled kernels (``cache=True``); default is
  Numba's own (``__pycache__`` next to the sources, or ``NUMBA_CACHE_DIR``).  A warm cache is what
  makes a fresh process start in seconds instead of recompiling every kernel.

``configure_environment()`` (run by ``import refinterp``) only sets variables that are still unset,
so explicit ``OPENBLAS_NUM_THREADS`` / ``NUMBA_NUM_THREADS`` / ``NUMBA_CACHE_DIR`` /
``OMP_WAIT_POLICY`` / ``OPENBLAS_THREAD_TIMEOUT`` always win.  BLAS reads its
variable when NumPy is first imported; call it (or export the variables) before that.
"""
from __future__ import annotations

import functools
import os
import sys

_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# Idle thread pools sleep instead of spinning: Numba's OpenMP workers as soon as a parallel region
# ends (libgomp spins by default); OpenBLAS workers after 2^4 cycles instead of 2^28 (~0.1 s of a
# core after every multi-threaded call, measured), so neither holds a core the next kernel needs.
# (variable, default, the module whose load reads it)
_WAIT_POLICY = (("OMP_WAIT_POLICY", "PASSIVE", "numba"), ("OPENBLAS_THREAD_TIMEOUT", "4", "numpy"))


def threads() -> int:
    """The configured thread count (>= 1)."""
    v = os.environ.get("REFINTERP_THREADS", "").strip()
    if v:
        try:
            return max(1, int(v))
        except ValueError:
            pass
    return _cpus()


@functools.lru_cache(maxsize=1)
def _cpus() -> int:
    """os.cpu_count(), read once (it costs ~8 us here, and kernels ask per call)."""
    return max(1, os.cpu_count() or 1)


def fast_kernels() -> bool:
    """``REFINTERP_FAST_KERNELS=0`` runs only the NumPy reference kernels (the fast ones are tested
    ``array_equal`` against them; this switch exists to check that on whole models)."""
    return os.environ.get("REFINTERP_FAST_KERNELS", "1").strip() not in ("0", "false", "no")


def numba_cache_dir() -> str | None:
    v = os.environ.get("REFINTERP_NUMBA_CACHE_DIR", "").strip()
    return v or os.environ.get("NUMBA_CACHE_DIR") or None


def thread_env(n: int | None = None) -> dict[str, str]:
    """Environment variables that pin BLAS and Numba to ``n`` threads (for a child process)."""
    n = threads() if n is None else max(1, int(n))
    env = {k: str(n) for k in _BLAS_VARS}
    env["NUMBA_NUM_THREADS"] = str(n)
    env["REFINTERP_THREADS"] = str(n)
    for k, v, _ in _WAIT_POLICY:
        env[k] = os.environ.get(k, v)
    cache = numba_cache_dir()
    if cache:
        env["NUMBA_CACHE_DIR"] = cache
    return env


def configure_environment() -> None:
    """Export the knobs to BLAS / Numba variables that are still unset (see module docstring)."""
    if "REFINTERP_THREADS" in os.environ:
        n = str(threads())
        for k in _BLAS_VARS:
            os.environ.setdefault(k, n)
        if "numba" not in sys.modules:
            os.environ.setdefault("NUMBA_NUM_THREADS", n)
    for k, v, reader in _WAIT_POLICY:
        if reader not in sys.modules:
            os.environ.setdefault(k, v)
    cache = os.environ.get("REFINTERP_NUMBA_CACHE_DIR", "").strip()
    if cache and "numba" not in sys.modules:
        os.environ.setdefault("NUMBA_CACHE_DIR", cache)


def apply_numba_threads() -> int:
    """Use ``threads()`` Numba threads (capped at the pool size Numba started with)."""
    import numba

    n = min(threads(), numba.config.NUMBA_NUM_THREADS)
    numba.set_num_threads(n)
    return n


# Numba ``parallel=True`` kernels pay a thread-pool fork/join per call; below this many
# multiply-adds a call runs on one thread (results never depend on the split).
PARALLEL_MIN_WORK = 1 << 22


def kernel_threads(work: int) -> int:
    """Threads for one Numba parallel kernel call doing ``work`` multiply-adds."""
    if work < PARALLEL_MIN_WORK:
        return 1
    import numba

    return max(1, min(threads(), numba.config.NUMBA_NUM_THREADS))
