"""Child process of ``--verify``: runs each job's model with LiteRT BUILTIN_REF or TFLite Micro.

Run as ``python -m refinterp.golden.litert_child FOLDER``.  ``FOLDER/jobs.json`` is
``{"backend": "litert-ref" | "tflm", "jobs": [ids]}``;
job ``j`` has ``j.tflite`` and ``j.in.npz`` (feeds by input name); ``j.all`` marks a whole-model job
whose every tensor is kept (``experimental_preserve_all_tensors``).  After each job the child writes
``j.out.npz`` (arrays ``a<i>``) + ``j.out.json`` (their tensor names) or ``j.err.txt``, so a parent whose child was killed by an abort
(reference kernels use TF_LITE_ASSERT) knows exactly which job was running.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def _keys(details: list[dict]) -> dict[int, str]:
    """Tensor names as refinterp's IR spells them: a repeated name gets ``:<index>``."""
    seen: set[str] = set()
    keys: dict[int, str] = {}
    for d in sorted(details, key=lambda d: d["index"]):
        keys[d["index"]] = d["name"] if d["name"] not in seen else f"{d['name']}:{d['index']}"
        seen.add(d["name"])
    return keys


def run_one(model: bytes, feeds: dict[str, np.ndarray], keep_all: bool = False) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF,
                     experimental_preserve_all_tensors=keep_all)
    details = it.get_tensor_details()
    keys = _keys(details)
    handles = {d["index"] for d in details if np.dtype(d["dtype"]).kind == "O"}  # reading one: SIGSEGV
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.ascontiguousarray(feeds[keys[d["index"]]]).astype(d["dtype"]))
    it.invoke()
    wanted = sorted(keys) if keep_all else [d["index"] for d in it.get_output_details()]
    out = {}
    for idx in wanted:
        if idx in handles:
            continue
        try:
            out[keys[idx]] = np.array(it.get_tensor(idx))
        except ValueError:  # a tensor without data
            continue
    return out


def run_one_tflm(model: bytes, feeds: dict[str, np.ndarray], keep_all: bool = False) -> dict[str, np.ndarray]:
    """TFLM (the tflite_micro package): feeds in the model's input order, outputs named ``out<k>``."""
    from tflite_micro.python.tflite_micro import runtime

    if keep_all:
        raise ValueError("whole-model verification is not implemented for tflite-micro")
    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 22)
    for j, v in enumerate(feeds.values()):
        it.set_input(np.ascontiguousarray(v), j)
    it.invoke()
    out: dict[str, np.ndarray] = {}
    for k in range(256):
        try:
            it.get_output_details(k)
        except IndexError:
            break
        out[f"out{k}"] = np.array(it.get_output(k))
    return out


def main(folder: str) -> int:
    d = Path(folder)
    req = json.loads((d / "jobs.json").read_text())
    run = run_one_tflm if req.get("backend") == "tflm" else run_one
    for job in req["jobs"]:
        if (d / f"{job}.out.npz").exists() or (d / f"{job}.err.txt").exists():
            continue
        (d / "current.txt").write_text(str(job))
        with np.load(d / f"{job}.in.npz", allow_pickle=False) as z:
            feed_names = json.loads((d / f"{job}.in.json").read_text())
            feeds = {n: z[f"a{i}"] for i, n in enumerate(feed_names)}
        try:
            outs = run((d / f"{job}.tflite").read_bytes(), feeds, (d / f"{job}.all").exists())
        except Exception as e:  # a clean LiteRT error: recorded for this job, the next jobs still run
            (d / f"{job}.err.txt").write_text(f"{type(e).__name__}: {e}")
            continue
        names = list(outs)
        (d / f"{job}.out.json").write_text(json.dumps(names))
        np.savez(d / f"{job}.out.tmp.npz", **{f"a{i}": outs[n] for i, n in enumerate(names)})
        (d / f"{job}.out.tmp.npz").replace(d / f"{job}.out.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
