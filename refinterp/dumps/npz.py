"""A ``.npz`` archive keyed by tensor name (one sample; a leading sample axis is recognised when
the dump is aligned to the model), or a folder of ``.npz`` files, one per sample, in name order."""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

from ..errors import DumpError
from .model import Dump, DumpTensor, merge_samples


def read_npz(path: str | Path) -> Dump:
    p = Path(path)
    if p.is_dir():
        files = sorted(p.glob("*.npz"))
        if not files:
            raise DumpError("no .npz files in the folder", str(p))
        return merge_samples([read_npz(f) for f in files], str(p), "npz")
    try:
        with np.load(p, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise DumpError("not an .npz archive", str(p))
            d = Dump(str(p), "npz")
            for k in z.files:
                d.add(DumpTensor(k, [z[k]]))
            return d
    except FileNotFoundError:
        raise DumpError("no such file", str(p)) from None
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, KeyError) as e:
        raise DumpError(f"not a readable .npz without pickle ({e})", str(p)) from None
