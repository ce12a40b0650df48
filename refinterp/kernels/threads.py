"""Fast (Numba / BLAS) building blocks that replace hot NumPy paths bit for bit.

Not kernels themselves (nothing here registers an op): the registered kernels call these helpers.
Every helper has a NumPy reference it must equal exactly (tests/unit/kernels/*/test_*fast*.py).

Numba pitfalls met here (each cost a lot of speed or a stale result):

* An index such as ``a[i0 + j]`` makes Numba emit negative-index wraparound, and LLVM then leaves
  the loop scalar; index sliced views with the bare loop variable (``v = a[i0:i0 + n]; v[j]``) or
  with unsigned values.
* The on-disk cache (``cache=True``) of a function is invalidated only by edits to its own file:
  a caller keeps stale code when an ``inline="always"`` helper it uses from another module
  changes.  After editing such a helper, delete the callers' ``__pycache__/*.nb[ci]`` files (or
  point ``REFINTERP_NUMBA_CACHE_DIR`` at an empty folder).
"""
from __future__ import annotations

from contextlib import contextmanager


@contextmanager
def numba_threads(n: int):
    """Run the enclosed Numba parallel call on ``n`` threads (restored afterwards)."""
    import numba

    old = numba.get_num_threads()
    n = max(1, min(int(n), numba.config.NUMBA_NUM_THREADS))
    if n == old:
        yield
        return
    numba.set_num_threads(n)
    try:
        yield
    finally:
        numba.set_num_threads(old)
