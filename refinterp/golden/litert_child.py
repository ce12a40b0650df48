"""Child process of ``--verify litert-ref``: runs each job's one-op model with LiteRT BUILTIN_REF.

Run as ``python -m refinterp.golden.litert_child FOLDER``.  ``FOLDER/jobs.json`` lists job ids;
job ``j`` has ``j.tflite`` and ``j.in.npz`` (feeds by input name).  After each job the child writes
``j.out.npz`` (outputs by name) or ``j.err.txt``, so a parent whose child was killed by an abort
(reference kernels use TF_LITE_ASSERT) knows exactly which job was running.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np


def run_one(model: bytes, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    it = Interpreter(model_content=model, num_threads=1,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], np.ascontiguousarray(feeds[d["name"]]))
    it.invoke()
    return {d["name"]: np.array(it.get_tensor(d["index"])) for d in it.get_output_details()}


def main(folder: str) -> int:
    d = Path(folder)
    for job in json.loads((d / "jobs.json").read_text()):
        if (d / f"{job}.out.npz").exists() or (d / f"{job}.err.txt").exists():
            continue
        (d / "current.txt").write_text(str(job))
        with np.load(d / f"{job}.in.npz", allow_pickle=False) as z:
            feeds = {k: z[k] for k in z.files}
        try:
            outs = run_one((d / f"{job}.tflite").read_bytes(), feeds)
        except Exception as e:  # a clean LiteRT error: recorded for this job, the next jobs still run
            (d / f"{job}.err.txt").write_text(f"{type(e).__name__}: {e}")
            continue
        np.savez(d / f"{job}.out.tmp.npz", **outs)
        (d / f"{job}.out.tmp.npz").replace(d / f"{job}.out.npz")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
