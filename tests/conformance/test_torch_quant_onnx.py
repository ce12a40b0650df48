"""ONNX models (built with onnx.helper, loaded by refinterp.load) vs torch's quantized engines:
QOperator QLinearConv (per-tensor / per-channel), QDQ Clip(0, 6) = quantized relu6 / hardtanh, and
reduce_range activation parameters (refinterp.quant.torchq.activation_qparams vs torch observers)."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import refinterp
from refinterp.quant import torchq

from _torch_quant import F32, SCHEME, qtensor, qweight

torch = pytest.importorskip("torch")
qF = pytest.importorskip("torch.ao.nn.quantized.functional")
ENGINES = [e for e in ("fbgemm", "qnnpack", "x86", "onednn") if e in torch.backends.quantized.supported_engines]


def _save(path, nodes, inits, x_shape, y_shape, y_type=TensorProto.UINT8, opset=17):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT if y_type == TensorProto.FLOAT
                                                                      else TensorProto.UINT8, x_shape)],
                          [helper.make_tensor_value_info("y", y_type, y_shape)],
                          initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    path.write_bytes(m.SerializeToString())


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_qlinearconv_model(tmp_path, engine, per_channel):
    torch.backends.quantized.engine = engine
    rng = np.random.default_rng(40 + per_channel)
    diff = total = 0
    for i in range(6):
        cin, cout = 3, 5
        xs, zx = F32(2.0 ** -5) if i % 2 else F32(0.0173), int(rng.integers(0, 128)) * 2 + 1
        ys, zy = F32(2.0 ** -3) if i % 2 else F32(0.091), int(rng.integers(0, 128)) * 2 + 1
        ws = (F32(2.0) ** -rng.integers(4, 7, cout if per_channel else 1).astype(F32) if i % 2 else
              rng.uniform(0.005, 0.03, cout if per_channel else 1).astype(F32))
        w = rng.integers(-128, 128, (cout, cin, 3, 3)).astype(np.int8)
        bq = rng.integers(-4000, 4000, cout).astype(np.int32)
        x = rng.integers(0, 256, (1, cin, 9, 9)).astype(np.uint8)
        inits = {"xs": xs, "xz": np.uint8(zx), "w": w, "ws": ws if per_channel else ws.reshape(()),
                 "wz": np.zeros(cout if per_channel else (), np.int8), "ys": ys, "yz": np.uint8(zy), "b": bq}
        node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"], ["y"],
                                pads=[1, 1, 1, 1], strides=[2, 2])
        _save(tmp_path / "m.onnx", [node], inits, [1, cin, 9, 9], None)
        got = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), scheme=SCHEME[engine]).run({"x": x})["y"]
        aw = (xs * ws).astype(F32) * np.ones(cout, F32)
        ref = qF.conv2d(qtensor(torch, x, xs, zx), qweight(torch, w, ws), torch.from_numpy((bq.astype(F32) * aw).astype(F32)),
                        stride=2, padding=1, scale=float(ys), zero_point=zy).int_repr().numpy()
        diff += int((got != ref).sum())
        total += ref.size
    assert diff == 0, f"{diff} of {total} elements differ"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("op", ["relu6", "hardtanh"])
def test_qdq_clip_is_relu6(tmp_path, engine, op):
    """DQ -> Clip(lo, hi) -> Q with the input's parameters: torch quantized relu6 / hardtanh clamp
    the codes at quantize(lo) / quantize(hi) (quantize_val: fma with the zero point)."""
    torch.backends.quantized.engine = engine
    rng = np.random.default_rng(50)
    diff = total = 0
    for i in range(10):
        s = F32(6.0 / int(rng.integers(20, 300))) if i % 2 else F32(rng.uniform(0.01, 0.08))
        z = int(rng.integers(0, 200))
        lo, hi = (0.0, 6.0) if op == "relu6" else (-float(rng.uniform(0.1, 2)), float(rng.uniform(0.5, 4)))
        q = np.arange(256, dtype=np.uint8).reshape(1, 1, 16, 16)
        X = qtensor(torch, q, s, z)
        ref = (torch.ops.quantized.relu6(X, False) if op == "relu6" else qF.hardtanh(X, lo, hi)).int_repr().numpy()
        inits = {"s": s, "z": np.uint8(z), "lo": F32(lo), "hi": F32(hi)}
        nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["d"]),
                 helper.make_node("Clip", ["d", "lo", "hi"], ["c"]),
                 helper.make_node("QuantizeLinear", ["c", "s", "z"], ["y"])]
        _save(tmp_path / "m.onnx", nodes, inits, [1, 1, 16, 16], [1, 1, 16, 16])
        got = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), scheme=SCHEME[engine]).run({"x": q})["y"]
        diff += int((got != ref).sum())
        total += ref.size
    assert diff == 0, f"{diff} of {total} elements differ"


@pytest.mark.parametrize("reduce_range", [False, True])
def test_reduce_range_qparams_match_torch_observer(reduce_range):
    from torch.ao.quantization.observer import MinMaxObserver
    rng = np.random.default_rng(60)
    for _ in range(50):
        x = (rng.standard_normal(100) * rng.uniform(0.1, 10) + rng.uniform(-3, 3)).astype(F32)
        obs = MinMaxObserver(dtype=torch.quint8, reduce_range=reduce_range)
        obs(torch.from_numpy(x))
        s, z = obs.calculate_qparams()
        ms, mz = torchq.activation_qparams(float(x.min()), float(x.max()), reduce_range)
        assert F32(s.item()) == ms and int(z.item()) == mz
        if reduce_range:
            assert torch.quantize_per_tensor(torch.from_numpy(x), float(ms), mz, torch.quint8).int_repr().max() <= 127


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("op", ["HardSwish", "Elu"])
def test_qdq_hardswish_elu_units(tmp_path, engine, op):
    """uint8 DQ -> HardSwish | Elu -> Q, fused by fuse_qdq_torch into torch's quantized op."""
    torch.backends.quantized.engine = engine
    rng = np.random.default_rng(70)
    diff = total = 0
    for i in range(12):
        xs, zx = F32(rng.uniform(0.01, 0.06)), int(rng.integers(0, 256))
        ratio = (0.5, 1.0, 2.0, None)[i % 4]
        ys = F32(xs * ratio) if ratio else F32(rng.uniform(0.01, 0.06))
        zy = int(rng.integers(0, 128)) * 2 + i % 2
        q = np.arange(256, dtype=np.uint8).reshape(1, 4, 8, 8)
        X = qtensor(torch, q, xs, zx)
        ref = (qF.hardswish(X, float(ys), zy) if op == "HardSwish" else qF.elu(X, float(ys), zy, 1.0)).int_repr().numpy()
        inits = {"xs": xs, "xz": np.uint8(zx), "ys": ys, "yz": np.uint8(zy)}
        nodes = [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["d"]),
                 helper.make_node(op, ["d"], ["h"]),
                 helper.make_node("QuantizeLinear", ["h", "ys", "yz"], ["y"])]
        _save(tmp_path / "m.onnx", nodes, inits, [1, 4, 8, 8], [1, 4, 8, 8])
        sess = refinterp.Session(refinterp.load(str(tmp_path / "m.onnx")), scheme=SCHEME[engine])
        assert [s.node.op for s in sess.steps] == [op]  # one fused quantized node
        got = sess.run({"x": q})["y"]
        diff += int((got != ref).sum())
        total += ref.size
    assert diff == 0, f"{diff} of {total} elements differ"
