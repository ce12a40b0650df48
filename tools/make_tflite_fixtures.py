"""Regenerate the converter-made TFLite fixtures (dev tool, not a test dependency).

Run with a Python that has tensorflow (kept out of the project venv), from the repo root:

    python3 -m venv /work/tfvenv && /work/tfvenv/bin/pip install tensorflow-cpu==2.21.0
    /work/tfvenv/bin/python tools/make_tflite_fixtures.py [--out DIR] [--only NAME ...]

Deterministic: every model seeds Keras before it is built, and the representative dataset is
uniform random data from a fixed numpy seed. The same TF version gives byte-identical files
(the converter embeds no timestamp). Also copies the MobileNetV2-tiny int8 fixture to
refinterp/models/demo_int8.tflite; then run tools/capture_demo_dump.py (project venv) for the
demo input and device dump.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tflite_fixture_models as zoo  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CALIBRATION_SAMPLES = 32


def representative_dataset(model, seed: int, low: float = -1.0, high: float = 1.0):
    """Fixed-seed uniform random calibration data matching the model input shape."""
    shape = tuple(model.inputs[0].shape)

    def gen():
        rng = np.random.default_rng(seed)
        for _ in range(CALIBRATION_SAMPLES):
            yield [rng.uniform(low, high, shape).astype(np.float32)]
    return gen


def convert(model, mode: str, seed: int) -> bytes:
    """mode: int8 | int16x8 | float32 | float16w | dynamic."""
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    if mode == "int8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative_dataset(model, seed)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    elif mode == "int16x8":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = representative_dataset(model, seed)
        conv.target_spec.supported_ops = [
            tf.lite.OpsSet.EXPERIMENTAL_TFLITE_BUILTINS_ACTIVATIONS_INT16_WEIGHTS_INT8]
        conv.inference_input_type = tf.int16
        conv.inference_output_type = tf.int16
    elif mode == "float16w":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif mode == "dynamic":
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
    elif mode != "float32":
        raise ValueError(f"unknown conversion mode {mode!r}")
    return conv.convert()


# file name -> (builder, conversion mode, calibration seed)
FIXTURES = {
    "mobilenet_v2_tiny_int8.tflite": (zoo.mobilenet_v2_tiny, "int8", 11),
    "mobilenet_v3_tiny_int8.tflite": (zoo.mobilenet_v3_tiny, "int8", 12),
    "mobilenet_tiny_int16x8.tflite": (zoo.mobilenet_v2_tiny, "int16x8", 11),
    "attention_block_int8.tflite": (zoo.attention_block, "int8", 13),
    "ops_zoo_int8.tflite": (zoo.ops_zoo, "int8", 14),
    "depth_space_int8.tflite": (zoo.depth_space, "int8", 16),
    "mobilenet_v1_tiny_int8.tflite": (zoo.mobilenet_v1_tiny, "int8", 17),
    "efficientnet_tiny_int8.tflite": (zoo.efficientnet_tiny, "int8", 18),
    "small_cnn_float32.tflite": (zoo.small_cnn, "float32", 15),
    "small_cnn_float16w.tflite": (zoo.small_cnn, "float16w", 15),
    "small_cnn_dynamic_range.tflite": (zoo.small_cnn, "dynamic", 15),
}
DEMO_SOURCE = "mobilenet_v2_tiny_int8.tflite"


def write_demo(model_bytes: bytes, models_dir: Path) -> None:
    """Copy the demo model; its input and device dump come from tools/capture_demo_dump.py."""
    models_dir.mkdir(parents=True, exist_ok=True)
    (models_dir / "demo_int8.tflite").write_bytes(model_bytes)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "tflite")
    ap.add_argument("--models-dir", type=Path, default=REPO / "refinterp" / "models")
    ap.add_argument("--only", nargs="*", default=None, help="fixture file names to (re)build")
    ap.add_argument("--no-demo", action="store_true", help="do not rewrite the demo model/input")
    args = ap.parse_args(argv)

    args.out.mkdir(parents=True, exist_ok=True)
    built = {}
    for fname, (builder, mode, seed) in FIXTURES.items():
        if args.only and fname not in args.only:
            continue
        data = convert(builder(), mode, seed)
        (args.out / fname).write_bytes(data)
        built[fname] = data
        print(f"{fname}: {len(data)} bytes ({mode})")
    if not args.no_demo and DEMO_SOURCE in built:
        write_demo(built[DEMO_SOURCE], args.models_dir)
        print(f"demo: {args.models_dir / 'demo_int8.tflite'}")
    print(f"tensorflow {tf.__version__}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
