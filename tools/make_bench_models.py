"""Generate the benchmark models (dev tool).

    /work/tfvenv/bin/python tools/make_bench_models.py [--out DIR]      # TFLite: needs tensorflow
    python tools/make_bench_models.py --model mnv2_224_qdq [--out DIR]  # ONNX: onnx + onnxruntime only

``mnv2_224`` -> ``mobilenet_v2_224_int8.tflite``: Keras MobileNetV2 (alpha 1.0, 224x224x3, random
weights from a fixed Keras seed), converted to full int8 (int8 input/output) with a fixed-seed
uniform random representative dataset.  Deterministic for one TF version.  About 3.5 MB.

``mnv2_224_qdq`` -> ``mobilenet_v2_224_qdq.onnx`` (and ``mnv2_224_qdq_u8`` ->
``mobilenet_v2_224_qdq_u8.onnx``): a float MobileNetV2 built with onnx.helper (NCHW, width 1.0,
3x3 s2 stem 32, 17 inverted-residual blocks (t, c, n, s) = (1,16,1,1) (6,24,2,2) (6,32,3,2)
(6,64,4,2) (6,96,3,1) (6,160,3,2) (6,320,1,1), 1x1 conv 1280, GlobalAveragePool, Flatten, Gemm
1000; Conv + Clip(0, 6) for ReLU6, Add for the residuals), He-normal weights with BatchNorm folded
in (fixed seed), quantized by ``onnxruntime.quantization.quantize_static`` in QDQ format, MinMax
calibration on fixed-seed uniform [-1, 1) inputs, per-channel int8 weights, int8 (``_qdq``) or
uint8 (``_qdq_u8``) activations.  Deterministic for one onnxruntime version.  About 3.5 MB.

``llm_int4`` -> ``llm_int4_matmulnbits.onnx``: the weight-only int4 layers of a small language model
decoding one token: four com.microsoft MatMulNBits nodes (2048 x 2048, 4-bit, block_size 32, uint8
zero points, accuracy_level 4 -- ONNX Runtime's CompInt8 path) on a [1, 2048] input, fixed-seed
random codes and scales.  About 9 MB.

The files are not committed: ``benchmarks/run.py`` calls this script on first use (default out:
benchmarks/.cache/).
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

REPO = Path(__file__).resolve().parent.parent
SEED = 1234
CALIBRATION_SAMPLES = 8

# -- TFLite (tensorflow imported only here) ------------------------------------------------------


def _he_rescale(model, tf) -> None:
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
    import tensorflow as tf

    tf.keras.utils.set_random_seed(SEED)
    model = tf.keras.applications.MobileNetV2(weights=None, input_shape=(224, 224, 3))
    _he_rescale(model, tf)

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


# -- ONNX QDQ (onnx + onnxruntime only) ------------------------------------------------------------

MNV2_BLOCKS = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
               (6, 320, 1, 1))
ONNX_INPUT = "input"
ONNX_SHAPE = (1, 3, 224, 224)


class _Builder:
    """Float MobileNetV2 in onnx.helper terms; every conv has BatchNorm folded into (w, b)."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.inits: list = []
        self.n = 0

    def _name(self, kind: str) -> str:
        self.n += 1
        return f"{kind}_{self.n}"

    def _const(self, name: str, arr: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(arr, np.float32), name))
        return name

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int, groups: int, relu6: bool) -> str:
        from onnx import helper

        name = self._name("conv")
        fan_in = (cin // groups) * k * k
        w = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), (cout, cin // groups, k, k))
        gamma = self.rng.uniform(0.7, 1.3, cout)  # folded BatchNorm: w * g / sqrt(v + eps), b - m * that
        beta = self.rng.normal(0.0, 0.1, cout)
        mean = self.rng.normal(0.0, 0.1, cout)
        var = self.rng.uniform(0.6, 1.4, cout)
        f = gamma / np.sqrt(var + 1e-3)
        wn, bn = self._const(name + "_w", w * f[:, None, None, None]), self._const(name + "_b", beta - mean * f)
        p = k // 2
        self.nodes.append(helper.make_node("Conv", [x, wn, bn], [name + "_y"], name=name, kernel_shape=[k, k],
                                           strides=[stride, stride], pads=[p, p, p, p], group=groups))
        y = name + "_y"
        if relu6:
            lo, hi = self._const(name + "_min", np.array(0.0)), self._const(name + "_max", np.array(6.0))
            self.nodes.append(helper.make_node("Clip", [y, lo, hi], [name + "_relu6"], name=name + "_relu6"))
            y = name + "_relu6"
        return y

    def block(self, x: str, cin: int, t: int, cout: int, stride: int) -> str:
        from onnx import helper

        h = x if t == 1 else self.conv(x, cin, cin * t, 1, 1, 1, True)
        h = self.conv(h, cin * t, cin * t, 3, stride, cin * t, True)
        h = self.conv(h, cin * t, cout, 1, 1, 1, False)
        if stride == 1 and cin == cout:
            name = self._name("add")
            self.nodes.append(helper.make_node("Add", [x, h], [name + "_y"], name=name))
            h = name + "_y"
        return h

    def mobilenet_v2(self):
        from onnx import TensorProto, helper

        x = self.conv(ONNX_INPUT, 3, 32, 3, 2, 1, True)
        c = 32
        for t, cout, n, s in MNV2_BLOCKS:
            for i in range(n):
                x = self.block(x, c, t, cout, s if i == 0 else 1)
                c = cout
        x = self.conv(x, c, 1280, 1, 1, 1, True)
        self.nodes.append(helper.make_node("GlobalAveragePool", [x], ["gap"], name="gap"))
        self.nodes.append(helper.make_node("Flatten", ["gap"], ["flat"], name="flatten", axis=1))
        fc_w = self._const("fc_w", self.rng.normal(0.0, np.sqrt(2.0 / 1280), (1000, 1280)))
        fc_b = self._const("fc_b", self.rng.normal(0.0, 0.1, 1000))
        self.nodes.append(helper.make_node("Gemm", ["flat", fc_w, fc_b], ["logits"], name="fc", transB=1))
        x_info = helper.make_tensor_value_info(ONNX_INPUT, TensorProto.FLOAT, ONNX_SHAPE)
        y_info = helper.make_tensor_value_info("logits", TensorProto.FLOAT, (1, 1000))
        graph = helper.make_graph(self.nodes, "mobilenet_v2_224", [x_info], [y_info], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        return model


def mobilenet_v2_224_qdq(activation: str = "int8") -> bytes:
    """QDQ MobileNetV2 bytes (see the module docstring); ``activation`` "int8" or "uint8"."""
    import onnx
    from onnxruntime.quantization import (CalibrationDataReader, CalibrationMethod, QuantFormat, QuantType,
                                          quantize_static)

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            rng = np.random.default_rng(SEED)
            self._it = iter([{ONNX_INPUT: rng.uniform(-1.0, 1.0, ONNX_SHAPE).astype(np.float32)}
                             for _ in range(CALIBRATION_SAMPLES)])

        def get_next(self):
            return next(self._it, None)

    model = _Builder(SEED).mobilenet_v2()
    onnx.checker.check_model(model)
    act = {"int8": QuantType.QInt8, "uint8": QuantType.QUInt8}[activation]
    with tempfile.TemporaryDirectory() as d:
        fp, qp = Path(d) / "float.onnx", Path(d) / "qdq.onnx"
        onnx.save(model, fp)
        quantize_static(str(fp), str(qp), Reader(), quant_format=QuantFormat.QDQ, activation_type=act,
                        weight_type=QuantType.QInt8, per_channel=True, calibrate_method=CalibrationMethod.MinMax)
        data = qp.read_bytes()
    _check_logits(data)
    return data


def _check_logits(data: bytes) -> None:
    """The quantized logits must vary (a degenerate benchmark measures nothing)."""
    import onnxruntime as ort

    s = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    x = np.random.default_rng(SEED + 1).uniform(-1.0, 1.0, ONNX_SHAPE).astype(np.float32)
    y = s.run(None, {ONNX_INPUT: x})[0]
    if np.unique(y).size < 20:
        raise SystemExit(f"degenerate QDQ MobileNetV2: only {np.unique(y).size} distinct logits")


def llm_int4_layers(layers: int = 4, width: int = 2048, block: int = 32) -> bytes:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(7)
    nb = width // block
    nodes, inits, x = [], [], "hidden"
    for i in range(layers):
        codes = rng.integers(0, 16, (width, nb * block), dtype=np.uint8)
        packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).reshape(width, nb, block // 2)
        zp = rng.integers(6, 11, (width, nb), dtype=np.uint8)
        zp_packed = (zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8).reshape(-1)
        inits += [numpy_helper.from_array(packed, f"w{i}"),
                  numpy_helper.from_array((rng.random(width * nb) * 0.02 + 0.005).astype(np.float32), f"s{i}"),
                  numpy_helper.from_array(zp_packed, f"z{i}")]
        y = f"h{i}" if i + 1 < layers else "out"
        nodes.append(helper.make_node("MatMulNBits", [x, f"w{i}", f"s{i}", f"z{i}"], [y], domain="com.microsoft",
                                      K=width, N=width, bits=4, block_size=block, accuracy_level=4))
        x = y
    g = helper.make_graph(nodes, "llm_int4", [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, [1, width])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m.SerializeToString()


def mobilenet_v2_224_f32() -> bytes:
    """The float MobileNetV2-224 the QDQ models are quantized from (ONNX, opset 13)."""
    return _Builder(SEED).mobilenet_v2().SerializeToString()


FILES = {"mnv2_224": "mobilenet_v2_224_int8.tflite", "mnv2_224_qdq": "mobilenet_v2_224_qdq.onnx",
         "mnv2_224_qdq_u8": "mobilenet_v2_224_qdq_u8.onnx", "llm_int4": "llm_int4_matmulnbits.onnx",
         "mnv2_224_f32": "mobilenet_v2_224_f32.onnx"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "benchmarks" / ".cache"))
    ap.add_argument("--model", choices=sorted(FILES), action="append",
                    help="model(s) to write (default: mnv2_224, the TFLite model)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for m in args.model or ["mnv2_224"]:
        path = out / FILES[m]
        data = {"mnv2_224": mobilenet_v2_224_int8, "mnv2_224_qdq": lambda: mobilenet_v2_224_qdq("int8"),
                "mnv2_224_qdq_u8": lambda: mobilenet_v2_224_qdq("uint8"), "llm_int4": llm_int4_layers,
                "mnv2_224_f32": mobilenet_v2_224_f32}[m]()
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
        print(f"wrote {path} ({len(data)} bytes)")


if __name__ == "__main__":
    main()
