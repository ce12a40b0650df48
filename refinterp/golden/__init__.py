"""Golden vectors: per-kernel test cases made from a model or a sweep, checked, exported.

    from refinterp.golden import make_cases, sweep_cases, write_cases, check_dir, read_case

The on-disk format is described in ``refinterp/golden/FORMAT.md``.
"""
from .case import Case, list_cases, read_case, write_case
from .check import CaseResult, check_case, check_dir, load_user_kernel
from .make import make_cases, write_cases
from .sweep import sweep_cases, sweep_ops

__all__ = ["Case", "CaseResult", "read_case", "write_case", "list_cases", "make_cases", "write_cases",
           "sweep_cases", "sweep_ops", "check_case", "check_dir", "load_user_kernel"]
