"""Generate the benchmark models (dev tool; run with a Python that has tensorflow).

    /work/tfvenv/bin/python tools/make_bench_models.py [--out DIR]

Writes ``mobilenet_v2_224_int8.tflite``: Keras MobileNetV2 (alpha 1.0, 224x224x3, random weights
from a fixed Keras seed), converted to full int8 (int8 input/output) with a fixed-seed uniform
random representative dataset.  Deterministic for one TF version.  About 3.5 MB, so it is not
committed: ``benchmarks/run.py`` calls this script on first use (default out: benchmarks/.cache/).
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
SEED = 1234
CALIBRATION_SAMPLES = 8


def _he_rescale(model) -> None:
    """Redraw conv/dense kernels He-normal (fixed seed).  Keras' default init lets activations
    vanish through 17 blocks (logit scale ~1e-8), which makes LiteRT BUILTIN_REF's SOFTMAX abort
    (``QuantizeMultiplierGreaterThanOne`` of a multiplier < 1) and the benchmark data degenerate."""
    rng = np.random.default_rng(SEED)
    for layer in model.layers:
        if isinstance(layer, (tf.keras.layers.Conv2D, tf.keras.layers.DepthwiseConv2D, tf.keras.layers.Dense)):
            ws = layer.get_weights()
            k = ws[0]
            fan_in = int(np.prod(k.shape[:-1])) if not isinstance(layer, tf.keras.layers.DepthwiseConv2D) \
                else int(np.prod(k.shape[:2]))
            ws[0] = rng.normal(0.0, np.sqrt(2.0 / fan_in), k.shape).astype(np.float32)
            layer.set_weights(ws)


def mobilenet_v2_224_int8() -> bytes:
    tf.keras.utils.set_random_seed(SEED)
    model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3))
    _he_rescale(model)

    def rep():
        rng = np.random.default_rng(SEED)
        for _ in range(CALIBRATION_SAMPLES):
            yield [rng.uniform(-1.0, 1.0, (1, 224, 224, 3)).astype(np.float32)]

    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = rep
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    conv.inference_input_type = tf.int8
    conv.inference_output_type = tf.int8
    return conv.convert()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "benchmarks" / ".cache"))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "mobilenet_v2_224_int8.tflite"
    data = mobilenet_v2_224_int8()
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    tmp.replace(path)
    print(f"wrote {path} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
