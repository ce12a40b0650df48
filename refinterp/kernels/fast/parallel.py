"""Row-split parallelism for the Numba passes of the fast kernels, on refinterp's own threads.

``split_rows(n, work, fn)`` runs ``fn(r0, r1)`` over a partition of ``range(n)``: the calling
thread takes the first part, persistent worker threads the others, and it returns when all are
done.  Each part writes disjoint output rows and every row's arithmetic is independent of the
split, so results are bit-identical for any thread count.

``fn`` must release the GIL for its heavy work (Numba kernels compiled with ``nogil=True``) and
should not call BLAS: BLAS threads a GEMM itself (it splits by its own rules and shares the packed
weights, which a row split would re-read per part).  The workers sleep on a queue between calls,
so, unlike a spinning pool, they never hold a core the next kernel needs (see settings.py for the
OpenMP / OpenBLAS wait policies).
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

from ...settings import PARALLEL_MIN_WORK, threads

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_pid = 0
_pool_size = 0


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
    """How many parts ``split_rows`` uses for ``n`` rows and ``work`` (multiply-add equivalents)."""
    t = threads()
    if t < 2 or n < 2 or work < PARALLEL_MIN_WORK:
        return 1
    return min(t, n)


def split_rows(n: int, work: int, fn) -> None:
    """``fn(r0, r1)`` over a partition of ``range(n)`` (see the module docstring)."""
    k = parts(n, work)
    if k == 1:
        fn(0, n)
        return
    bounds = [n * i // k for i in range(k + 1)]
    pool = _workers(k - 1)
    futs = [pool.submit(fn, bounds[i], bounds[i + 1]) for i in range(1, k)]
    try:
        fn(bounds[0], bounds[1])
    finally:
        for f in futs:
            f.result()
