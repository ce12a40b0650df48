"""Row-split parallelism for the BLAS-based fast kernels, on refinterp's own worker threads.

``split_rows(n, work, fn)`` runs ``fn(r0, r1)`` over a partition of ``range(n)``: the calling
thread takes the first part, persistent worker threads the others, and it returns when all are
done.  Each part writes disjoint output rows and every row's arithmetic is independent of the
split, so results are bit-identical for any thread count.

Why not BLAS's or Numba's own threads: OpenBLAS worker threads busy-wait long after a call
(2^28 cycles by default), and a Numba ``parallel=True`` kernel or another runtime that runs next
then waits for a core that a spinning thread holds.  Here the workers sleep on a queue, and BLAS
is held at one thread per caller while the parts run (``blas_single_thread``), so the parts
never oversubscribe the cores.  ``fn`` must release the GIL for its heavy work: NumPy's matmul
does; Numba kernels called from it are compiled with ``nogil=True``.

When the BLAS library cannot be found (not OpenBLAS) parts are not split (one call, BLAS keeps
its own threading).
"""
from __future__ import annotations

import ctypes
import glob
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

from ...settings import PARALLEL_MIN_WORK, threads

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_size = 0
_blas: tuple | None = None  # (get, set) ctypes functions, or () when not found


def _find_blas() -> tuple:
    """OpenBLAS's get/set_num_threads as loaded by NumPy (scipy-openblas or plain OpenBLAS)."""
    import numpy as np

    root = os.path.dirname(os.path.dirname(np.__file__))
    names = [("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
             ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
             ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
             ("openblas_get_num_threads", "openblas_set_num_threads")]
    for path in sorted(glob.glob(os.path.join(root, "numpy.libs", "*openblas*")) +
                       glob.glob(os.path.join(root, "numpy", ".dylibs", "*openblas*"))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for g, s in names:
            if hasattr(lib, g) and hasattr(lib, s):
                get, set_ = getattr(lib, g), getattr(lib, s)
                get.restype = ctypes.c_int
                set_.argtypes = [ctypes.c_int]
                return (get, set_)
    return ()


def _blas_fns() -> tuple:
    global _blas
    if _blas is None:
        with _lock:
            if _blas is None:
                try:
                    _blas = _find_blas()
                except Exception:  # pragma: no cover - unusual NumPy builds
                    _blas = ()
    return _blas


@contextmanager
def blas_single_thread():
    """BLAS at one thread inside the block (restored after); a no-op without OpenBLAS."""
    fns = _blas_fns()
    if not fns:
        yield
        return
    get, set_ = fns
    old = int(get())
    if old != 1:
        set_(1)
    try:
        yield
    finally:
        if old != 1:
            set_(old)


def _workers(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_pid, _pool_size
    pid = os.getpid()
    if _pool is None or _pool_pid != pid or _pool_size < n:
        with _lock:
            if _pool is None or _pool_pid != pid or _pool_size < n:
                _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="refinterp")
                _pool_pid, _pool_size = pid, n
    return _pool


def parts(n: int, work: int) -> int:
    """How many parts ``split_rows`` would use for ``n`` rows and ``work`` multiply-adds."""
    t = threads()
    if t < 2 or n < 2 or work < PARALLEL_MIN_WORK or not _blas_fns():
        return 1
    return min(t, n)


def split_rows(n: int, work: int, fn) -> None:
    """``fn(r0, r1)`` over a partition of ``range(n)`` (see the module docstring)."""
    k = parts(n, work)
    if k == 1:
        fn(0, n)
        return
    bounds = [n * i // k for i in range(k + 1)]
    with blas_single_thread():
        pool = _workers(k - 1)
        futs = [pool.submit(fn, bounds[i], bounds[i + 1]) for i in range(1, k)]
        try:
            fn(bounds[0], bounds[1])
        finally:
            for f in futs:
                f.result()
