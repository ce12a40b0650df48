"""Regenerate the streaming-state TFLite fixtures (resource variables; dev tool, not a test dependency).

    /work/tfvenv/bin/python tools/make_state_fixtures.py [--out tests/fixtures/tflite]

A tf.Module keeps a (1, 32) float state variable: each call computes h = relu(x W_in + 0.5 state W_st),
assigns it to the state and returns softmax(h W_out).  Converted with resource variables enabled
(VAR_HANDLE / READ_VARIABLE / ASSIGN_VARIABLE, the state zeroed by a CALL_ONCE initialisation
subgraph), as float32 and as int8 (float I/O; the converter keeps the variable in float and puts
QUANTIZE / DEQUANTIZE around it).  Weights from a fixed numpy seed, calibration 32 uniform samples.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


class Streaming(tf.Module):
    def __init__(self) -> None:
        super().__init__()
        rng = np.random.default_rng(7)
        self.w_in = tf.constant(rng.standard_normal((16, 32)).astype(np.float32) * 0.3)
        self.w_st = tf.constant(rng.standard_normal((32, 32)).astype(np.float32) * 0.2)
        self.w_out = tf.constant(rng.standard_normal((32, 4)).astype(np.float32) * 0.5)
        self.state = tf.Variable(tf.zeros((1, 32)), trainable=False, name="state")

    @tf.function(input_signature=[tf.TensorSpec([1, 16], tf.float32)])
    def __call__(self, x):
        h = tf.nn.relu(tf.matmul(x, self.w_in) + tf.matmul(self.state, self.w_st) * 0.5)
        self.state.assign(h)
        return tf.nn.softmax(tf.matmul(h, self.w_out))


def convert(module: Streaming, mode: str) -> bytes:
    conv = tf.lite.TFLiteConverter.from_concrete_functions([module.__call__.get_concrete_function()], module)
    conv.experimental_enable_resource_variables = True
    if mode == "int8":
        def rep():
            rng = np.random.default_rng(3)
            for _ in range(32):
                yield [rng.uniform(-1, 1, (1, 16)).astype(np.float32)]
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    return conv.convert()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "tests/fixtures/tflite"))
    args = ap.parse_args(argv)
    module = Streaming()
    for mode in ("float32", "int8"):
        path = Path(args.out) / f"streaming_state_{mode}.tflite"
        path.write_bytes(convert(module, mode))
        print(f"wrote {path} ({path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
