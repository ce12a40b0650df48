"""One model, measured in this (child) process: refinterp per scheme and the real runtimes.

Run by benchmarks/run.py as ``python benchmarks/_measure.py SPEC_JSON``; prints one JSON line.
Thread counts come from the environment the parent sets (settings.thread_env).  LiteRT
BUILTIN_REF can abort the process on a failed TF_LITE_ASSERT, so the parent runs it alone
(``"runtimes": ["litert-ref"]``, no schemes) in its own child.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

import numpy as np


# scheme -> the runtime whose latency it is held to (issue 8) / whose outputs it reproduces bit-exactly
SIMULATES = {"tflite-reference": "litert-opt", "tflite-optimized": "litert-opt",
             "tflite-xnnpack": "litert-xnnpack", "onnxruntime-cpu": "onnxruntime",
             "qnn-htp-v68": "htp-emulator-68", "qnn-htp-v73": "htp-emulator-73"}
EXACT = {"tflite-reference": "litert-ref", "tflite-optimized": "litert-opt",
         "tflite-xnnpack": "litert-xnnpack", "onnxruntime-cpu": "onnxruntime",
         "qnn-htp-v68": "htp-emulator-68", "qnn-htp-v73": "htp-emulator-73"}


def timed(fn, min_reps: int, max_reps: int, budget_s: float) -> list[float]:
    """Wall times of ``fn()``: at least ``min_reps``, then more until ``budget_s`` or ``max_reps``."""
    out: list[float] = []
    start = time.perf_counter()
    while len(out) < max_reps and (len(out) < min_reps or time.perf_counter() - start < budget_s):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def timed_pair(fa, fb, min_reps: int, max_reps: int, budget_s: float) -> tuple[list[float], list[float]]:
    """Alternate ``fa()`` and ``fb()`` (so a change in machine load hits both alike)."""
    ta: list[float] = []
    tb: list[float] = []
    start = time.perf_counter()
    while len(ta) < max_reps and (len(ta) < min_reps or time.perf_counter() - start < 2 * budget_s):
        t = time.perf_counter()
        fa()
        ta.append(time.perf_counter() - t)
        t = time.perf_counter()
        fb()
        tb.append(time.perf_counter() - t)
    return ta, tb


def make_feeds(graph, seed: int = 0) -> dict[str, np.ndarray]:
    from refinterp.ir import storage_dtype

    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        info = graph.tensors[name]
        shape = [d if isinstance(d, int) and d > 0 else 1 for d in (info.shape or [1])]
        dt = storage_dtype(info.dtype)
        if dt.kind in "iu":
            ii = np.iinfo(dt)
            feeds[name] = rng.integers(ii.min, int(ii.max) + 1, size=shape).astype(dt)
        else:
            feeds[name] = rng.uniform(-1.0, 1.0, size=shape).astype(dt)
    return feeds


def bench_refinterp(path: str, scheme: str, feeds, reps: dict, partner=None) -> dict:
    """``partner``: the runtime's invoke, timed interleaved with refinterp's plain runs."""
    import refinterp

    t0 = time.perf_counter()
    sess = refinterp.Session(refinterp.load(path), scheme)
    t1 = time.perf_counter()
    sess.run(feeds)
    t2 = time.perf_counter()
    alone = timed(lambda: sess.run(feeds), **reps)  # back to back: its caches stay warm, as a runtime's do
    if partner is not None:
        plain, other = timed_pair(lambda: sess.run(feeds), partner, **reps)
    else:
        plain, other = alone, []
    cap, plain2 = timed_pair(lambda: sess.run(feeds, capture="all"), lambda: sess.run(feeds), **reps)
    tracemalloc.start()
    sess.run(feeds)
    peak_plain = tracemalloc.get_traced_memory()[1]
    tracemalloc.reset_peak()
    sess.run(feeds, capture="all")
    peak_all = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    sess.timings = {}
    sess.run(feeds, timing=True)
    per_op: dict[str, float] = {}
    for st in sess.steps:
        per_op[st.node.op] = per_op.get(st.node.op, 0.0) + sess.timings.get(st.node.name, 0.0)
    outs = sess.run(feeds)
    return {"outputs": [np.asarray(outs[o]) for o in sess.graph.outputs],
            "prepare_s": t1 - t0, "first_run_s": t2 - t1, "median_s": statistics.median(plain),
            "capture_all_median_s": statistics.median(cap), "plain_beside_capture_median_s": statistics.median(plain2),
            "partner_median_s": statistics.median(other) if other else None, "reps": len(plain),
            "alone_median_s": statistics.median(alone),
            "tracemalloc_peak_run_mb": peak_plain / 2**20, "tracemalloc_peak_capture_all_mb": peak_all / 2**20,
            "per_op_s": dict(sorted(per_op.items(), key=lambda kv: -kv[1]))}


def _outputs(path: str, scheme: str, feeds) -> list[np.ndarray] | None:
    import refinterp

    try:
        sess = refinterp.Session(refinterp.load(path), scheme)
        outs = sess.run(feeds)
        return [np.asarray(outs[o]) for o in sess.graph.outputs]
    except Exception:
        return None


def bench_litert(path: str, resolver: str, feeds, threads: int, reps: dict) -> dict:
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    kind = {"litert-opt": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
            "litert-ref": OpResolverType.BUILTIN_REF, "litert-xnnpack": OpResolverType.BUILTIN}[resolver]
    it = Interpreter(model_path=path, num_threads=threads, experimental_op_resolver_type=kind)
    it.allocate_tensors()
    for d, x in zip(it.get_input_details(), feeds.values()):
        it.set_tensor(d["index"], np.ascontiguousarray(x.astype(d["dtype"])))
    t = time.perf_counter()
    it.invoke()
    first = time.perf_counter() - t
    times = timed(it.invoke, **reps)
    outs = [np.array(it.get_tensor(d["index"])) for d in it.get_output_details()]
    return {"median_s": statistics.median(times), "first_run_s": first, "reps": len(times), "outputs": outs,
            "invoke": it.invoke}


def bench_ort(path: str, feeds, threads: int, reps: dict) -> dict:
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    # the default level, stated: QDQ units fused into QLinear kernels (what onnxruntime-cpu reproduces)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return _bench_session(ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]), feeds, reps)


def _bench_session(s, feeds, reps: dict) -> dict:
    """First run, then timed runs, of an onnxruntime InferenceSession."""
    t = time.perf_counter()
    s.run(None, feeds)
    first = time.perf_counter() - t
    times = timed(lambda: s.run(None, feeds), **reps)
    return {"median_s": statistics.median(times), "first_run_s": first, "reps": len(times),
            "outputs": [np.asarray(o) for o in s.run(None, feeds)], "invoke": lambda: s.run(None, feeds)}


def bench_htp(path: str, arch: str, feeds, reps: dict) -> dict:
    """Qualcomm's HTP emulation (onnxruntime-qnn, QNN EP, CPU fallback disabled): the 'device'."""
    from refinterp.dumps.capture_qnn import htp_session

    return _bench_session(htp_session(path, arch), feeds, reps)


def _same(a: np.ndarray, b: np.ndarray) -> bool | str:
    """Equal; for float32 outputs one ulp apart: 'ulp' (the HTP's final DequantizeLinear, see
    tests/conformance/test_qnn_htp_models.py)."""
    if a.shape != b.shape:
        return False
    if np.array_equal(a, b):
        return True
    if a.dtype == b.dtype == np.float32:
        ulps = np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))
        return "ulp" if int(ulps.max()) <= 1 else False
    return False


def main(spec: dict) -> dict:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import refinterp

    threads = int(os.environ.get("REFINTERP_THREADS", "1"))
    reps = spec.get("reps") or {"min_reps": 3, "max_reps": 30, "budget_s": 3.0}
    graph = refinterp.load(spec["path"])
    feeds = make_feeds(graph)
    res: dict = {"schemes": {}, "runtimes": {}, "threads": threads}
    for rt in spec.get("runtimes", []):
        try:
            if rt.startswith("litert"):
                res["runtimes"][rt] = bench_litert(spec["path"], rt, feeds, threads, reps)
            elif rt == "onnxruntime":
                res["runtimes"][rt] = bench_ort(spec["path"], feeds, threads, reps)
            elif rt.startswith("htp-emulator-"):
                res["runtimes"][rt] = bench_htp(spec["path"], rt.rsplit("-", 1)[1], feeds, reps)
        except Exception as e:
            res["runtimes"][rt] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    for scheme in spec.get("schemes", []):
        # Interleaving alternates refinterp and the runtime run by run (fair under a changing machine
        # load).  With more than one thread a pool that keeps spinning after its call (LiteRT's,
        # ONNX Runtime's) would hold the second core while the other one runs: time in blocks.
        partner = res["runtimes"].get(SIMULATES.get(scheme, ""), {}).get("invoke") if threads == 1 else None
        try:
            res["schemes"][scheme] = bench_refinterp(spec["path"], scheme, feeds, reps, partner)
        except Exception as e:  # a scheme that cannot run this model is a finding, not a crash
            res["schemes"][scheme] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
    res["exact"] = {}
    for scheme in spec.get("check_schemes", []):  # schemes not timed here: one untimed run
        res["schemes"].setdefault(scheme, {"outputs": _outputs(spec["path"], scheme, feeds), "untimed": True})
    for scheme, r in list(res["schemes"].items()):  # outputs equal to the runtime it reproduces?
        rt = res["runtimes"].get(EXACT.get(scheme, ""), {})
        mine, theirs = r.pop("outputs", None), rt.get("outputs")
        if mine is not None and theirs is not None:
            same = [_same(a, b) for a, b in zip(mine, theirs)] if len(mine) == len(theirs) else [False]
            res["exact"][scheme] = False if False in same else ("ulp" if "ulp" in same else True)
        if r.get("untimed"):
            del res["schemes"][scheme]
    for rt in res["runtimes"].values():
        rt.pop("outputs", None)
        rt.pop("invoke", None)
    res["ru_maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res


if __name__ == "__main__":
    print("RESULT " + json.dumps(main(json.loads(sys.argv[1]))), flush=True)
