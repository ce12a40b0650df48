"""Measure the HTP's 16-bit Sigmoid and Tanh curves on Qualcomm's host emulation (onnxruntime-qnn).

The HTP reads a 16-bit Sigmoid's input as u = floor(|q - z| M) on a fixed grid (1/6144 for Sigmoid,
1/12288 for Tanh; refinterp/quant/htp_curve16.py) and looks the result up in a curve of u whose
generating approximation is not identified.  With the input scale at 1/G (M = 1) every uint16 code
q (zero point 0) is u = q itself, so one session per op and arch reads the whole curve:

    .venv/bin/python tools/measure_htp_curves.py [--out refinterp/quant/data/htp_curves16.npz]

Sigmoid is stored as its Q15 value p(u) (the uint16 output code is 2 p: the QNN EP forces the output
encoding to scale 1/65536, zero point 0), Tanh as t(u) (uint16 code t + 32768: scale 1/32768, zero
point 32768), both as first value plus uint8 steps (the curves rise by 0-3 per u).  htp_arch 68 and 73
are measured and must agree.  A dev tool: the test suite checks the stored curves against the emulator
at other scales and zero points (tests/conformance/test_qnn_htp_curve16.py)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from refinterp.dumps.capture_qnn import htp_session  # noqa: E402

GRID = {"Sigmoid": 6144, "Tanh": 12288}
OUT_QP = {"Sigmoid": (1 / 65536, 0), "Tanh": (1 / 32768, 32768)}


def _model(op: str, scale: float):
    n = 65536
    inits = [numpy_helper.from_array(np.array(scale, np.float32), "xs"),
             numpy_helper.from_array(np.array(0, np.uint16), "xz"),
             numpy_helper.from_array(np.array(OUT_QP[op][0], np.float32), "ys"),
             numpy_helper.from_array(np.array(OUT_QP[op][1], np.uint16), "yz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node(op, ["xd"], ["f"]),
             helper.make_node("QuantizeLinear", ["f", "ys", "yz"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["out"])]
    g = helper.make_graph(nodes, op, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, n]),
                           helper.make_tensor_value_info("yq", TensorProto.UINT16, [1, n])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def measure(op: str, arch: str) -> np.ndarray:
    # the scale a hair above 1 / G: G s 2^15 rounds to 32768, so u = q exactly
    scale = float(np.float32(1.0 / GRID[op]) * np.float32(1.000001))
    q = np.arange(65536)
    x = (q * np.float32(scale)).astype(np.float32)[None]
    sess = htp_session(_model(op, scale).SerializeToString(), arch)
    yq = sess.run(["yq"], {"x": x})[0][0].astype(np.int64)
    return yq // 2 if op == "Sigmoid" else yq - 32768


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "refinterp" / "quant" / "data" / "htp_curves16.npz"))
    a = ap.parse_args()
    arrays = {}
    for op in GRID:
        curves = {arch: measure(op, arch) for arch in ("73", "68")}
        if not np.array_equal(curves["73"], curves["68"]):
            print(f"{op}: htp_arch 68 and 73 differ on {int((curves['73'] != curves['68']).sum())} values",
                  file=sys.stderr)
            return 1
        c = curves["73"]
        steps = np.diff(c)
        if steps.min() < 0 or steps.max() > 255:
            print(f"{op}: the curve is not monotone in steps of 0-255", file=sys.stderr)
            return 1
        arrays[f"{op.lower()}_first"] = np.array([c[0]], np.int32)
        arrays[f"{op.lower()}_steps"] = steps.astype(np.uint8)
        print(f"{op}: first {c[0]}, last {c[-1]}, steps {np.bincount(steps).tolist()}")
    np.savez_compressed(a.out, **arrays)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
