"""ONNX Runtime's WeightBiasQuantization under ``onnxruntime-cpu`` against onnxruntime 1.32.0's CPU EP (default
session, ORT_ENABLE_ALL): a QDQ Conv / ConvTranspose / Gemm whose bias (or weights) the quantizer left float runs
as ORT rewrites it (passes/ort_weight_bias.py) -- int32 bias codes RNE(f32(b / f32(s_x s_w))), float weights as
asymmetric int8 -- and is left alone where ORT leaves it (a float output, a Conv output read twice).  Every
quantized output code for code, every float output bit for bit.  Before the pass refinterp ran these layers with
their float bias: 1-3 codes of 1,152 off on most layers (float weights: 180-215 off); run with the pass where ORT
does not, the float and branching cases are off (measured), so each case can fail."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402

F = np.float32
KINDS = ("conv", "conv_relu", "conv_branch", "conv_float_out", "conv_transpose", "gemm", "gemm_transb",
         "conv_float_weights", "conv_float_weights_no_bias")


def _init(v, name, dtype):
    return numpy_helper.from_array(np.asarray(v, dtype), name)


def _case(kind: str, seed: int):
    """(model, feeds, output name): x -> Q -> DQ -> op(weights, float bias) -> [Relu] -> Q, one kind of layer."""
    rng = np.random.default_rng(seed)
    act = np.int8 if seed % 2 else np.uint8
    zx = 0 if act == np.int8 else 128
    C, K = 8, 4
    per_channel = seed % 3 == 0 and kind in ("conv", "conv_relu", "gemm", "gemm_transb")
    ws = (rng.uniform(0.002, 0.01, C) if per_channel else np.array(0.005)).astype(F)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    inits = [_init(0.03, "xs", F), _init(zx, "xz", act), _init(0.05, "ys", F), _init(zx + 5, "yz", act)]
    bias = ["b"]
    if kind != "conv_float_weights_no_bias":
        inits.append(_init(rng.standard_normal(C) * 0.5, "b", F))
    else:
        bias = []
    shape = [1, K, 12, 12]
    if kind.startswith("gemm"):
        shape = [128, 16]
        tb = kind == "gemm_transb"
        w = rng.integers(-127, 128, (C, 16) if tb else (16, C))
        nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0 if tb else 1),
                  helper.make_node("Gemm", ["xd", "wd"] + bias, ["c"], transB=int(tb))]
    else:
        op = "ConvTranspose" if kind == "conv_transpose" else "Conv"
        w = rng.integers(-127, 128, (K, C, 3, 3) if op == "ConvTranspose" else (C, K, 3, 3))
        if kind.startswith("conv_float_weights"):
            inits.append(_init(w * 0.005 + rng.uniform(-0.002, 0.002, w.shape), "wd", F))
        else:
            nodes.append(helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0))
        nodes.append(helper.make_node(op, ["xd", "wd"] + bias, ["c"], pads=[1, 1, 1, 1]))
    if not kind.startswith("conv_float_weights"):
        inits += [_init(w, "w", np.int8), _init(ws, "ws", F), _init(np.zeros(ws.size, np.int8) if ws.size > 1 else 0,
                                                                    "wz", np.int8)]
    qtype = TensorProto.UINT8 if act == np.uint8 else TensorProto.INT8
    if kind == "conv_float_out":
        out, outputs = "c", [helper.make_tensor_value_info("c", TensorProto.FLOAT, None)]
        inits = [i for i in inits if i.name not in ("ys", "yz")]
    else:
        src = "c"
        if kind == "conv_relu":
            nodes.append(helper.make_node("Relu", ["c"], ["r"]))
            src = "r"
        nodes += [helper.make_node("QuantizeLinear", [src, "ys", "yz"], ["y"]),
                  helper.make_node("DequantizeLinear", ["y", "ys", "yz"], ["out"])]
        out, outputs = "y", [helper.make_tensor_value_info("y", qtype, None)]
        if kind == "conv_branch":
            nodes.append(helper.make_node("Sigmoid", ["c"], ["sg"]))
            outputs.append(helper.make_tensor_value_info("sg", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)], outputs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m, {"x": (rng.standard_normal(shape) * 1.5).astype(F)}, [o.name for o in outputs]


@pytest.mark.parametrize("kind", KINDS)
def test_weight_bias_quantization_equals_ort(tmp_path, kind):
    for seed in range(6):
        m, feeds, names = _case(kind, seed)
        p = tmp_path / f"{kind}{seed}.onnx"
        onnx.save(m, str(p))
        got = ort.InferenceSession(str(p), providers=["CPUExecutionProvider"]).run(names, feeds)
        ours = refinterp.Session(refinterp.load(str(p)), "onnxruntime-cpu").run(feeds, capture=names)
        for n, g in zip(names, got):
            a = np.asarray(ours[n])
            assert a.dtype == g.dtype and a.shape == g.shape, (kind, seed, n)
            bad = np.flatnonzero(a.view(np.uint8 if a.dtype.itemsize == 1 else np.uint32).ravel()
                                 != g.view(np.uint8 if g.dtype.itemsize == 1 else np.uint32).ravel())
            assert bad.size == 0, f"{kind} seed {seed} {n}: {bad.size} of {g.size} differ"


def test_weight_bias_quantization_equals_ort_arm64():
    """The same layers (4 of each kind) under ``onnxruntime-arm64`` against ONNX Runtime 1.32.0's aarch64 build
    under qemu (Cortex-A76): the transformer runs on every platform."""
    from tests.conformance._int_oracle import arm64_skip_reason
    from tests.conformance._ort_arm64 import run_ort_arm64

    why = arm64_skip_reason("opt-arm64")
    if why is not None:
        pytest.skip(why)
    import tempfile
    from pathlib import Path

    jobs = [(kind, seed, *_case(kind, seed)) for kind in KINDS for seed in range(4)]
    got = run_ort_arm64([(m.SerializeToString(), feeds) for _, _, m, feeds, _ in jobs], "a76")
    with tempfile.TemporaryDirectory(prefix="ort_wbq_arm64_") as tmp:
        for (kind, seed, m, feeds, names), g in zip(jobs, got):
            assert isinstance(g, dict), f"{kind} seed {seed}: {g}"
            p = Path(tmp) / f"{kind}{seed}.onnx"
            onnx.save(m, str(p))
            ours = refinterp.Session(refinterp.load(str(p)), "onnxruntime-arm64").run(feeds, capture=names)
            for n in names:
                if g[n].dtype != np.float32:  # float kernels are not claimed bit-exact on ARM
                    bad = int(np.count_nonzero(np.asarray(ours[n]) != g[n]))
                    assert bad == 0, f"{kind} seed {seed} {n}: {bad} of {g[n].size} codes differ"
