"""``refinterp capture --arch arm64``: the aarch64 builds of LiteRT, tflite-runtime 2.14 and ONNX
Runtime, run under qemu user-mode emulation (``arm64_env.py``), as a per-layer "device" dump for a
user without the board.  The child (``arm64_child.py``) runs one model on one sample per process.

The emulated CPU is one of ``arm64_env.CORES`` (``--arm-core``): the core selects the GEMM kernels
(dot-product, i8mm), as on a real board.  This is the official aarch64 wheel on an emulated core,
not the board itself: a dump from the device remains the final word.  tflite-runtime 2.14 computes
some ops in place (a residual ADD overwrites its input's buffer): such overwritten tensors are left
out of its dump.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from ..errors import RefinterpError
from .arm64_env import Arm64EnvMissing, command

ARCHES = ("x86_64", "arm64", "arm64-tflite2.14")
_CHILD = Path(__file__).resolve().with_name("arm64_child.py")


def run_emulated(model: bytes | str, request: dict, feeds: list[np.ndarray], core: str, site: str,
                 timeout: float = 900.0) -> tuple[dict[str, np.ndarray], bytes | None]:
    """Run one model on one sample in the emulated child: (outputs by key, optimized ONNX bytes)."""
    from .capture import RuntimeMissing

    try:
        argv, env = command(core, site)
    except Arm64EnvMissing as e:
        raise RuntimeMissing(e.message) from None
    with tempfile.TemporaryDirectory(prefix="refinterp-arm64-") as tmp:
        d = Path(tmp)
        (d / "model.bin").write_bytes(model if isinstance(model, bytes) else Path(model).read_bytes())
        np.savez(d / "in.npz", **{f"a{i}": np.asarray(x) for i, x in enumerate(feeds)})
        (d / "request.json").write_text(json.dumps(request))
        try:
            proc = subprocess.run(argv + [str(_CHILD), str(d)], env=env, capture_output=True, text=True,
                                  timeout=timeout)
        except subprocess.TimeoutExpired:
            raise RefinterpError(f"the emulated aarch64 runtime did not finish in {timeout:.0f} s") from None
        if (d / "error.txt").exists():
            raise RefinterpError(f"aarch64 {request['runtime']} failed: {(d / 'error.txt').read_text()}")
        if proc.returncode != 0:
            tail = " | ".join(line for line in proc.stderr.strip().splitlines()[-2:] if line.strip())
            raise RefinterpError(f"the emulated aarch64 {request['runtime']} stopped (exit {proc.returncode}): "
                                 f"{tail or 'no message'}")
        keys = json.loads((d / "out.json").read_text())
        with np.load(d / "out.npz", allow_pickle=False) as z:
            out = {k: z[f"a{i}"] for i, k in enumerate(keys)}
        opt = d / "optimized.onnx"
        return out, (opt.read_bytes() if opt.exists() else None)


def _site(arch: str) -> tuple[str, str]:
    """(wheel set, LiteRT module) of an ``--arch`` value."""
    return ("tflite-2.14", "tflite") if arch == "arm64-tflite2.14" else ("litert-2.3", "litert")


def capture_litert_arm64(graph, feed: dict[str, np.ndarray], kind: str, arch: str, core: str) -> dict:
    """Every tensor LiteRT's aarch64 build holds after the run (experimental_preserve_all_tensors),
    named as refinterp's loader names them (by tensor index)."""
    from .capture import _by_index, _order

    site, module = _site(arch)
    resolver = {"litert-ref": "ref", "litert-opt": "opt", "litert-xnnpack": "xnnpack"}[kind]
    names = _by_index(graph)
    feeds = [np.asarray(feed[n]) for n in graph.inputs]
    got, _ = run_emulated(graph.path, {"runtime": module, "resolver": resolver, "inputs": list(graph.inputs)},
                          feeds, core, site)
    by_name = {names[int(k)]: v for k, v in got.items() if int(k) in names}
    return {n: by_name[n] for n in _order(graph) if n in by_name}


class EmulatedOrt:
    """``capture.OrtRunner`` for the aarch64 ONNX Runtime wheel."""

    def __init__(self, core: str) -> None:
        self.core = core

    def run(self, model: bytes | str, level: str, feed: dict[str, np.ndarray],
            save_optimized: bool = False) -> tuple[dict[str, np.ndarray], bytes | None]:
        names = list(feed)
        return run_emulated(model, {"runtime": "onnxruntime", "level": level, "inputs": names,
                                    "save_optimized": save_optimized}, [feed[n] for n in names], self.core,
                            "litert-2.3")
