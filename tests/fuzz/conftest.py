"""The fuzz targets cap the process's address space at its size plus 3 GiB while they run.  In the
long-lived process of the whole suite (every runtime loaded, thread pools, JIT code) that cap made
native code fail inside and after the capped regions (LLVM loading a Numba cache entry: SIGSEGV;
glibc: "double free or corruption"; later a segfault reading an .npy header; four full runs, never
in a process of its own), so the suite runs the fuzz tests in a fresh process of their own
(test_fuzz_process.py).  ``REFINTERP_FUZZ_CHILD=1`` (set there) collects them directly, as
``REFINTERP_FUZZ_CHILD=1 pytest tests/fuzz`` does by hand."""
from __future__ import annotations

import os

_FUZZ_MODULES = ["test_fuzz_files.py", "test_fuzz_models.py", "test_regressions.py"]
collect_ignore = ["test_fuzz_process.py"] if os.environ.get("REFINTERP_FUZZ_CHILD") == "1" else _FUZZ_MODULES


def pytest_collection_finish(session):
    """Start the fuzz child now when its test is selected (test_fuzz_process.py)."""
    for item in session.items:
        if item.name == "test_fuzz_in_its_own_process":
            item.module.start_child()
            break


def pytest_sessionfinish(session):
    for item in getattr(session, "items", []):
        if item.name == "test_fuzz_in_its_own_process":
            item.module.stop_child()
            break
