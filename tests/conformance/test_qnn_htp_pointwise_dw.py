"""1x1 depthwise Conv and uint8 weights on int8 activations, against Qualcomm's HTP emulation (onnxruntime-qnn
2.7.0): a strided 1x1 depthwise Conv takes the convolution rule (refinterp ran the strided depthwise kernel:
4-42 codes of 512 off); v68's stride-1 1x1 depthwise, v73's 1x1 by (2, 2) on 2-4 channels and uint8 weights
on int8 activations (42-297 codes off the uint8 weight rule, a wrong answer before) are refused
(kernels/qnn_htp/gemm.py)."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _dw_job(rng, strides, act: str, weights: str, bias: bool, channels: int = 8, k: int = 1, size: int = 15,
            group: bool = True):
    """x (act) -> depthwise (or with ``group`` False full) k x k Conv -> Q(act); weights "pt" (int8, one scale),
    "pc" (int8 per channel) or "u8" (uint8 with a zero point)."""
    lo = 0 if act == "uint8" else -128
    sx = float(F(rng.uniform(0.01, 0.04)))
    inits, nodes = _qdq_in("x", sx, lo + int(rng.integers(100, 150)), act)
    shape = (channels, 1 if group else channels, k, k)
    if weights == "u8":
        w, wz, ws = rng.integers(0, 256, shape), int(rng.integers(100, 150)), float(F(rng.uniform(0.005, 0.03)))
        inits += [_init(w, "w", np.uint8), _init(wz, "wz", np.uint8), _init(ws, "ws", F)]
    else:
        ws = rng.uniform(0.005, 0.03, channels).astype(F) if weights == "pc" else float(F(rng.uniform(0.005, 0.03)))
        inits += [_init(rng.integers(-127, 128, shape), "w", np.int8), _init(ws, "ws", F),
                  _init(np.zeros(np.shape(ws), np.int8), "wz", np.int8)]
    nodes.append(helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0))
    ins = ["x_d", "wd"]
    if bias:
        bs = (sx * np.asarray(ws, np.float64)).astype(F)
        inits += [_init(rng.integers(-2000, 2000, channels), "b", np.int32), _init(bs, "bs", F),
                  _init(np.zeros(np.shape(bs), np.int32), "bz", np.int32)]
        nodes.append(helper.make_node("DequantizeLinear", ["b", "bs", "bz"], ["bd"], axis=0))
        ins.append("bd")
    nodes.append(helper.make_node("Conv", ins, ["p"], strides=list(strides), group=channels if group else 1,
                                  pads=[k // 2] * 4))
    i, n = _qdq_out("p", "y", float(F(rng.uniform(0.005, 0.03))), lo + int(rng.integers(60, 200)), act)
    m = _model(nodes + n, inits + i, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, size, size])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    return m, {"x": rng.uniform(-3, 3, (1, channels, size, size)).astype(F)}


STRIDES = {"68": [(2, 2), (3, 3)], "73": [(2, 2), (3, 3), (1, 2), (2, 1), (1, 1)]}


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("68", "int8"), ("73", "uint8"), ("73", "int8")])
def test_pointwise_depthwise_takes_the_convolution_rule(tmp_path, arch, act):
    """Each stride the arch runs as a convolution x int8 weights per tensor / per channel x with and without a
    bias (uint8 weights on uint8 activations too), 8 channels of 15 x 15: every output code equal."""
    rng = np.random.default_rng(zlib.crc32(repr(("pointwise", arch, act)).encode()))
    kinds = [("pt", False), ("pt", True), ("pc", False), ("pc", True)] + ([("u8", False)] if act == "uint8" else [])
    jobs = [_dw_job(rng, s, act, w, b) for s in STRIDES[arch] for w, b in kinds]
    _check_many(tmp_path, jobs, arch)


def test_pointwise_depthwise_not_characterised_is_refused(tmp_path):
    """v68 runs a stride-1 (and a (1, 2) / (2, 1)) 1x1 depthwise Conv through another kernel, v73 one by (2, 2) on
    2-4 channels gives one value per channel (measured): both refused."""
    rng = np.random.default_rng(5)
    for strides in ((1, 1), (1, 2)):
        m, _ = _dw_job(rng, strides, "uint8", "pt", False)
        assert "v68 runs another kernel" in _refused(tmp_path, m, "qnn-htp-v68")
    m, _ = _dw_job(rng, (2, 2), "uint8", "pt", False, channels=3)
    assert "one value per channel" in _refused(tmp_path, m, "qnn-htp-v73")


@pytest.mark.parametrize("arch", ["68", "73"])
def test_uint8_weights_on_int8_activations_are_refused(tmp_path, arch):
    """The same layers on uint8 activations follow the uint8 weight rule (test_qnn_htp_weights.py); on int8
    activations the HTP computes something else, so refinterp's answer there was wrong: the emulator's output differs
    from refinterp's rule run on the uint8 twin of the model (codes + 128), and the int8 model is refused."""
    import refinterp
    from refinterp.errors import UnsupportedOpError
    from tests.conformance.test_qnn_htp_numerics import htp_batch_outputs

    rng = np.random.default_rng(zlib.crc32(repr(("u8w", arch)).encode()))
    jobs, twins = [], []
    for group in (True, False):
        state = rng.bit_generator.state
        jobs.append((*_dw_job(rng, (1, 1), "int8", "u8", False, k=3, group=group), ["y"]))
        rng.bit_generator.state = state  # the uint8 twin: every zero point 128 up, the same inputs and weights
        twins.append(_dw_job(rng, (1, 1), "uint8", "u8", False, k=3, group=group))
    for m, _, _ in jobs:
        m.graph.output.append(helper.make_tensor_value_info("y", TensorProto.INT8, None))
    got = htp_batch_outputs(tmp_path, jobs, arch)
    for i, ((twin, feeds), deployed) in enumerate(zip(twins, got)):
        p = tmp_path / f"twin{i}.onnx"
        p.write_bytes(twin.SerializeToString())
        rule = refinterp.Session(refinterp.load(str(p)), f"qnn-htp-v{arch}").run(feeds, capture=["y"])["y"]
        assert np.count_nonzero(rule.astype(np.int64) - 128 != deployed["y"]) > 0, i
        with pytest.raises(UnsupportedOpError, match="uint8 weights with int8 activations"):
            refinterp.Session(refinterp.load(str(tmp_path / f"m{i}.onnx")), f"qnn-htp-v{arch}")
