"""Batched oracles for the TFLite integer conformance tests (many one-op models per child process).

``run_batch(cases, backend)`` runs every ``(model_bytes, feeds)`` in ONE child Python (imports are
the expensive part) and returns, per case, ``{tensor name: array}`` (every tensor that holds data:
LiteRT ``BUILTIN_REF`` with ``experimental_preserve_all_tensors``; tflite-micro with
``kPreserveAllTensors``) or an ``Aborted`` record when the oracle raised or killed the child.
A child killed by a signal on case k is restarted at case k+1, and case k is reported as
``Aborted`` with the signal: aborts are findings, never silently skipped.

``compare(case_results, session_results)`` -> (compared tensors, differing elements, details).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

BACKENDS = ("ref", "tflm", "opt", "xnnpack")
# The aarch64 LiteRT builds under qemu (refinterp/dumps/arm64_env.py): "<resolver>-arm64[-2.14][@core]",
# e.g. "opt-arm64" (LiteRT 2.3, Cortex-A76), "opt-arm64@a53", "xnnpack-arm64@i8mm", "opt-arm64-2.14"
# (tflite-runtime 2.14, the old package).
ARM64 = re.compile(r"^(ref|opt|xnnpack)-arm64(-2\.14)?(?:@(a53|a76|i8mm))?$")
# tflite-runtime 2.14 on this x86-64 host (its own numpy 1.26 site, no emulation): "opt-2.14", ...
OLD_X86 = re.compile(r"^(ref|opt|xnnpack)-2\.14$")


def arm64_skip_reason(backend: str) -> str | None:
    """None when the aarch64 backend can run here, else why not (for pytest.skip)."""
    from refinterp.dumps.arm64_env import status

    m = ARM64.match(backend)
    why = status("tflite-2.14-x86_64" if OLD_X86.match(backend) else "tflite-2.14" if m and m.group(2)
                 else "litert-2.3")
    return f"aarch64 runtimes not available ({why}; python -m refinterp.dumps.arm64_env builds them)" if why else None


def _child_argv(backend: str) -> tuple[list[str], dict[str, str]]:
    """The child Python and its environment.  The old-runtime children also get refinterp/dumps on
    their path, for ``arm64_child.overwritten`` (a standalone module: refinterp itself is not
    importable beside their own NumPy)."""
    from refinterp.dumps import arm64_env

    here, dumps = str(Path(__file__).resolve().parent), str(Path(arm64_env.__file__).parent)
    if OLD_X86.match(backend):
        return [sys.executable], dict(os.environ, PYTHONPATH=os.pathsep.join(
            [here, dumps, str(arm64_env.host_site("tflite-2.14-x86_64"))]))
    m = ARM64.match(backend)
    if m is None:
        return [sys.executable], dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [here,
                                                                             os.environ.get("PYTHONPATH")])))
    return arm64_env.command(m.group(3) or "a76", "tflite-2.14" if m.group(2) else "litert-2.3", path=(here, dumps))


@dataclass
class Aborted:
    message: str


def run_batch(cases: list[tuple[bytes, dict[str, np.ndarray]]], backend: str, timeout: float = 300.0):
    if backend not in BACKENDS and not ARM64.match(backend) and not OLD_X86.match(backend):
        raise ValueError(backend)
    python, env = _child_argv(backend)
    return run_children(cases, python, env, "import _int_oracle as m, sys; m._child(*sys.argv[1:])", [backend],
                        f"{backend} oracle", timeout)


def run_children(cases: list[tuple[bytes, dict[str, np.ndarray]]], python: list[str], env: dict[str, str],
                 code: str, args: list[str], label: str, timeout: float) -> list:
    """Run ``python -c code FOLDER *args START STOP`` until every case is done.  The folder holds
    m{i}.bin and in{i}.npz / in{i}.json; the child writes out{i}.npz / out{i}.json or err{i}.txt, then
    done{i}.  A child killed on case k is restarted at k + 1, case k reported as ``Aborted``."""
    results: list = [None] * len(cases)
    with tempfile.TemporaryDirectory(prefix="oracle_") as tmp:
        d = Path(tmp)
        for i, (model, feeds) in enumerate(cases):
            (d / f"m{i}.bin").write_bytes(bytes(model))
            np.savez(d / f"in{i}.npz", **{f"a{j}": np.asarray(v) for j, v in enumerate(feeds.values())})
            (d / f"in{i}.json").write_text(json.dumps(list(feeds)))
        start = 0
        while start < len(cases):
            proc = subprocess.run(python + ["-c", code, str(d), *args, str(start), str(len(cases))],
                                  capture_output=True, text=True, timeout=timeout, env=env)
            done = start
            while done < len(cases) and (d / f"done{done}").exists():
                done += 1
            for i in range(start, done):
                err = d / f"err{i}.txt"
                if err.exists():
                    results[i] = Aborted(err.read_text())
                else:
                    with np.load(d / f"out{i}.npz", allow_pickle=False) as z:
                        names = json.loads((d / f"out{i}.json").read_text())
                        results[i] = {n: z[f"a{j}"] for j, n in enumerate(names)}
            if done < len(cases) and proc.returncode != 0:
                sig = proc.returncode
                what = (f"killed by {signal.Signals(-sig).name}" if sig < 0 else f"exited with status {sig}")
                tail = " | ".join(line for line in proc.stderr.strip().splitlines()[-3:] if line.strip())
                results[done] = Aborted(f"{label} {what}: {tail}")
                done += 1
            elif done < len(cases):
                raise RuntimeError(f"{label} child stopped at case {done} without error: {proc.stderr[-500:]}")
            start = done
    return results


def _handles(model: bytes) -> set[int]:
    """Subgraph 0's RESOURCE / VARIANT tensors: handles, no values (reading one crashes TFLite Micro)."""
    from ai_edge_litert import schema_py_generated as fb

    sg = fb.Model.GetRootAs(model, 0).Subgraphs(0)
    kinds = (fb.TensorType.RESOURCE, fb.TensorType.VARIANT)
    return {i for i in range(sg.TensorsLength()) if sg.Tensors(i).Type() in kinds}


def _names(model: bytes) -> list[str]:
    from ai_edge_litert import schema_py_generated as fb

    m = fb.Model.GetRootAs(model, 0)
    sg = m.Subgraphs(0)
    out, seen = [], set()
    for i in range(sg.TensorsLength()):  # refinterp's naming: "tensor:<i>" if nameless, "<name>:<i>" if repeated
        name = (sg.Tensors(i).Name() or b"").decode()
        out.append(f"{name or 'tensor'}:{i}" if (not name or name in seen) else name)
        seen.add(name)
    return out


def _run_ref(model: bytes, feeds: dict) -> dict[str, np.ndarray]:
    from litert_oracle import run_litert

    return run_litert(model, feeds, "ref", preserve_all=True)


DELEGATED_KEY = "__delegated_ops__"  # xnnpack backend: one uint8 flag per node of the model


def _run_litert(resolver: str):
    """opt / xnnpack: LiteRT with preserve_all_tensors.  For xnnpack the result also holds
    ``DELEGATED_KEY``: flag i is 1 when node i ended up inside a DELEGATE node."""
    def run(model: bytes, feeds: dict) -> dict[str, np.ndarray]:
        from litert_oracle import _interpreter_module, _resolver_type, run_litert

        Interpreter = _interpreter_module().Interpreter

        res = run_litert(model, feeds, resolver, preserve_all=True)
        if resolver == "xnnpack":
            it = Interpreter(model_content=bytes(model), num_threads=1,
                             experimental_op_resolver_type=_resolver_type(resolver),
                             experimental_preserve_all_tensors=True)
            it.allocate_tensors()  # the delegate is applied lazily: before this no DELEGATE node exists
            ops = it._get_ops_details()
            delegated = {tuple(o["outputs"]) for o in ops if o["op_name"] == "DELEGATE"}
            plain = [o for o in ops if o["op_name"] != "DELEGATE"]
            res[DELEGATED_KEY] = np.array([tuple(o["outputs"]) in delegated for o in plain], np.uint8)
        return res
    return run


def _run_tflm(model: bytes, feeds: dict) -> dict[str, np.ndarray]:
    from tflite_micro.python.tflite_micro import runtime

    it = runtime.Interpreter.from_bytes(model, arena_size=1 << 22,
                                        intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
    for j, v in enumerate(feeds.values()):  # feeds are given in the model's input order
        it.set_input(np.ascontiguousarray(v), j)
    it.invoke()
    out = {}
    handles = _handles(model)
    for i, name in enumerate(_names(model)):
        if i in handles:
            continue
        t = it.GetTensor(i, 0)
        if isinstance(t, dict) and t.get("tensor_data") is not None:
            out[name] = np.array(t["tensor_data"])
    return out


def _child(folder: str, backend: str, start: str, stop: str) -> None:
    d = Path(folder)
    backend = backend.split("-arm64")[0].split("-2.14")[0]  # the resolver
    run = {"ref": _run_ref, "tflm": _run_tflm}.get(backend) or _run_litert(backend)
    for i in range(int(start), int(stop)):
        names = json.loads((d / f"in{i}.json").read_text())
        with np.load(d / f"in{i}.npz", allow_pickle=False) as z:
            feeds = {n: z[f"a{j}"] for j, n in enumerate(names)}
        try:
            res = run((d / f"m{i}.bin").read_bytes(), feeds)
            res = {k: v for k, v in res.items() if np.asarray(v).dtype != object}  # resource / variant handles
            np.savez(d / f"out{i}.npz", **{f"a{j}": v for j, v in enumerate(res.values())})
            (d / f"out{i}.json").write_text(json.dumps(list(res)))
        except Exception as e:  # an error status from the oracle: a finding for that case
            (d / f"err{i}.txt").write_text(f"{backend} oracle raised {type(e).__name__}: {e}")
        (d / f"done{i}").write_text("")
        sys.stdout.flush()


def compare(oracle: dict[str, np.ndarray], ours: dict[str, np.ndarray]) -> tuple[int, int, list[str]]:
    """Compare every tensor both sides hold (graph inputs and every op output)."""
    tensors = diff = 0
    notes = []
    for name, v in ours.items():
        if name not in oracle:
            notes.append(f"{name}: missing in oracle")
            continue
        o = oracle[name]
        tensors += 1
        if o.shape != v.shape or o.dtype != v.dtype:
            notes.append(f"{name}: oracle {o.dtype}{list(o.shape)} vs ours {v.dtype}{list(v.shape)}")
            diff += max(o.size, v.size)
            continue
        n = int(np.count_nonzero(o != v))
        if n:
            i = int(np.flatnonzero(o.ravel() != v.ravel())[0])
            notes.append(f"{name}: {n}/{o.size} differ (first at {i}: oracle {o.ravel()[i]} ours {v.ravel()[i]})")
        diff += n
    return tensors, diff, notes
