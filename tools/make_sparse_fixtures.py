"""Regenerate the sparse-weight TFLite fixtures (dev tool, not a test dependency).

Step 1, with a Python that has tensorflow (writes sparse_cnn_float32.tflite):

    /work/tfvenv/bin/python tools/make_sparse_fixtures.py convert

A Keras Conv 1x1 (16->32) -> Conv 3x3 (32->8) -> Flatten -> Dense(10) model, batch dimension unknown,
80% of every kernel zeroed (fixed seed), converted with ``Optimize.EXPERIMENTAL_SPARSITY``: the
converter stores the kernels sparse (SparsityParameters, CSR levels) and densifies them with DENSIFY.

Step 2, with the project venv (ai-edge-litert's schema; writes sparse_cnn_float16.tflite):

    .venv/bin/python tools/make_sparse_fixtures.py fp16

The same model with the sparse kernels stored as float16 (DENSIFY in float16, then DEQUANTIZE to
float32, as the converter emits float16 weights): the case whose buffer is smaller than a dense
float16 tensor of its declared shape.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "tflite"


def convert() -> None:
    import tensorflow as tf

    tf.keras.utils.set_random_seed(5)
    inp = tf.keras.Input((8, 8, 16))
    x = tf.keras.layers.Conv2D(32, 1)(inp)
    x = tf.keras.layers.Conv2D(8, 3, padding="same")(x)
    out = tf.keras.layers.Dense(10)(tf.keras.layers.Flatten()(x))
    model = tf.keras.Model(inp, out)
    rng = np.random.default_rng(0)
    for layer in model.layers:
        w = layer.get_weights()
        if w:
            w[0][rng.random(w[0].shape) < 0.8] = 0
            layer.set_weights(w)
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.EXPERIMENTAL_SPARSITY]
    (OUT / "sparse_cnn_float32.tflite").write_bytes(conv.convert())


def fp16() -> None:
    import flatbuffers
    from ai_edge_litert import schema_py_generated as s

    m = s.ModelT.InitFromObj(s.Model.GetRootAs((OUT / "sparse_cnn_float32.tflite").read_bytes(), 0))
    sg = m.subgraphs[0]
    codes = [int(c.builtinCode) for c in m.operatorCodes]
    if s.BuiltinOperator.DEQUANTIZE not in codes:
        code = s.OperatorCodeT()
        code.builtinCode = code.deprecatedBuiltinCode = s.BuiltinOperator.DEQUANTIZE
        code.version = 1
        m.operatorCodes.append(code)
        codes.append(s.BuiltinOperator.DEQUANTIZE)
    deq = codes.index(s.BuiltinOperator.DEQUANTIZE)
    ops = []
    for op in sg.operators:
        ops.append(op)
        if codes[op.opcodeIndex] != s.BuiltinOperator.DENSIFY:
            continue
        src, dense = sg.tensors[op.inputs[0]], sg.tensors[op.outputs[0]]
        buf = m.buffers[src.buffer]
        buf.data = np.frombuffer(bytes(buf.data), "<f4").astype("<f2").tobytes()
        src.type = dense.type = s.TensorType.FLOAT16
        f32 = s.TensorT()
        f32.shape, f32.type, f32.buffer = list(dense.shape), s.TensorType.FLOAT32, 0
        f32.name = (dense.name or b"w") + b"/dequantized"
        sg.tensors.append(f32)
        new = len(sg.tensors) - 1
        for later in sg.operators:
            later.inputs = [new if i == op.outputs[0] and later is not op else i for i in later.inputs]
        d = s.OperatorT()
        d.opcodeIndex, d.inputs, d.outputs = deq, [op.outputs[0]], [new]
        ops.append(d)
    sg.operators = ops
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    (OUT / "sparse_cnn_float16.tflite").write_bytes(bytes(b.Output()))


if __name__ == "__main__":
    {"convert": convert, "fp16": fp16}[sys.argv[1] if len(sys.argv) > 1 else "convert"]()
