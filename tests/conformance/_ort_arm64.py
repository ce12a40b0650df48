"""ONNX Runtime 1.32.0's aarch64 build as an oracle, under qemu (refinterp/dumps/arm64_env.py).

``run_ort_arm64(models, core)`` runs every ``(model bytes, feeds)`` in ONE emulated child (CPU EP,
one thread, default optimisation level) and returns each model's graph outputs by name, or an
``Aborted`` record (a killed child is restarted after the case that killed it).

``harvest(module)`` collects the single-op cases of an x86 ORT test module without running them:
it calls each test function over its ``pytest.mark.parametrize`` grid (the ``onnxruntime-cpu`` /
``ort`` parametrisations only) with the module's ``_check`` replaced by a recorder.
"""
from __future__ import annotations

import inspect
import itertools
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tests.conformance._int_oracle import Aborted


def _child(folder: str, start: str, stop: str) -> None:  # runs in the emulated aarch64 Python
    import onnxruntime as ort

    d = Path(folder)
    for i in range(int(start), int(stop)):
        names = json.loads((d / f"in{i}.json").read_text())
        with np.load(d / f"in{i}.npz", allow_pickle=False) as z:
            feeds = {n: z[f"a{j}"] for j, n in enumerate(names)}
        try:
            so = ort.SessionOptions()
            so.log_severity_level = 3
            so.intra_op_num_threads = 1
            s = ort.InferenceSession((d / f"m{i}.onnx").read_bytes(), so, providers=["CPUExecutionProvider"])
            outs = [o.name for o in s.get_outputs()]
            vals = s.run(None, feeds)
            np.savez(d / f"out{i}.npz", **{f"a{j}": np.asarray(v) for j, v in enumerate(vals)})
            (d / f"out{i}.json").write_text(json.dumps(outs))
        except Exception as e:
            (d / f"err{i}.txt").write_text(f"onnxruntime aarch64 raised {type(e).__name__}: {e}")
        (d / f"done{i}").write_text("")


def run_ort_arm64(cases: list[tuple[bytes, dict]], core: str = "a76", timeout: float = 900.0) -> list:
    from refinterp.dumps.arm64_env import command

    argv, env = command(core, "litert-2.3", path=(str(Path(__file__).resolve().parents[2]),))
    results: list = [None] * len(cases)
    with tempfile.TemporaryDirectory(prefix="ort_arm64_") as tmp:
        d = Path(tmp)
        for i, (model, feeds) in enumerate(cases):
            (d / f"m{i}.onnx").write_bytes(model)
            np.savez(d / f"in{i}.npz", **{f"a{j}": np.asarray(v) for j, v in enumerate(feeds.values())})
            (d / f"in{i}.json").write_text(json.dumps(list(feeds)))
        start = 0
        while start < len(cases):
            code = "from tests.conformance._ort_arm64 import _child; import sys; _child(*sys.argv[1:])"
            proc = subprocess.run(argv + ["-c", code, str(d), str(start), str(len(cases))], env=env,
                                  capture_output=True, text=True, timeout=timeout)
            done = start
            while done < len(cases) and (d / f"done{done}").exists():
                err = d / f"err{done}.txt"
                if err.exists():
                    results[done] = Aborted(err.read_text())
                else:
                    with np.load(d / f"out{done}.npz", allow_pickle=False) as z:
                        names = json.loads((d / f"out{done}.json").read_text())
                        results[done] = {n: z[f"a{j}"] for j, n in enumerate(names)}
                done += 1
            if done < len(cases):
                tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
                results[done] = Aborted(f"onnxruntime aarch64 child exited with {proc.returncode}: {tail}")
                done += 1
            start = done
    return results


def harvest(module) -> list[tuple[str, bytes, dict]]:
    """(case id, model bytes, feeds) of every ORT-oracle parametrisation of ``module``'s tests."""
    out: list[tuple[str, bytes, dict]] = []
    real = module._check

    def record(m, path, feeds, scheme="onnxruntime-cpu", oracle="ort"):
        if oracle == "ort" and scheme == "onnxruntime-cpu":
            out.append((current[0], m.SerializeToString(), {k: np.asarray(v) for k, v in feeds.items()}))

    current = [""]
    module._check = record
    try:
        with tempfile.TemporaryDirectory(prefix="ort_harvest_") as tmp:
            for name, fn in sorted(vars(module).items()):
                if not (name.startswith("test_") and callable(fn)):
                    continue
                params = inspect.signature(fn).parameters
                grids = []
                for mark in getattr(fn, "pytestmark", []):
                    if mark.name == "parametrize":
                        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) \
                            else list(mark.args[0])
                        grids.append([dict(zip(names, v if len(names) > 1 else (v,))) for v in mark.args[1]])
                if set(params) - {"tmp_path"} - {k for g in grids for k in g[0]}:
                    continue  # needs a fixture this harvester does not provide
                for k, combo in enumerate(itertools.product(*grids)):
                    kw = {key: val for part in combo for key, val in part.items()}
                    if kw.get("oracle", "ort") != "ort":
                        continue
                    case_dir = Path(tmp) / f"{name}_{k}"
                    case_dir.mkdir()
                    current[0] = f"{name}[{','.join(str(v) for v in kw.values())}]"
                    fn(**({"tmp_path": case_dir} if "tmp_path" in params else {}), **kw)
    finally:
        module._check = real
    return out
