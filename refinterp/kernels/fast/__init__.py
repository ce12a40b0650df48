"""Fast (Numba / BLAS) building blocks that replace hot NumPy paths bit for bit.

Not kernels themselves (nothing here registers an op): the registered kernels call these helpers.
Every helper has a NumPy reference it must equal exactly (tests/unit/test_fast_kernels.py).
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
