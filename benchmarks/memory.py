"""Memory of refinterp Sessions in a long-lived process.

    python benchmarks/memory.py [--sessions 50] [--json OUT]

Per model and integer scheme, in a fresh child process: the model file's size; the peak RSS of one
Session (build + one run) above the process after loading the model; and the RSS growth over
``--sessions`` Sessions built, run once and dropped (goal: < 50 MiB in total: a dropped Session
frees what it built).  Models: MobileNetV2-224 int8 TFLite and its QDQ ONNX export from
benchmarks/.cache when present (see run.py), else the small fixtures.  A benchmark, never a test.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CACHE = HERE / ".cache"

CASES = [
    (CACHE / "mobilenet_v2_224_int8.tflite", REPO / "tests/fixtures/tflite/mobilenet_v2_tiny_int8.tflite",
     ["tflite-reference", "tflite-optimized", "tflite-xnnpack"]),
    (CACHE / "mobilenet_v2_224_qdq.onnx", REPO / "tests/fixtures/onnx/small_cnn_qdq_s8s8.onnx",
     ["onnxruntime-cpu", "fbgemm"]),
]

CHILD = r"""
import gc, json, resource, sys
import numpy as np
sys.path.insert(0, sys.argv[3])
import refinterp
from _measure import make_feeds

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

path, scheme, n = sys.argv[1], sys.argv[2], int(sys.argv[4])
g = refinterp.load(path)
feeds = make_feeds(g)
gc.collect()
base = rss()
s = refinterp.Session(g, scheme)
s.run(feeds)
peak_one = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 - base
del s
gc.collect()
first = rss()
for _ in range(n):
    s = refinterp.Session(g, scheme)
    s.run(feeds)
    del s
    gc.collect()
print("RESULT " + json.dumps({"peak_one_session_mib": peak_one, "growth_mib": rss() - first}))
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=50)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rows = []
    for big, small, schemes in CASES:
        model = big if big.exists() else small
        for scheme in schemes:
            r = subprocess.run([sys.executable, "-c", CHILD, str(model), scheme, str(HERE), str(args.sessions)],
                               capture_output=True, text=True, cwd=REPO)
            line = next((ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")), None)
            res = json.loads(line[7:]) if line else {"error": (r.stderr.strip().splitlines() or ["?"])[-1][:160]}
            rows.append({"model": model.name, "model_mib": model.stat().st_size / 2 ** 20, "scheme": scheme, **res})
    print(f"| model | size MiB | scheme | peak RSS of one Session MiB | growth over {args.sessions} dropped Sessions MiB "
          f"| goal < 50 MiB |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['model_mib']:.1f} | {r['scheme']} | error: {r['error']} | | |")
            continue
        print(f"| {r['model']} | {r['model_mib']:.1f} | {r['scheme']} | {r['peak_one_session_mib']:.0f} | "
              f"{r['growth_mib']:+.1f} | {'met' if r['growth_mib'] < 50 else 'NOT met'} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
