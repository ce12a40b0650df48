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
``OMP_WAIT_POLICY`` / ``OPENBLAS_THREAD_TIMEOUT`` always win.

At run time (``run_pools()``, entered by every ``Session`` run): the BLAS pool is limited with
threadpoolctl to ``threads()`` for the duration of refinterp's own calls and restored afterwards,
so ``REFINTERP_THREADS`` may change between runs and the caller's own BLAS setting is untouched.
OpenBLAS reads its idle timeout only when NumPy loads: when NumPy was imported before refinterp
(what most scripts do) and the user set no ``OPENBLAS_THREAD_TIMEOUT``, its workers would spin for
~0.1 s of CPU after every threaded call and slow whatever runs next in the process (LiteRT 5.5x,
measured by benchmarks/neighbours.py), so refinterp then keeps BLAS at one thread during its calls
(Numba's kernels still use ``threads()``; ``REFINTERP_BLAS_THREADS=N`` overrides this choice).
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import threading

_BLAS_VARS = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
# Idle thread pools sleep instead of spinning: Numba's OpenMP workers as soon as a parallel region
# ends (libgomp spins by default); OpenBLAS workers after 2^4 cycles instead of 2^28 (~0.1 s of a
# core after every multi-threaded call, measured), so neither holds a core the next kernel needs.
# (variable, default, the module whose load reads it)
_WAIT_POLICY = (("OMP_WAIT_POLICY", "PASSIVE", "numba"), ("OPENBLAS_THREAD_TIMEOUT", "4", "numpy"))


def _env_count(name: str) -> int | None:
    """A positive count from environment variable ``name`` (at least 1), None when unset or not an integer."""
    v = os.environ.get(name, "").strip()
    try:
        return max(1, int(v)) if v else None
    except ValueError:
        return None


def threads() -> int:
    """The configured thread count (>= 1)."""
    n = _env_count("REFINTERP_THREADS")
    return _cpus() if n is None else n


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


def spawn_pool(workers: int, initializer, initargs: tuple):
    """A ``spawn`` multiprocessing pool whose children start with BLAS / Numba / refinterp pinned to
    one thread each (the parent's environment is restored afterwards)."""
    import multiprocessing as mp

    env = thread_env(1)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return mp.get_context("spawn").Pool(workers, initializer=initializer, initargs=initargs)
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


_BLAS_TIMEOUT_APPLIED: bool | None = None  # whether OpenBLAS loaded with a short idle timeout


def configure_environment() -> None:
    """Export the knobs to BLAS / Numba variables that are still unset (see module docstring)."""
    global _BLAS_TIMEOUT_APPLIED
    if _BLAS_TIMEOUT_APPLIED is None:
        _BLAS_TIMEOUT_APPLIED = "numpy" not in sys.modules or "OPENBLAS_THREAD_TIMEOUT" in os.environ
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


def blas_run_threads() -> int:
    """BLAS threads during refinterp's own calls: ``threads()``, or 1 when OpenBLAS's idle workers
    would spin after each call (see module docstring); ``REFINTERP_BLAS_THREADS`` overrides."""
    n = _env_count("REFINTERP_BLAS_THREADS")
    if n is not None:
        return n
    return threads() if _BLAS_TIMEOUT_APPLIED is not False else 1


class _Pools(threading.local):
    """threadpoolctl controller over the BLAS libraries loaded in this process, selected once (the
    library scan costs ~1 ms; bounded by code, not by models), and whether this thread is already
    inside ``run_pools`` (nested calls -- a Session run inside a sensitivity sweep, each ``run_step``
    of it -- keep the outer limit instead of paying for their own)."""
    blas = None  # class attribute: shared by every thread
    default = None  # the BLAS thread count outside refinterp's calls (when the controller was made)
    active = False  # per thread


_POOLS = _Pools()


def _blas_controller():
    if _Pools.blas is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:  # pragma: no cover - a declared dependency
            _Pools.blas = False
            return None
        import numpy  # noqa: F401  (its BLAS must be loaded for the controller to see it)

        blas = ThreadpoolController().select(user_api="blas")
        _Pools.blas = blas if blas.lib_controllers else False
        if blas.lib_controllers:
            _Pools.default = max(int(i.get("num_threads") or 1) for i in blas.info())
    return _Pools.blas or None


@contextlib.contextmanager
def blas_as_outside():
    """BLAS at the thread count it has outside refinterp's calls, for a kernel that must make the
    very BLAS call another library makes at that count (OpenBLAS picks another SGEMM kernel, with
    another summation order, at one thread than at two: measured)."""
    blas = _blas_controller()
    if blas is None or _Pools.default is None:
        yield
        return
    with blas.limit(limits=_Pools.default):
        yield


@contextlib.contextmanager
def run_pools():
    """Context manager for refinterp's own computation: BLAS limited to ``blas_run_threads()`` and
    restored on exit (a no-op when threadpoolctl finds no BLAS library, or when already inside it)."""
    blas = None if _POOLS.active else _blas_controller()
    if blas is None:
        yield
        return
    _POOLS.active = True
    try:
        with blas.limit(limits=blas_run_threads()):
            yield
    finally:
        _POOLS.active = False
