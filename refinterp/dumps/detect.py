"""Pick the reader for a dump path (or use the one named by ``--format``).

Detection, first match wins:
  file  ``*.npz`` -> npz;  ``*.json`` Polygraphy RunResults / input list -> polygraphy, otherwise a raw
        manifest -> raw;  ``*.tensorproto`` -> ort;  any other file -> tflm (ModelTestData flatbuffer).
  folder: ``manifest.json`` of refinterp -> npy; a raw manifest -> raw; ``layer_outputs_*`` -> aimet;
        ``Result_*`` -> qnn; ``*.tensorproto`` -> ort; ``deploy_check_data_int`` / ``*_fix.bin|txt``
        -> vitis; ``*.npy`` -> npy; ``*.npz`` -> npz (one file per sample); ``*.raw`` -> qnn;
        sub-folders that are dumps themselves -> one sample per sub-folder (sorted by name).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from ..errors import DumpError, malformed_as
from .model import Dump, merge_samples


def _npy(p):
    from .npydir import read_npy_dump
    return read_npy_dump(p)


def _npz(p):
    from .npz import read_npz
    return read_npz(p)


def _raw(p):
    from .rawdir import read_raw_dump
    return read_raw_dump(p)


def _poly(p):
    from .polygraphy import read_polygraphy
    return read_polygraphy(p)


def _ort(p):
    from .ort import read_ort_dump
    return read_ort_dump(p)


def _tflm(p):
    from .tflm import read_tflm
    return read_tflm(p)


def _qnn(p):
    from .qnn import read_qnn
    return read_qnn(p)


def _aimet(p):
    from .qnn import read_aimet
    return read_aimet(p)


def _vitis(p):
    from .vitis import read_vitis
    return read_vitis(p)


FORMATS: dict[str, Callable[[Path], Dump]] = {
    "npy": _npy, "npz": _npz, "raw": _raw, "polygraphy": _poly, "ort": _ort, "tflm": _tflm,
    "qnn": _qnn, "snpe": _qnn, "aimet": _aimet, "vitis": _vitis,
}


def _folder_format(p: Path) -> str | None:
    from .rawdir import find_manifest, is_raw_manifest, load_manifest

    m = p / "manifest.json"
    if m.is_file():
        try:
            if json.loads(m.read_text()).get("format") == "refinterp-npy-dump":
                return "npy"
        except (OSError, ValueError, AttributeError):
            pass
    mf = find_manifest(p)
    if mf is not None:
        try:
            if is_raw_manifest(load_manifest(mf)):
                return "raw"
        except DumpError:
            pass
        if mf.name == "manifest.json":
            return "npy"
    if (p / "layer_output_name_order.json").is_file() or any(p.glob("layer_outputs_*")) or \
            any((p / "outputs").glob("layer_outputs_*")):
        return "aimet"
    if any(x.is_dir() for x in p.glob("Result_*")):
        return "qnn"
    if any(p.glob("*.tensorproto")):
        return "ort"
    if p.name == "deploy_check_data_int" or any(p.rglob("*_fix.bin")) or any(p.rglob("*_fix.txt")):
        return "vitis"
    if any(p.glob("*.npy")):
        return "npy"
    if any(p.glob("*.npz")):
        return "npz"
    if any(p.rglob("*.raw")):
        return "qnn"
    return None


def detect_format(path: str | Path) -> str | None:
    p = Path(path)
    if p.is_dir():
        return _folder_format(p)
    suf = p.suffix.lower()
    if suf == ".npz":
        return "npz"
    if suf == ".tensorproto":
        return "ort"
    if suf in (".json", ".yaml", ".yml"):
        try:
            head = p.read_text(errors="replace")[:4096]
        except OSError:
            return None
        from .polygraphy import looks_like_polygraphy

        if suf == ".json" and (looks_like_polygraphy(head) or head.lstrip().startswith("[")):
            return "polygraphy"
        return "raw"
    return "tflm"


def read_dump(path: str | Path, fmt: str | None = None) -> Dump:
    """Read any supported dump; a malformed one raises DumpError (ResourceError when too large)."""
    with malformed_as(DumpError, "dump", str(path)):
        return _read_dump(path, fmt)


def _read_dump(path: str | Path, fmt: str | None = None) -> Dump:
    p = Path(path)
    if not p.exists():
        raise DumpError("no such file or folder", str(p))
    if fmt:
        reader = FORMATS.get(fmt)
        if reader is None:
            raise DumpError(f"unknown dump format '{fmt}' (known: {', '.join(FORMATS)})", str(p))
        return reader(p)
    found = detect_format(p)
    if found is not None:
        return FORMATS[found](p)
    if p.is_dir():
        subs = sorted(x for x in p.iterdir() if x.is_dir() and not x.name.startswith("."))
        kinds = [(_folder_format(s), s) for s in subs]
        kinds = [(k, s) for k, s in kinds if k is not None]
        if kinds and len({k for k, _ in kinds}) == 1:
            d = merge_samples([FORMATS[k](s) for k, s in kinds], str(p), kinds[0][0])
            d.meta["per_sample_folders"] = [s.name for _, s in kinds]
            return d
    raise DumpError("cannot tell the dump format; pass --format (one of: " + ", ".join(FORMATS) + ")", str(p))
