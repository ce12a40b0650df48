"""Does refinterp slow down the code that runs next to it in the same process?

    python benchmarks/neighbours.py [--model PATH] [--scheme S] [--threads N] [--runs R] [--json OUT]

As most scripts do, NumPy is imported *before* refinterp (so environment variables refinterp would
set at import come too late for OpenBLAS).  LiteRT's optimized kernels (``N`` threads, default 2) are
timed alone, then each run right after a refinterp ``Session.run`` of the same model (refinterp at
``N`` threads too); the ratio of medians is the neighbour slowdown (target: at most 1.3x).  Idle
thread pools that keep spinning after refinterp returns (OpenBLAS workers, by default for ~0.1 s of
CPU after every threaded call) show up here as a slowdown of LiteRT.

Model: the benchmark MobileNetV2-224 int8 (benchmarks/.cache, see run.py) when present, else the
demo model shipped in the package.  A benchmark, never a unit test.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np  # noqa: F401  (first, as in users' scripts: before refinterp)

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(REPO))


def _model(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    big = HERE / ".cache" / "mobilenet_v2_224_int8.tflite"
    return big if big.exists() else REPO / "refinterp" / "models" / "demo_int8.tflite"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model")
    ap.add_argument("--scheme", default="tflite-reference")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    os.environ["REFINTERP_THREADS"] = str(args.threads)

    import refinterp
    from ai_edge_litert.interpreter import Interpreter, OpResolverType

    sys.path.insert(0, str(HERE))
    from _measure import make_feeds

    path = _model(args.model)
    g = refinterp.load(str(path))
    feeds = make_feeds(g)
    sess = refinterp.Session(g, args.scheme)
    it = Interpreter(model_path=str(path), num_threads=args.threads,
                     experimental_op_resolver_type=OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES)
    it.allocate_tensors()
    for d in it.get_input_details():
        it.set_tensor(d["index"], next(iter(feeds.values())))

    def litert() -> float:
        t = time.perf_counter()
        it.invoke()
        return time.perf_counter() - t

    for _ in range(5):  # warm-up: compile, allocate, page in
        sess.run(feeds)
        litert()
    time.sleep(0.5)  # any pool spinning from the warm-up goes idle
    alone = []
    for _ in range(args.runs):
        alone.append(litert())
        time.sleep(0.02)
    after = []
    ours = []
    for _ in range(args.runs):
        t = time.perf_counter()
        sess.run(feeds)
        ours.append(time.perf_counter() - t)
        after.append(litert())
        time.sleep(0.02)
    res = {"model": path.name, "scheme": args.scheme, "threads": args.threads,
           "litert_alone_ms": statistics.median(alone) * 1e3,
           "litert_after_refinterp_ms": statistics.median(after) * 1e3,
           "refinterp_ms": statistics.median(ours) * 1e3}
    res["slowdown"] = res["litert_after_refinterp_ms"] / res["litert_alone_ms"]
    res["target"] = "<= 1.30x"
    res["met"] = res["slowdown"] <= 1.3
    print(f"{res['model']} {args.scheme} at {args.threads} threads: LiteRT optimized alone "
          f"{res['litert_alone_ms']:.1f} ms, right after a refinterp run {res['litert_after_refinterp_ms']:.1f} ms "
          f"-> {res['slowdown']:.2f}x (target <= 1.30x: {'met' if res['met'] else 'NOT met'}); "
          f"refinterp {res['refinterp_ms']:.1f} ms")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
