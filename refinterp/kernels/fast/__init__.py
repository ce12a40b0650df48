"""Fast (Numba / BLAS) building blocks that replace hot NumPy paths bit for bit.

Not kernels themselves (nothing here registers an op): the registered kernels call these helpers.
Every helper has a NumPy reference it must equal exactly (tests/unit/test_fast_kernels.py).
"""
