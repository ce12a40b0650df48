"""Writing files without losing anything: refuse to replace unless asked, write to a temporary name in
the same folder, then ``os.replace`` (atomic on POSIX), and remove the temporary file on any failure."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import IO, Callable

from .errors import OutputError


def atomic_write(path: str | os.PathLike, write: Callable[[IO], None], *, binary: bool = True,
                 overwrite: bool = True) -> Path:
    """Call ``write(f)`` on a temporary file next to ``path`` and rename it into place."""
    p = Path(path)
    if p.is_dir():
        raise OutputError("is a folder", str(p))
    if p.exists() and not overwrite:
        raise OutputError("exists; pass --overwrite to replace it", str(p))
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with (os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline="")) as f:
            write(f)
        os.chmod(tmp, 0o666 & ~umask())  # mkstemp makes 0600; give the file the user's usual mode
        os.replace(tmp, p)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return p


def temp_dir_beside(final: Path) -> Path:
    """A fresh folder next to ``final`` (renamed into place by the caller), with the user's usual
    folder mode rather than mkdtemp's 0700."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    os.chmod(tmp, 0o777 & ~umask())
    return tmp


def umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
