"""int8 QDQ Conv / MatMul units that ORT's x86 S8->U8 re-encoding leaves int8 -- the unit's QuantizeLinear output is a
graph output, and so is its input's (as when a dump exposes every quantized tensor) -- against onnxruntime 1.32.0: on x86 its Conv / MatMul
selectors take int8 activations only where QDQIsInt8Allowed() (ARM), so the unit runs in float (DQ -> float op -> Q)
under ``onnxruntime-cpu`` and as QLinearConv / QLinearMatMul under ``onnxruntime-arm64`` (against the aarch64 build
under qemu).  refinterp fused it on x86 before: the integer requantization and the float path round apart near
ties (a quantize_static MobileNetV3-style model, every quantized tensor exposed: 1 code of 9,216; here 1 code in
36,864-65,536 on some layers), so both schemes' tests can fail (checked: the x86 rule applied on ARM, or left out
on x86, fails them)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

import refinterp  # noqa: E402

from tests.conformance.test_ort_weight_bias import _init  # noqa: E402

F = np.float32


def _unit(op: str, seed: int):
    """x -> Q -> DQ -> op(DQ(int8 w), DQ(int32 b)) -> Q, both Q outputs graph outputs (int8, so neither is
    re-encoded), per-channel weights on odd seeds."""
    rng = np.random.default_rng(seed)
    C, K = 16, 8
    pc = seed % 2 == 1
    xs, ys = F(rng.uniform(0.01, 0.04)), F(rng.uniform(0.01, 0.02))
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    if op == "Conv":
        shape, w = [1, K, 48, 48], rng.integers(-127, 128, (C, K, 3, 3))
        ws = (rng.uniform(0.002, 0.01, C) if pc else np.array(0.005)).astype(F)
        axis, attrs, bias = 0, {"pads": [1, 1, 1, 1]}, ["bd"]
    else:
        shape, w = [4096, 64], rng.integers(-127, 128, (64, C))
        ws = (rng.uniform(0.002, 0.01, C) if pc else np.array(0.005)).astype(F)
        axis, attrs, bias = 1, {}, []
    inits = [_init(xs, "xs", F), _init(int(rng.integers(-20, 20)), "xz", np.int8), _init(ys, "ys", F),
             _init(int(rng.integers(-20, 20)), "yz", np.int8), _init(w, "w", np.int8), _init(ws, "ws", F),
             _init(np.zeros(ws.size, np.int8) if pc else 0, "wz", np.int8)]
    nodes.append(helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=axis))
    if bias:
        inits += [_init(rng.integers(-3000, 3000, C), "b", np.int32), _init((xs * ws).astype(F), "bs", F)]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs"], ["bd"], axis=0))
    nodes += [helper.make_node(op, ["xd", "wd"] + bias, ["c"], **attrs),
              helper.make_node("QuantizeLinear", ["c", "ys", "yz"], ["y"])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.INT8, None),
                           helper.make_tensor_value_info("xq", TensorProto.INT8, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    return m, {"x": (rng.standard_normal(shape) * 1.2).astype(F)}


def _ours(tmp_path, m, feeds, scheme: str, tag: str) -> np.ndarray:
    p = tmp_path / f"{tag}.onnx"
    onnx.save(m, str(p))
    return np.asarray(refinterp.Session(refinterp.load(str(p)), scheme).run(feeds, capture=["y"])["y"])


@pytest.mark.parametrize("op", ["Conv", "MatMul"])
def test_int8_unit_with_graph_output_runs_in_float_on_x86(tmp_path, op):
    for seed in range(8):
        m, feeds = _unit(op, seed)
        want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(["y"], feeds)[0]
        got = _ours(tmp_path, m, feeds, "onnxruntime-cpu", f"{op}{seed}")
        bad = int(np.count_nonzero(got != want))
        assert bad == 0, f"{op} seed {seed}: {bad} of {want.size} codes differ"


def test_int8_unit_with_graph_output_is_fused_on_arm64(tmp_path):
    from tests.conformance._int_oracle import arm64_skip_reason
    from tests.conformance._ort_arm64 import run_ort_arm64

    why = arm64_skip_reason("opt-arm64")
    if why is not None:
        pytest.skip(why)
    jobs = [(op, seed, *_unit(op, seed)) for op in ("Conv", "MatMul") for seed in range(4)]
    got = run_ort_arm64([(m.SerializeToString(), feeds) for _, _, m, feeds in jobs], "a76")
    for (op, seed, m, feeds), g in zip(jobs, got):
        assert isinstance(g, dict), f"{op} seed {seed}: {g}"
        ours = _ours(tmp_path, m, feeds, "onnxruntime-arm64", f"arm{op}{seed}")
        bad = int(np.count_nonzero(ours != g["y"]))
        assert bad == 0, f"{op} seed {seed}: {bad} of {ours.size} codes differ"
