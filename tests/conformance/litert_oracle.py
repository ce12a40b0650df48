"""LiteRT as an oracle: run a ``.tflite`` model (bytes) and return every tensor by name.

``run_litert(model_bytes, feeds, resolver="opt")`` runs in this process.  ``resolver``:

* ``"ref"``     -> ``OpResolverType.BUILTIN_REF`` (reference kernels; these can abort the process on a
  failed TF_LITE_ASSERT, so prefer ``run_litert_subprocess`` for them),
* ``"opt"``     -> ``BUILTIN_WITHOUT_DEFAULT_DELEGATES`` (optimized kernels, no XNNPACK),
* ``"xnnpack"`` -> ``BUILTIN`` (optimized kernels + the default XNNPACK delegate),
* ``"default"`` -> ``AUTO`` (what a plain ``Interpreter(model)`` uses: same as ``"xnnpack"``).

``feeds`` maps input tensor names to arrays.  The result maps tensor names to arrays: with
``preserve_all=True`` every tensor that holds data (inputs, constants, intermediates, outputs),
otherwise only the graph outputs.  Tensors that share a name are keyed ``name:<index>`` for every
occurrence after the first, matching refinterp's IR convention.

``run_litert_subprocess(...)`` takes the same arguments and runs the interpreter in a child Python
(``subprocess`` + ``.npy`` files in a temp dir, read back with ``allow_pickle=False``).  A child that
dies from a signal (SIGABRT from a TFLite assert, SIGSEGV...) or exits non-zero raises
``OracleAborted`` whose message names the signal and the tail of the child's stderr, so a test can
report the abort as a finding (``pytest.fail(str(e))`` or ``xfail``) instead of killing pytest.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Mapping

import numpy as np

RESOLVERS = ("ref", "opt", "xnnpack", "default")
# What the child runs (argv[1] = the exchange folder); tests may swap it to simulate a crash.
CHILD_CODE = "import litert_oracle as m, sys; m._child(sys.argv[1])"


class OracleAborted(RuntimeError):
    """The LiteRT child process crashed or exited with an error."""

    def __init__(self, message: str, returncode: int | None = None, stderr: str = "") -> None:
        super().__init__(message)
        self.returncode = returncode
        self.stderr = stderr


def _interpreter_module():
    """ai_edge_litert.interpreter; in the tflite-runtime 2.14 oracle environment, tflite_runtime's."""
    try:
        from ai_edge_litert import interpreter
    except ImportError:
        from tflite_runtime import interpreter
    return interpreter


def _resolver_type(resolver: str):
    OpResolverType = _interpreter_module().OpResolverType

    table = {"ref": OpResolverType.BUILTIN_REF, "opt": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
             "xnnpack": OpResolverType.BUILTIN, "default": OpResolverType.AUTO}
    if resolver not in table:
        raise ValueError(f"unknown LiteRT resolver {resolver!r}; expected one of {RESOLVERS}")
    return table[resolver]


def run_litert(model_bytes: bytes, feeds: Mapping[str, np.ndarray], resolver: str = "opt",
               preserve_all: bool = True) -> dict[str, np.ndarray]:
    """With the old tflite-runtime package (the 2.14 oracles), tensors a later op overwrote in place
    are left out (``refinterp/dumps/arm64_child.overwritten``, on the child's path)."""
    it = _interpreter_module().Interpreter(model_content=bytes(model_bytes), num_threads=1,
                     experimental_op_resolver_type=_resolver_type(resolver),
                     experimental_preserve_all_tensors=preserve_all)
    details = it.get_tensor_details()
    keys = _keys(details)
    inputs = it.get_input_details()
    by_name = {keys[d["index"]]: d for d in inputs}
    unknown = set(feeds) - set(by_name)
    if unknown:
        raise KeyError(f"unknown LiteRT inputs {sorted(unknown)}; inputs are {sorted(by_name)}")
    for name, d in by_name.items():
        x = np.asarray(feeds[name])
        if tuple(d["shape"]) != x.shape:
            it.resize_tensor_input(d["index"], list(x.shape), strict=False)
    it.allocate_tensors()
    for name, d in by_name.items():
        # np.ascontiguousarray would turn a rank-0 feed into shape (1,)
        it.set_tensor(d["index"], np.array(np.asarray(feeds[name]).astype(d["dtype"]), order="C"))
    it.invoke()
    out: dict[str, np.ndarray] = {}
    wanted = [d["index"] for d in details] if preserve_all else [d["index"] for d in it.get_output_details()]
    held = []
    kinds = {d["index"]: np.dtype(d["dtype"]).kind for d in details}
    for idx in wanted:
        if kinds.get(idx) == "O":
            continue  # resource / variant handles: reading one crashes LiteRT 2.3 (SIGSEGV)
        try:
            out[keys[idx]] = np.array(it.get_tensor(idx))
        except ValueError:  # tensor without data (optional/unused)
            continue
        if out[keys[idx]].dtype.kind in "iuf":
            held.append(idx)
    if preserve_all and _interpreter_module().__name__.startswith("tflite_runtime"):
        from arm64_child import overwritten

        for idx in overwritten(it, held):
            out.pop(keys[idx], None)
    return out


def _keys(details: list[dict]) -> dict[int, str]:
    seen: set[str] = set()
    keys: dict[int, str] = {}
    for d in sorted(details, key=lambda d: d["index"]):
        name = d["name"]
        # refinterp's loader: a nameless tensor is "tensor:<index>", a repeated name "<name>:<index>"
        keys[d["index"]] = f"{name or 'tensor'}:{d['index']}" if (not name or name in seen) else name
        seen.add(name)
    return keys


def run_litert_subprocess(model_bytes: bytes, feeds: Mapping[str, np.ndarray], resolver: str = "opt",
                          preserve_all: bool = True, timeout: float = 120.0) -> dict[str, np.ndarray]:
    _resolver_type(resolver)  # validate early, in the parent
    with tempfile.TemporaryDirectory(prefix="litert_oracle_") as tmp:
        d = Path(tmp)
        (d / "model.tflite").write_bytes(bytes(model_bytes))
        names = list(feeds)
        for i, name in enumerate(names):
            np.save(d / f"in{i}.npy", np.asarray(feeds[name]), allow_pickle=False)
        (d / "request.json").write_text(json.dumps({"inputs": names, "resolver": resolver,
                                                    "preserve_all": preserve_all}))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(Path(__file__).resolve().parent),
                                                                        os.environ.get("PYTHONPATH")])))
        try:
            proc = subprocess.run([sys.executable, "-c", CHILD_CODE, str(d)], capture_output=True, text=True,
                                  timeout=timeout, env=env)
        except subprocess.TimeoutExpired:
            raise OracleAborted(f"LiteRT ({resolver}) child timed out after {timeout:.0f}s") from None
        if proc.returncode != 0:
            tail = " | ".join(l for l in proc.stderr.strip().splitlines()[-5:] if l.strip())
            if proc.returncode < 0:
                try:
                    sig = signal.Signals(-proc.returncode).name
                except ValueError:
                    sig = f"signal {-proc.returncode}"
                what = f"killed by {sig}"
            else:
                what = f"exited with status {proc.returncode}"
            raise OracleAborted(f"LiteRT ({resolver}) {what}: {tail or 'no stderr'}", proc.returncode, proc.stderr)
        manifest = json.loads((d / "result.json").read_text())
        return {name: np.load(d / f"out{i}.npy", allow_pickle=False) for i, name in enumerate(manifest)}


def _child(folder: str) -> None:
    d = Path(folder)
    req = json.loads((d / "request.json").read_text())
    feeds = {name: np.load(d / f"in{i}.npy", allow_pickle=False) for i, name in enumerate(req["inputs"])}
    res = run_litert((d / "model.tflite").read_bytes(), feeds, req["resolver"], req["preserve_all"])
    names = list(res)
    for i, name in enumerate(names):
        np.save(d / f"out{i}.npy", res[name], allow_pickle=False)
    (d / "result.json").write_text(json.dumps(names))
