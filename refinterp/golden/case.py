"""The golden case format: one folder per case, ``case.json`` + ``tensors.npz`` (see FORMAT.md).

Everything here is plain data: JSON for parameters, an uncompressed ``.npz`` (no pickle) for arrays.
Folders are written atomically (a temp folder in the same parent, then ``os.replace``).
"""
from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import GoldenError, OutputError, malformed_as
from ..fsutil import temp_dir_beside
from ..ir import QuantParams, TensorInfo

FORMAT_NAME = "refinterp-golden"
FORMAT_VERSION = 1
CASE_FILE = "case.json"
TENSORS_FILE = "tensors.npz"
INDEX_FILE = "index.json"


def sanitize(text: str, limit: int = 48) -> str:
    """A folder-safe slug: [A-Za-z0-9._-] only, runs of anything else become one '_'."""
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._-") or "node"
    return s[:limit].rstrip("._-") or "node"


def case_folder_name(index: int, op: str, node: str) -> str:
    return f"{index:04d}_{sanitize(op, 32)}_{sanitize(node)}"


# -- JSON encoding of attributes and plans ------------------------------------------------------
def to_jsonable(v: Any) -> Any:
    """Attributes/plan values as JSON; arrays become {"__ndarray__": dtype, "shape", "data"}."""
    if isinstance(v, np.ndarray):
        return {"__ndarray__": v.dtype.name, "shape": list(v.shape), "data": v.ravel().tolist()}
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return float(v)
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, dict):
        return {str(k): to_jsonable(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [to_jsonable(x) for x in v]
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if hasattr(v, "name") and hasattr(v, "value"):  # enums
        return str(v.name)
    return repr(v)


def from_jsonable(v: Any) -> Any:
    if isinstance(v, dict):
        if "__ndarray__" in v:
            return np.asarray(v["data"], dtype=np.dtype(v["__ndarray__"])).reshape(v["shape"])
        return {k: from_jsonable(x) for k, x in v.items()}
    if isinstance(v, list):
        return [from_jsonable(x) for x in v]
    return v


# -- tensor specs -----------------------------------------------------------------------------
def tensor_spec(key: str, info: TensorInfo | None, value: np.ndarray | None) -> dict[str, Any]:
    """Spec of one node input/output; ``present`` False for an absent optional input."""
    if info is None:
        return {"key": key, "present": False}
    shape = list(value.shape) if value is not None else [d if d is not None else -1 for d in (info.shape or [])]
    return {"key": key, "present": True, "name": info.name, "dtype": str(value.dtype if value is not None
                                                                           else info.dtype),
            "shape": shape, "const": info.const is not None,
            "quant": info.quant.to_json() if info.quant is not None else None}


def spec_quant(spec: dict[str, Any]) -> QuantParams | None:
    q = spec.get("quant")
    if not q:
        return None
    return QuantParams(np.asarray(q["scale"], np.float32), np.asarray(q["zero_point"], np.int64),
                       q.get("axis"), int(q.get("block_size", 0)))


# -- the case object --------------------------------------------------------------------------
@dataclass
class Case:
    meta: dict[str, Any]  # the parsed case.json
    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    path: Path | None = None

    @property
    def name(self) -> str:
        return self.path.name if self.path is not None else str(self.meta.get("name", "case"))

    def inputs(self) -> list[np.ndarray | None]:
        return [self.arrays.get(f"input.{s['key']}") if s.get("present", True) else None
                for s in self.meta["inputs"]]

    def outputs(self) -> list[np.ndarray]:
        return [self.arrays[f"output.{s['key']}"] for s in self.meta["outputs"]]


def write_case(folder: Path, case: Case) -> Path:
    """Write ``case`` into ``folder`` (which must not exist) atomically."""
    folder = Path(folder)
    if folder.exists():
        raise OutputError("case folder already exists", str(folder))
    tmp = temp_dir_beside(folder)
    try:
        (tmp / CASE_FILE).write_text(json.dumps(case.meta, indent=1, sort_keys=False) + "\n")
        np.savez(tmp / TENSORS_FILE, **{k: np.ascontiguousarray(v) for k, v in case.arrays.items()})
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    case.path = folder
    return folder


def read_case(folder: str | Path) -> Case:
    """Read one case folder; a malformed one raises GoldenError."""
    with malformed_as(GoldenError, "case", str(folder)):
        return _read_case(folder)


def _read_case(folder: str | Path) -> Case:
    folder = Path(folder)
    cj = folder / CASE_FILE
    try:
        meta = json.loads(cj.read_text())
    except FileNotFoundError:
        raise GoldenError(f"no {CASE_FILE} in case folder", str(folder)) from None
    except (OSError, ValueError) as e:
        raise GoldenError(f"unreadable {CASE_FILE} ({e})", str(cj)) from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise GoldenError(f"not a golden case (format is not '{FORMAT_NAME}')", str(cj))
    if int(meta.get("version", 0)) > FORMAT_VERSION:
        raise GoldenError(f"case format version {meta.get('version')} is newer than this refinterp "
                          f"supports ({FORMAT_VERSION})", str(cj))
    for key in ("op", "inputs", "outputs", "scheme"):
        if key not in meta:
            raise GoldenError(f"{CASE_FILE} lacks key '{key}'", str(cj))
    try:
        with np.load(folder / TENSORS_FILE, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise GoldenError(f"no {TENSORS_FILE} in case folder", str(folder)) from None
    except (OSError, ValueError, EOFError) as e:
        raise GoldenError(f"unreadable {TENSORS_FILE} ({e})", str(folder / TENSORS_FILE)) from None
    for role, specs in (("input", meta["inputs"]), ("output", meta["outputs"])):
        for s in specs:
            if s.get("present", True) and f"{role}.{s['key']}" not in arrays:
                raise GoldenError(f"{TENSORS_FILE} lacks array '{role}.{s['key']}'", str(folder))
    return Case(meta, arrays, folder)


def list_cases(root: str | Path) -> list[Path]:
    """Case folders under ``root`` (``root`` itself when it is a case), sorted by name."""
    root = Path(root)
    if not root.is_dir():
        raise GoldenError("not a folder", str(root))
    if (root / CASE_FILE).is_file():
        return [root]
    found = sorted(p.parent for p in root.glob(f"*/{CASE_FILE}"))
    if not found:
        raise GoldenError(f"no golden cases (no */{CASE_FILE})", str(root))
    return found


def check_out_dir(out: str | Path, overwrite: bool) -> Path:
    """Refuse (before any work) a file, or a non-empty folder unless ``overwrite``.

    ``overwrite`` only ever replaces earlier golden output (case folders holding a case.json, and
    ``index.json``); a folder holding anything else is refused, so a mistyped --out cannot wipe it.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputError("exists and is not a folder", str(out))
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise OutputError("output folder is not empty (use --overwrite to replace earlier golden cases)",
                              str(out))
        foreign = [p.name for p in out.iterdir() if not (p.name == INDEX_FILE or p.name.startswith(".")
                                                         or (p.is_dir() and (p / CASE_FILE).is_file())
                                                         or (p.is_dir() and (p / "manifest.json").is_file()))]
        if foreign:
            raise OutputError(f"refusing to overwrite: holds entries that are not golden output "
                              f"(e.g. '{foreign[0]}')", str(out))
    return out


def prepare_out_dir(out: str | Path, overwrite: bool) -> Path:
    """``check_out_dir``, then empty the earlier golden output and create the folder."""
    out = check_out_dir(out, overwrite)
    if out.is_dir():
        for p in out.iterdir():
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p)
            else:
                p.unlink()
    out.mkdir(parents=True, exist_ok=True)
    return out
