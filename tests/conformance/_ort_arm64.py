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
import tempfile
from pathlib import Path

import numpy as np

from tests.conformance._int_oracle import run_children


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
            s = ort.InferenceSession((d / f"m{i}.bin").read_bytes(), so, providers=["CPUExecutionProvider"])
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
    return run_children(cases, argv, env, "from tests.conformance._ort_arm64 import _child; import sys; "
                        "_child(*sys.argv[1:])", [], "onnxruntime aarch64", timeout)


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
