"""``--verify litert-ref``: re-run every case with LiteRT's reference kernels and record the verdict.

Each case becomes a one-op model (tflite_writer.py) run in a child process (litert_child.py), so a
reference-kernel abort kills the child, not refinterp; the child is restarted after the job that
died.  Verdicts land in ``provenance.verified_against`` and ``provenance.bit_exact``:

* ``match``: every output identical (shape, dtype, values) -> ``bit_exact: true``;
* ``mismatch``: LiteRT disagrees -> ``bit_exact: false``; LiteRT's outputs are stored in
  tensors.npz as ``runtime.output.<k>`` and the first difference in ``verified_against.detail``;
* ``error`` (LiteRT refused or aborted) / ``unsupported`` (no one-op writer) -> ``bit_exact: null``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ..errors import GoldenError
from .case import Case
from .check import first_difference
from .tflite_writer import case_to_tflite, supported

RUNTIMES = ("litert-ref",)


def _litert_version() -> str:
    try:
        from importlib.metadata import version

        return version("ai-edge-litert")
    except Exception:  # noqa: BLE001 - metadata lookups fail in many ways; the version is informative only
        return "unknown"


def _run_jobs(folder: Path, jobs: list[int], timeout: float) -> dict[int, str]:
    """Run the child until every job has a result; returns {job: abort message} for jobs that crashed."""
    aborted: dict[int, str] = {}
    env = dict(os.environ)
    for _ in range(len(jobs) + 1):
        pending = [j for j in jobs if not (folder / f"{j}.out.npz").exists()
                   and not (folder / f"{j}.err.txt").exists() and j not in aborted]
        if not pending:
            break
        (folder / "jobs.json").write_text(json.dumps(pending))
        cur = folder / "current.txt"
        if cur.exists():
            cur.unlink()
        try:
            proc = subprocess.run([sys.executable, "-m", "refinterp.golden.litert_child", str(folder)],
                                  capture_output=True, text=True, timeout=timeout, env=env)
            rc, err = proc.returncode, proc.stderr
        except subprocess.TimeoutExpired:
            rc, err = -9, f"timed out after {timeout:.0f}s"
        if rc == 0:
            continue
        job = int(cur.read_text()) if cur.exists() else pending[0]
        tail = " | ".join(line for line in err.strip().splitlines()[-3:] if line.strip())
        aborted[job] = f"LiteRT child died (exit {rc}): {tail or 'no stderr'}"
    return aborted


def verify_cases(cases: list[Case], runtime: str = "litert-ref", timeout: float = 600.0) -> dict[str, int]:
    """Verify ``cases`` in place; returns counts per verdict."""
    if runtime not in RUNTIMES:
        raise GoldenError(f"unknown --verify runtime '{runtime}' (available: {', '.join(RUNTIMES)})")
    try:
        import ai_edge_litert  # noqa: F401
    except ImportError:
        raise GoldenError("--verify litert-ref needs the ai-edge-litert package (pip install ai-edge-litert)") \
            from None
    base = {"runtime": "ai-edge-litert", "version": _litert_version(), "resolver": "BUILTIN_REF",
            "method": "one-op model per case, run in a child process"}
    counts = {"match": 0, "mismatch": 0, "error": 0, "unsupported": 0}
    with tempfile.TemporaryDirectory(prefix="refinterp_verify_") as tmp:
        d = Path(tmp)
        jobs: dict[int, tuple[Case, list[str]]] = {}
        for j, c in enumerate(cases):
            why = supported(c)
            if why:
                _record(c, dict(base, result="unsupported", detail=why), None)
                counts["unsupported"] += 1
                continue
            model, feeds, outs = case_to_tflite(c)
            (d / f"{j}.tflite").write_bytes(model)
            np.savez(d / f"{j}.in.npz", **feeds)
            jobs[j] = (c, outs)
        aborted = _run_jobs(d, list(jobs), timeout) if jobs else {}
        for j, (c, outs) in jobs.items():
            if j in aborted or (d / f"{j}.err.txt").exists():
                msg = aborted.get(j) or (d / f"{j}.err.txt").read_text()
                _record(c, dict(base, result="error", detail=msg[:500]), None)
                counts["error"] += 1
                continue
            with np.load(d / f"{j}.out.npz", allow_pickle=False) as z:
                got = [z[n] for n in outs]
            diffs = [m for k, (e, g) in enumerate(zip(c.outputs(), got))
                     if (m := first_difference(e, g, f"output.{k}")) is not None]
            if diffs:
                for k, g in enumerate(got):
                    c.arrays[f"runtime.output.{k}"] = g
                _record(c, dict(base, result="mismatch", detail="; ".join(diffs)), False)
                counts["mismatch"] += 1
            else:
                _record(c, dict(base, result="match"), True)
                counts["match"] += 1
    return counts


def _record(case: Case, verdict: dict, bit_exact: bool | None) -> None:
    prov = case.meta.setdefault("provenance", {})
    prov["verified_against"] = verdict
    prov["bit_exact"] = bit_exact
