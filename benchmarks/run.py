"""refinterp benchmarks: latency vs the real runtimes, first-run cost, peak memory.

    python benchmarks/run.py [--threads N] [--models small,mnv2_224,onnx_qdq,mnv2_224_qdq,mnv2_224_qdq_u8]
                             [--json OUT] [--no-cold] [--numpy-kernels] [--tf-python PYTHON]

For each model x scheme: refinterp's median latency, the real runtime's (LiteRT
BUILTIN_WITHOUT_DEFAULT_DELEGATES / BUILTIN_REF / default XNNPACK; ONNX Runtime CPU) measured in the
same child process with the same thread count, the ratio, ``capture="all"`` overhead, the first
(compiling) run, tracemalloc peak of one run and the child's ru_maxrss.  One child process per
model (BUILTIN_REF in a child of its own: it can abort).  Also: ``refinterp run`` wall time on the
small model with a warm Numba cache and with an empty one (cold compile).

The MobileNetV2-224 int8 model is generated on first use into benchmarks/.cache/ by
tools/make_bench_models.py, with the first Python that imports tensorflow among --tf-python,
$REFINTERP_TF_PYTHON and this interpreter; the QDQ MobileNetV2-224 ONNX models (``mnv2_224_qdq``:
int8 activations, ``mnv2_224_qdq_u8``: uint8 activations; int8 per-channel weights) by the same
script with this interpreter (onnx + onnxruntime only).  Benchmarks are never unit tests.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"
sys.path.insert(0, str(REPO))

from _measure import EXACT, SIMULATES  # noqa: E402  (scheme -> runtime timed against / reproduced)
from refinterp.settings import thread_env  # noqa: E402

TFLITE_SCHEMES = ["tflite-reference", "tflite-optimized", "tflite-xnnpack"]
MNV2 = CACHE / "mobilenet_v2_224_int8.tflite"
# QDQ MobileNetV2-224 ONNX models made by tools/make_bench_models.py with this interpreter (no tensorflow)
GENERATED_ONNX = {"mnv2_224_qdq": CACHE / "mobilenet_v2_224_qdq.onnx",
                  "mnv2_224_qdq_u8": CACHE / "mobilenet_v2_224_qdq_u8.onnx",
                  "llm_int4": CACHE / "llm_int4_matmulnbits.onnx",
                  "mnv2_224_f32": CACHE / "mobilenet_v2_224_f32.onnx"}
MODELS = {
    "small": ("tflite", REPO / "tests/fixtures/tflite/mobilenet_v2_tiny_int8.tflite"),
    "mnv2_224": ("tflite", MNV2),
    "onnx_qdq": ("onnx", REPO / "tests/fixtures/onnx/small_cnn_qdq_s8s8.onnx"),
    "mnv2_224_qdq": ("onnx", GENERATED_ONNX["mnv2_224_qdq"]),
    "mnv2_224_qdq_u8": ("onnx", GENERATED_ONNX["mnv2_224_qdq_u8"]),
    # int4 weight-only MatMulNBits at accuracy_level 4 (CPU only: the QNN EP does not take it)
    "llm_int4": ("onnx_cpu", GENERATED_ONNX["llm_int4"]),
    # the float MobileNetV2-224 (ORT_ENABLE_ALL: NCHWc convolutions; refinterp's float_conv_nchwc.py)
    "mnv2_224_f32": ("onnx_cpu", GENERATED_ONNX["mnv2_224_f32"]),
}


def _has_tf(py: str) -> bool:
    try:
        return subprocess.run([py, "-c", "import tensorflow"], capture_output=True, timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def ensure_mnv2(tf_python: str | None) -> bool:
    if MNV2.exists():
        return True
    cands = [p for p in (tf_python, os.environ.get("REFINTERP_TF_PYTHON"), sys.executable) if p]
    py = next((p for p in cands if _has_tf(p)), None)
    if py is None:
        print(f"[skip] {MNV2.name} missing and no Python with tensorflow found. Make it with:\n"
              f"  <python with tensorflow-cpu> tools/make_bench_models.py --out {CACHE}\n"
              f"or pass --tf-python PATH (or set REFINTERP_TF_PYTHON).", file=sys.stderr)
        return False
    print(f"generating {MNV2.name} with {py} ...", file=sys.stderr)
    r = subprocess.run([py, str(REPO / "tools/make_bench_models.py"), "--out", str(CACHE)], cwd=REPO)
    return r.returncode == 0 and MNV2.exists()


# Qualcomm's HTP emulation (onnxruntime-qnn) and the schemes that reproduce it, when installed
HTP = (["qnn-htp-v68", "qnn-htp-v73"], ["htp-emulator-68", "htp-emulator-73"])


def _has_htp() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime_qnn") is not None


def ensure_onnx(name: str) -> bool:
    """Generate a QDQ MobileNetV2 ONNX model on first use (needs only onnx + onnxruntime)."""
    path = GENERATED_ONNX[name]
    if path.exists():
        return True
    print(f"generating {path.name} ...", file=sys.stderr)
    r = subprocess.run([sys.executable, str(REPO / "tools/make_bench_models.py"), "--model", name,
                        "--out", str(CACHE)], cwd=REPO)
    return r.returncode == 0 and path.exists()


def child(spec: dict, env: dict, timeout: float = 600) -> dict:
    try:
        r = subprocess.run([sys.executable, str(HERE / "_measure.py"), json.dumps(spec)], env=env,
                           capture_output=True, text=True, timeout=timeout, cwd=REPO)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (r.stderr.strip().splitlines() or ["(no output)"])[-1][:200]
    return {"error": f"child exited {r.returncode}: {tail}"}


def cli_wall(model: Path, env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "refinterp", "run", str(model), "--scheme", "tflite-reference",
                        "--random-inputs", "0", "--quiet"], env=env, capture_output=True, cwd=REPO)
    dt = time.perf_counter() - t
    return dt if r.returncode == 0 else float("nan")


def cli_batch(model: Path, env: dict, n: int, workers: int) -> dict:
    """``refinterp run --inputs`` on an ``n``-sample batch .npz: whole CLI wall time (process start,
    worker spawn and prepare included) and samples/s over that wall time."""
    sys.path.insert(0, str(REPO))
    import numpy as np

    import refinterp
    from refinterp.cli.common import random_inputs

    g = refinterp.load(str(model))
    feeds = [random_inputs(g, k) for k in range(n)]
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "batch.npz"
        np.savez(src, **{name: np.stack([f[name] for f in feeds]) for name in g.inputs})
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "refinterp", "run", str(model), "--scheme", "tflite-reference",
                            "--inputs", str(src), "--workers", str(workers), "--outputs", str(Path(d) / "o.npz")],
                           env=env, capture_output=True, cwd=REPO)
        dt = time.perf_counter() - t
    if r.returncode:
        return {"error": r.stderr.decode(errors="replace").strip()[-200:]}
    # the CLI's own report: "<n> samples in <s> s: <r> samples/s (<w> workers)" (worker spawn included)
    said = [ln for ln in r.stdout.decode(errors="replace").splitlines() if "samples/s" in ln]
    return {"samples": n, "workers": workers, "wall_s": dt, "samples_per_s": n / dt,
            "reported": said[-1].strip() if said else ""}


TARGETS = {"litert-opt": "<= 1.00x", "litert-ref": "<= 0.10x", "onnxruntime": "<= 3.00x"}


def _ms(v) -> str:
    return "-" if v is None else f"{v * 1e3:.1f}"


def table(results: dict) -> str:
    hdr = ("| model | scheme | refinterp ms | capture=all | runtime | runtime ms | ratio | target | bit-exact output | "
           "prepare s | first run s | peak run MB | child maxrss MB |")
    lines = [hdr, "|" + "---|" * (hdr.count("|") - 1)]
    for model, res in results.items():
        if "error" in res:
            lines.append(f"| {model} | - | error: {res['error']} |" + " |" * 10)
            continue
        rts = res.get("runtimes", {})
        for scheme, r in res["schemes"].items():
            if "error" in r:
                lines.append(f"| {model} | {scheme} | error: {r['error']} |" + " |" * 10)
                continue
            over = r["capture_all_median_s"] / r.get("plain_beside_capture_median_s", r["median_s"]) - 1
            # issue 8: every TFLite scheme <= 1.0x LiteRT optimized and >= 10x faster than BUILTIN_REF;
            # ONNX <= 3x ONNX Runtime; XNNPACK's own time is shown for the scheme that reproduces it
            comps = [SIMULATES[scheme]] + [c for c in ("litert-opt", "litert-ref")
                                           if scheme.startswith("tflite") and c != SIMULATES[scheme]]
            for i, rt in enumerate(comps):
                rr = rts.get(rt, {})
                # first row: the runtime timed interleaved with this scheme's runs (same machine state,
                # each evicting the other's caches); other rows: both timed back to back, alone
                pair = i == 0 and r.get("partner_median_s") is not None
                rms = r["partner_median_s"] if pair else rr.get("median_s")
                mine = r["median_s"] if pair else r.get("alone_median_s", r["median_s"])
                ratio = (f"{mine / rms:.2f}x" + (f" ({rms / mine:.1f}x faster)" if mine < rms else "")
                         if rms else rr.get("error", "-")[:60])
                eq = {True: f"yes ({EXACT[scheme]})", False: f"NO ({EXACT[scheme]})", None: "-",
                      "ulp": f"codes yes, floats 1 ulp ({EXACT[scheme]})"}[res.get("exact", {}).get(scheme)]
                target = TARGETS.get(rt, "-")
                cells = [model, scheme, _ms(mine), f"{over:+.0%}", rt, _ms(rms), ratio, target, eq,
                         f"{r['prepare_s']:.2f}", f"{r['first_run_s']:.2f}",
                         f"{r['tracemalloc_peak_run_mb']:.0f}", f"{res['ru_maxrss_mb']:.0f}"]
                if i:  # a further comparison row for the same scheme
                    cells = [c if j in (2, 4, 5, 6, 7) else "" for j, c in enumerate(cells)]
                    cells[8] = "-"
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def profile_lines(results: dict, top: int = 4) -> str:
    out = []
    for model, res in results.items():
        for scheme, r in res.get("schemes", {}).items():
            ops = r.get("per_op_s")
            if ops:
                tot = sum(ops.values()) or 1.0
                parts = ", ".join(f"{k} {v * 1e3:.0f} ms ({v / tot:.0%})" for k, v in list(ops.items())[:top])
                out.append(f"- {model} / {scheme}: {parts}")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="refinterp benchmarks (see benchmarks/README.md)")
    ap.add_argument("--threads", type=int, default=1,
                    help="threads for refinterp (BLAS + Numba), LiteRT and ONNX Runtime alike (default 1: "
                         "on a shared, loaded machine extra threads measure oversubscription)")
    ap.add_argument("--numpy-kernels", action="store_true",
                    help="measure the NumPy reference path only (REFINTERP_FAST_KERNELS=0), without the "
                         "Numba fast kernels")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--json", help="also write the raw results here")
    ap.add_argument("--tf-python", help="a Python with tensorflow, to generate the MobileNetV2-224 model")
    ap.add_argument("--no-cold", action="store_true", help="skip the cold-Numba-cache CLI measurement")
    ap.add_argument("--no-extras", action="store_true",
                    help="skip memory.py (dropped Sessions) and neighbours.py (slowdown of LiteRT next to refinterp)")
    args = ap.parse_args(argv)
    env = {**os.environ, **thread_env(args.threads), "PYTHONPATH": str(REPO),
           "REFINTERP_FAST_KERNELS": "0" if args.numpy_kernels else "1"}
    t_start = time.perf_counter()
    results: dict = {}
    wanted = [s.strip() for s in args.models.split(",") if s.strip()]
    for m in wanted:
        if m not in MODELS:
            ap.error(f"unknown model {m!r}; known: {', '.join(MODELS)}")
        kind, path = MODELS[m]
        if m == "mnv2_224" and not ensure_mnv2(args.tf_python):
            continue
        if m in GENERATED_ONNX and not ensure_onnx(m):
            continue
        print(f"measuring {m} ...", file=sys.stderr, flush=True)
        if kind == "tflite":
            res = child({"path": str(path), "schemes": TFLITE_SCHEMES,
                         "runtimes": ["litert-opt", "litert-xnnpack"]}, env)
            ref = child({"path": str(path), "runtimes": ["litert-ref"], "check_schemes": ["tflite-reference"],
                         "reps": {"min_reps": 3, "max_reps": 10, "budget_s": 2.0}}, env)
            if "runtimes" in res:
                res["runtimes"]["litert-ref"] = ref.get("runtimes", {}).get("litert-ref", ref)
                res.setdefault("exact", {}).update(ref.get("exact", {}))
        else:
            htp = HTP if kind == "onnx" and _has_htp() else ([], [])
            res = child({"path": str(path), "schemes": ["onnxruntime-cpu"] + htp[0],
                         "runtimes": ["onnxruntime"] + htp[1]}, env)
        results[m] = res
    small = MODELS["small"][1]
    cli = {"warm_s": cli_wall(small, env)}
    if not args.no_cold:
        with tempfile.TemporaryDirectory() as d:
            cli["cold_s"] = cli_wall(small, {**env, "NUMBA_CACHE_DIR": d})
            shutil.rmtree(d, ignore_errors=True)
    # long enough that spawning the workers (~1-2 s: imports, model load, warm Numba cache) is amortised
    batch_model, batch_n = (MNV2, 400) if MNV2.exists() and "mnv2_224" in wanted else (small, 1000)
    batch = [cli_batch(batch_model, env, batch_n, w) for w in (1, 2)]
    import platform

    print(f"\nnumpy-kernels={args.numpy_kernels}  threads={args.threads}  python {platform.python_version()}  "
          f"machine {platform.machine()}  cpus={os.cpu_count()}  load avg {os.getloadavg()[0]:.1f}")
    print(table(results))
    print(f"\n`refinterp run` small model (tflite-reference): warm Numba cache {cli['warm_s']:.2f} s"
          + (f", empty cache (compiles) {cli['cold_s']:.2f} s" if "cold_s" in cli else ""))
    for b in batch:
        print(f"`refinterp run --inputs` {batch_n}-sample batch of {batch_model.name} (tflite-reference), "
              + (f"error: {b['error']}" if "error" in b else
                 f"{b['workers']} worker(s): {b['wall_s']:.2f} s CLI wall ({b['samples_per_s']:.1f} samples/s); "
                 f"CLI says: {b['reported']}"))
    print("\nwhere refinterp's time goes (per op type, one timed run):")
    print(profile_lines(results))
    if not args.no_extras:
        for script in ("memory.py", "neighbours.py"):
            print(f"\n{script}:", flush=True)
            subprocess.run([sys.executable, str(HERE / script)], cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    print(f"\nbenchmark wall time {time.perf_counter() - t_start:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"threads": args.threads, "numpy_kernels": args.numpy_kernels,
                                               "results": results, "cli": cli, "batch": batch},
                                              indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
