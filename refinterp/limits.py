"""The memory budget: every reader checks a declared size against it *before* allocating.

Budget, first match wins: ``set_max_memory`` (the CLI's global ``--max-memory 2G``), the environment
variable ``REFINTERP_MAX_MEMORY``, else ``DEFAULT_FRACTION`` of physical RAM (8 GiB assumed when the
RAM size cannot be read).  Sizes are bytes with an optional binary suffix: ``512M``, ``2G``, ``1.5GiB``.

Element counts are computed with Python integers (no int64 wrap-around): a hostile shape such as
``[2**31, 2**31, 2**31]`` gives its true product and is refused instead of wrapping to a small number.
"""
from __future__ import annotations

import os
import re
from typing import Iterable

from .errors import ResourceError

ENV_VAR = "REFINTERP_MAX_MEMORY"
DEFAULT_FRACTION = 0.5
_FALLBACK_RAM = 8 << 30
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*([KMGT]?)(?:I?B)?\s*$", re.IGNORECASE)

# No real model needs a tensor this large: a declared size above it is a malformed file, not a budget matter.
ABSURD_BYTES = 1 << 48

_override: int | None = None


def parse_size(text: str | int, what: str = "memory size") -> int:
    """``"2G"`` -> 2147483648.  Raises ResourceError naming ``what`` on anything else."""
    if isinstance(text, int) and not isinstance(text, bool):
        n = text
    else:
        m = _SIZE_RE.match(str(text))
        if m is None:
            raise ResourceError(f"cannot parse '{text}' as a size (use e.g. 512M, 2G or a byte count)", what)
        n = int(float(m.group(1)) * _UNITS[m.group(2).upper()])
    if n <= 0:
        raise ResourceError(f"size must be positive, got '{text}'", what)
    return n


def total_ram() -> int:
    try:
        n = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return _FALLBACK_RAM
    return n if n > 0 else _FALLBACK_RAM


def max_memory() -> int:
    """The current budget in bytes."""
    if _override is not None:
        return _override
    env = os.environ.get(ENV_VAR)
    if env:
        return parse_size(env, ENV_VAR)
    return int(total_ram() * DEFAULT_FRACTION)


def set_max_memory(size: str | int | None) -> None:
    """Set (or with ``None`` clear) the process-wide override."""
    global _override
    _override = None if size is None else parse_size(size, "--max-memory")


def fmt_bytes(n: int) -> str:
    if n >= 1 << 50:
        return f"{float(n):.3g} bytes"
    for unit, step in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= step:
            return f"{n / step:.1f} {unit}"
    return f"{n} B"


def check_alloc(n_elements: int, itemsize: int, what: str, where: str | None = None) -> int:
    """Raise ResourceError unless ``n_elements * itemsize`` bytes fit the budget; returns the byte count.

    Call it before ``np.empty`` / ``np.frombuffer(...).copy()`` / reading a file of that size.
    """
    n, size = int(n_elements), int(itemsize)
    if n < 0 or size < 0:
        raise ResourceError(f"{what}: negative size ({n} elements of {size} bytes)", where)
    nbytes = n * size
    budget = max_memory()
    if nbytes > budget:
        raise ResourceError(f"{what} needs {fmt_bytes(nbytes)} ({n} elements), over the memory budget of "
                            f"{fmt_bytes(budget)} (raise it with --max-memory or {ENV_VAR})", where)
    return nbytes


def element_count(shape: Iterable[int | None], what: str, where: str | None = None) -> int:
    """Product of a declared shape; every known dim must be a non-negative integer (None = unknown, 1)."""
    dims = list(shape)
    n = 1
    for d in dims:
        if d is None:
            continue
        try:
            v = int(d)
        except (TypeError, ValueError, OverflowError):
            raise ResourceError(f"{what}: dimension {d!r} is not an integer", where) from None
        if v < 0:
            raise ResourceError(f"{what}: negative dimension {v} in shape {dims}", where)
        n *= v
    return n


def check_shape(shape: Iterable[int | None], itemsize: int, what: str, where: str | None = None) -> int:
    """``element_count`` then ``check_alloc``; returns the element count."""
    dims = list(shape)
    n = element_count(dims, what, where)
    check_alloc(n, itemsize, f"{what} (shape {dims})", where)
    return n
