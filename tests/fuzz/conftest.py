"""The model fuzz targets (test_fuzz_models.py) cap the process's address space at its size plus
3 GiB while they run.  In the long-lived process of the whole suite (every runtime loaded, thread
pools, JIT code) that cap made native code fail inside the capped region (LLVM loading a Numba
cache entry: SIGSEGV; glibc: "double free or corruption"; measured on three full runs, never in a
process of its own), so the suite runs those targets in a fresh process of their own
(test_fuzz_models_process.py); ``REFINTERP_FUZZ_CHILD=1`` (set there) collects them directly, as
``pytest tests/fuzz/test_fuzz_models.py`` with the variable set does by hand."""
from __future__ import annotations

import os

collect_ignore = [] if os.environ.get("REFINTERP_FUZZ_CHILD") == "1" else ["test_fuzz_models.py"]
