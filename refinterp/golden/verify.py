"""``--verify RUNTIME``: re-run every case with a real runtime and record the verdict.

Runtimes: ``litert-ref`` (ai-edge-litert, ``OpResolverType.BUILTIN_REF``) and ``tflm`` (the
tflite-micro package's interpreter, one-op method only).  Two methods, both in a child process
(litert_child.py) so a kernel abort kills the child, not refinterp (the child is restarted after
the job that died):

1. ``one-op``: the case alone as a one-operator model (tflite_writer.py), fed the case's inputs.
2. ``whole-model`` (``make`` only, for ops the writer does not cover): the source model run once with
   every tensor kept; a node is verified when LiteRT's inputs to it equal the case's inputs
   exactly (then LiteRT's output for it is LiteRT's answer to this very case).

Verdicts land in ``provenance.verified_against`` (``result``, ``method``, ``detail``) and
``provenance.bit_exact``:

* ``match``: every output identical (shape, dtype, values) -> ``bit_exact: true``;
* ``mismatch``: LiteRT disagrees -> ``bit_exact: false``; LiteRT's outputs are stored in
  tensors.npz as ``runtime.output.<k>`` and the first difference in ``detail``;
* ``error`` (LiteRT refused or aborted), ``unsupported`` (neither method applies) or
  ``inconclusive`` (whole-model: LiteRT fed this node different inputs, an upstream node diverged)
  -> ``bit_exact: null``.
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

from ..errors import GoldenError
from .case import Case
from .check import first_difference
from .tflite_writer import case_to_tflite, supported

RUNTIMES = ("litert-ref", "tflm")
# argv after the Python executable that runs the child (tests swap it to simulate an abort)
CHILD_ARGS = ["-m", "refinterp.golden.litert_child"]
VERDICTS = ("match", "mismatch", "error", "inconclusive", "unsupported")


def _version(dist: str) -> str:
    try:
        from importlib.metadata import version

        return version(dist)
    except Exception:  # noqa: BLE001 - the version is informative only
        return "unknown"


def _put_job(d: Path, j: int | str, model: bytes, feeds: Mapping[str, np.ndarray], keep_all: bool = False) -> None:
    (d / f"{j}.tflite").write_bytes(model)
    names = list(feeds)
    (d / f"{j}.in.json").write_text(json.dumps(names))
    np.savez(d / f"{j}.in.npz", **{f"a{i}": np.asarray(feeds[n]) for i, n in enumerate(names)})
    if keep_all:
        (d / f"{j}.all").write_text("")


def _get_job(d: Path, j: int | str) -> dict[str, np.ndarray]:
    names = json.loads((d / f"{j}.out.json").read_text())
    with np.load(d / f"{j}.out.npz", allow_pickle=False) as z:
        return {n: z[f"a{i}"] for i, n in enumerate(names)}


def _run_jobs(folder: Path, jobs: list, timeout: float, backend: str = "litert-ref") -> dict[str, str]:
    """Run the child until every job has a result; returns {job: abort message} for jobs that crashed."""
    aborted: dict[str, str] = {}
    jobs = [str(j) for j in jobs]
    for _ in range(len(jobs) + 1):
        pending = [j for j in jobs if not (folder / f"{j}.out.npz").exists()
                   and not (folder / f"{j}.err.txt").exists() and j not in aborted]
        if not pending:
            break
        (folder / "jobs.json").write_text(json.dumps({"backend": backend, "jobs": pending}))
        cur = folder / "current.txt"
        if cur.exists():
            cur.unlink()
        try:
            proc = subprocess.run([sys.executable, *CHILD_ARGS, str(folder)],
                                  capture_output=True, text=True, timeout=timeout, env=dict(os.environ))
            rc, err = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired:
            rc, err = -9, f"timed out after {timeout:.0f}s"
        if rc == 0:
            continue
        job = cur.read_text() if cur.exists() else pending[0]
        tail = " | ".join(line.strip() for line in err.strip().splitlines()[-3:] if line.strip())
        aborted[job] = f"{backend} child {_how(rc)}: {tail or 'no stderr'}"
    return aborted


def _how(rc: int) -> str:
    if rc >= 0:
        return f"exited with status {rc}"
    try:
        return f"killed by {signal.Signals(-rc).name}"
    except ValueError:
        return f"killed by signal {-rc}"


def _compare(c: Case, got: list[np.ndarray], verdict: dict) -> str:
    diffs = [m for k, (e, g) in enumerate(zip(c.outputs(), got))
             if (m := first_difference(e, g, f"output.{k}")) is not None]
    if diffs:
        for k, g in enumerate(got):
            c.arrays[f"runtime.output.{k}"] = g
        _record(c, dict(verdict, result="mismatch", detail="; ".join(diffs)), False)
        return "mismatch"
    _record(c, dict(verdict, result="match"), True)
    return "match"


def _whole_model_verdict(c: Case, tensors: dict[str, np.ndarray], base: dict) -> str:
    v = dict(base, method="whole-model run, node inputs identical to the case's")
    for s in c.meta["inputs"]:
        if not s.get("present", True) or s.get("const"):
            continue
        got = tensors.get(s["name"])
        if got is None or got.shape != c.arrays[f"input.{s['key']}"].shape or not np.array_equal(
                got, c.arrays[f"input.{s['key']}"]):
            _record(c, dict(v, result="inconclusive", detail=f"LiteRT's input '{s['name']}' to this node differs "
                            f"from the case's (an upstream node diverged); the node was not verified"), None)
            return "inconclusive"
    got = [tensors.get(s["name"]) for s in c.meta["outputs"]]
    if any(g is None for g in got):
        _record(c, dict(v, result="error", detail="LiteRT kept no value for an output of this node"), None)
        return "error"
    return _compare(c, got, v)


def verify_cases(cases: list[Case], runtime: str = "litert-ref", *, model_path: str | None = None,
                 model_feeds: Mapping[str, np.ndarray] | None = None, timeout: float = 600.0) -> dict[str, int]:
    """Verify ``cases`` in place; returns counts per verdict.  ``model_path``/``model_feeds`` enable the
    whole-model method for cases the one-op writer does not cover."""
    if runtime not in RUNTIMES:
        raise GoldenError(f"unknown --verify runtime '{runtime}' (available: {', '.join(RUNTIMES)})")
    try:  # the one-op writer needs LiteRT's flatbuffer schema whatever the runtime
        import ai_edge_litert  # noqa: F401
    except ImportError:
        raise GoldenError(f"--verify {runtime} needs the ai-edge-litert package (pip install ai-edge-litert)") \
            from None
    if runtime == "tflm":
        try:
            import tflite_micro  # noqa: F401
        except ImportError:
            raise GoldenError("--verify tflm needs the tflite-micro package (pip install tflite-micro)") from None
        base = {"runtime": "tflite-micro", "version": _version("tflite-micro"), "interpreter": "runtime.Interpreter"}
        model_path = None  # whole-model verification is LiteRT-only
    else:
        base = {"runtime": "ai-edge-litert", "version": _version("ai-edge-litert"), "resolver": "BUILTIN_REF"}
    counts = dict.fromkeys(VERDICTS, 0)
    with tempfile.TemporaryDirectory(prefix="refinterp_verify_") as tmp:
        d = Path(tmp)
        jobs: dict[str, tuple[Case, list[str]]] = {}
        rest: list[tuple[Case, str]] = []
        for j, c in enumerate(cases):
            why = supported(c)
            if why:
                rest.append((c, why))
                continue
            model, feeds, outs = case_to_tflite(c)
            _put_job(d, j, model, feeds)
            jobs[str(j)] = (c, outs)
        whole = bool(rest) and model_path is not None and model_feeds is not None \
            and str(model_path).endswith(".tflite")
        if whole:
            _put_job(d, "model", Path(model_path).read_bytes(), model_feeds, keep_all=True)
        all_jobs = list(jobs) + (["model"] if whole else [])
        aborted = _run_jobs(d, all_jobs, timeout, runtime) if all_jobs else {}
        one_op = dict(base, method="one-op model per case, run in a child process")
        for j, (c, outs) in jobs.items():
            if j in aborted or (d / f"{j}.err.txt").exists():
                msg = _one_line(aborted.get(j) or (d / f"{j}.err.txt").read_text())
                _record(c, dict(one_op, result="error", detail=msg[:500]), None)
                counts["error"] += 1
                continue
            res = _get_job(d, j)
            counts[_compare(c, [res[n] for n in outs], one_op)] += 1
        tensors = None
        if whole and "model" not in aborted and not (d / "model.err.txt").exists():
            tensors = _get_job(d, "model")
        for c, why in rest:
            if tensors is not None:
                counts[_whole_model_verdict(c, tensors, base)] += 1
            else:
                detail = why if not whole else f"{why}; whole-model run failed: " + _one_line(
                    aborted.get("model") or (d / "model.err.txt").read_text())[:300]
                _record(c, dict(base, result="unsupported", detail=detail), None)
                counts["unsupported"] += 1
    return counts


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _record(case: Case, verdict: dict, bit_exact: bool | None) -> None:
    prov = case.meta.setdefault("provenance", {})
    prov["verified_against"] = verdict
    prov["bit_exact"] = bit_exact
