"""Argument groups and file helpers shared by subcommands."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..errors import MALFORMED_DATA, InputError, OutputError
from ..fsutil import atomic_write
from ..ir import Graph, storage_dtype


def add_input_args(p, required: bool = False, inputs_help: str | None = None) -> None:
    """The input options every subcommand that takes model inputs shares: ``--inputs IN.npz``,
    ``--input NAME=FILE.npy`` (repeatable) or ``--random-inputs SEED`` (mutually exclusive)."""
    g = p.add_mutually_exclusive_group(required=required)
    g.add_argument("--inputs", metavar="IN.npz", help=inputs_help or (
        "inputs as .npz keyed by input tensor name (arrays with one extra leading axis, or a folder of "
        ".npz files: many samples)"))
    g.add_argument("--input", action="append", metavar="NAME=FILE.npy", default=None,
                   help="one input from a .npy file (repeatable)")
    g.add_argument("--random-inputs", type=int, metavar="SEED",
                   help="deterministic random inputs (integers over the dtype's range, floats in [-1, 1))")


def _load_npy(path: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except MALFORMED_DATA as e:
        raise InputError(f"not a readable .npy file without pickle ({type(e).__name__}: {e})", path) from None


def load_npz(path: str) -> dict[str, np.ndarray]:
    try:
        with np.load(path, allow_pickle=False) as z:
            if not hasattr(z, "files"):
                raise InputError("expected a .npz archive", path)
            return {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise InputError("no such file", path) from None
    except InputError:
        raise
    except MALFORMED_DATA as e:
        raise InputError(f"not a readable .npz archive without pickle ({type(e).__name__}: {e})", path) from None


def random_inputs(graph: Graph, seed: int) -> dict[str, np.ndarray]:
    """Deterministic inputs: integers over the dtype's range, floats in [-1, 1) (or the quantized range)."""
    rng = np.random.default_rng(seed)
    out = {}
    for name in graph.inputs:
        info = graph.tensors[name]
        shape = tuple(1 if d is None or d < 0 else d for d in (info.shape or ()))
        dt = storage_dtype(info.dtype)
        if dt.kind in "iu":
            lo, hi = np.iinfo(dt).min, np.iinfo(dt).max
            out[name] = rng.integers(lo, hi, size=shape, endpoint=True, dtype=dt)
        elif dt.kind == "b":
            out[name] = rng.integers(0, 2, size=shape).astype(bool)
        else:
            out[name] = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
    return out


def given_inputs(args, graph: Graph) -> dict[str, Any] | None:
    """The inputs the user gave with ``add_input_args``'s options, or None when none was given."""
    if getattr(args, "inputs", None) or getattr(args, "input", None) or getattr(args, "random_inputs", None) is not None:
        return resolve_inputs(args, graph)
    return None


def inputs_label(args) -> str:
    """How the inputs were given, for reports and provenance."""
    if getattr(args, "inputs", None):
        return str(args.inputs)
    if getattr(args, "input", None):
        return ", ".join(args.input)
    return f"random seed {getattr(args, 'random_inputs', None) or 0}"


def resolve_inputs(args, graph: Graph) -> dict[str, Any]:
    """The inputs given (see ``add_input_args``); deterministic random inputs (seed 0) when none was."""
    if getattr(args, "inputs", None):
        feeds = load_npz(args.inputs)
        if len(graph.inputs) == 1 and len(feeds) == 1 and graph.inputs[0] not in feeds:
            feeds = {graph.inputs[0]: next(iter(feeds.values()))}
        return feeds
    if getattr(args, "input", None):
        feeds = {}
        for item in args.input:
            name, sep, path = item.partition("=")
            if not sep:
                raise InputError(f"--input expects NAME=FILE.npy, got '{item}'")
            feeds[name] = _load_npy(path)
        return feeds
    seed = getattr(args, "random_inputs", None)
    return random_inputs(graph, 0 if seed is None else seed)


def check_new_file(path: str, overwrite: bool) -> Path:
    p = Path(path)
    if p.exists() and not overwrite:
        raise OutputError("exists; pass --overwrite to replace it", str(p))
    if p.exists() and p.is_dir():
        raise OutputError("is a folder", str(p))
    return p


def save_npz_atomic(path: str, arrays: dict[str, np.ndarray], overwrite: bool = False) -> None:
    atomic_write(check_new_file(path, overwrite), lambda f: np.savez(f, **arrays), overwrite=overwrite)


def check_dump_dir(path: str, overwrite: bool) -> None:
    """Refuse early (before any work) to write into a non-empty folder or over a file."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError("exists and is not a folder", str(p))
    if p.is_dir() and any(p.iterdir()) and not overwrite:
        raise OutputError("folder is not empty; pass --overwrite to write into it", str(p))
