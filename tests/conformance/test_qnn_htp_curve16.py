"""16-bit Sigmoid and Tanh under the ``qnn-htp-*`` schemes against Qualcomm's HTP emulation (onnxruntime-qnn
2.7.0, QNN 2.51): the input grid and multiplier, the curves measured at one scale (refinterp/quant/htp_curve16.py,
tools/measure_htp_curves.py) read at every other, the mirror below the zero point, and the output encoding the QNN
EP imposes whatever the model declares -- every QuantizeLinear output equal code for code, the float outputs within
3 float32 ulps (the HTP's 16-bit DequantizeLinear, as in test_qnn_htp_models.py)."""
from __future__ import annotations

import zlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import refinterp
from refinterp.quant import htp_curve16
from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import MAIN, _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32
ACTS = ("uint16", "int16")


def _unary_job(op, act, s, z, ys, yz, codes, shape=None):
    """x -> Q/DQ -> op -> Q(ys, yz)/DQ over the given input codes."""
    i1, n1 = _qdq_in("x", s, z, act)
    io, no = _qdq_out("f", "y", ys, yz, act)
    shape = shape or [1, codes.size]
    m = _model(n1 + [helper.make_node(op, ["x_d"], ["f"])] + no, i1 + io,
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    return m, {"x": ((codes.reshape(shape) - z) * F(s)).astype(F)}


def _float_outputs_close(tmp_path, jobs, arch, ulps=3):
    """The graph's float output (a DequantizeLinear of the overridden encoding) within ``ulps`` of the
    emulator's."""
    from refinterp.dumps.capture_qnn import htp_session

    for i, (m, feeds) in enumerate(jobs):
        p = tmp_path / f"f{i}.onnx"
        onnx.save(m, str(p))
        (theirs,) = htp_session(str(p), arch).run(["y_dq"], feeds)
        ours = np.asarray(refinterp.Session(refinterp.load(str(p)), f"qnn-htp-v{arch}").run(feeds)["y_dq"], F)
        gap = np.abs(ours.view(np.int32).astype(np.int64) - theirs.astype(F).view(np.int32).astype(np.int64))
        assert np.all(np.sign(ours) * np.sign(theirs) >= 0) and gap.max() <= ulps, (i, int(gap.max()))


@pytest.mark.parametrize("arch", MAIN)
@pytest.mark.parametrize("op", ["Sigmoid", "Tanh"])
@pytest.mark.parametrize("act", ACTS)
def test_curve16_every_code(tmp_path, arch, op, act):
    """Every input code at six input scales (1e-5 .. 4e-3: the multiplier with 15 fractional bits and with
    fewer), zero points in the middle, near the ends and at the lowest code, each with a declared output
    encoding the QNN EP replaces (random, and the fixed one itself)."""
    info = np.iinfo(act)
    lo, hi = int(info.min), int(info.max)
    codes = np.arange(lo, hi + 1)
    rng = np.random.default_rng(zlib.crc32(repr(("curve16", op, act)).encode()))
    jobs, ks = [], set()
    for i, s in enumerate((1.2e-5, 6.3e-5, 1.9e-4, 4.4e-4, 1.7e-3, 3.9e-3)):
        while True:  # off the multiplier's rounding ties (refused: test_curve16_refusals)
            s1 = float(F(s * 10 ** rng.uniform(-0.05, 0.05)))
            m = htp_curve16.GRID[op] * s1 * 2.0 ** min(15, 14 - int(np.floor(np.log2(htp_curve16.GRID[op] * s1))))
            if abs(m % 1 - 0.5) > 0.02:
                break
        s = s1
        z = (lo + hi + 1) // 2 + int(rng.integers(-9000, 9000)) if i % 3 == 0 else \
            int(rng.integers(lo, lo + 3000)) if i % 3 == 1 else lo
        ks.add(htp_curve16.index_multiplier(op, s, "test")[1])
        ys, yz = htp_curve16.ENCODING[op, act] if i == 2 else \
            (float(F(10 ** rng.uniform(-5.2, -4))), int(rng.integers(lo, hi + 1)))
        jobs.append(_unary_job(op, act, s, z, float(F(ys)), yz, codes))
    assert min(ks) < 15 and 15 in ks, ks
    assert _check_many(tmp_path, jobs, arch) == 2 * 6 * 65536
    _float_outputs_close(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
def test_curve16_output_feeds_other_ops(tmp_path, arch):
    """A 16-bit Sigmoid / Tanh whose declared output encoding differs from the imposed one, read by an Add, a
    Conv, a MaxPool and a GlobalAveragePool: the readers take the imposed encoding too (0 codes off)."""
    rng = np.random.default_rng(zlib.crc32(b"curve16-readers"))
    shape = [1, 4, 16, 32]
    jobs = []
    for op, reader, ys, yz in (("Sigmoid", "Add", 5e-4, 2000), ("Sigmoid", "Conv", 1e-4, 2000),
                               ("Sigmoid", "MaxPool", 1 / 65536, 0), ("Sigmoid", "GlobalAveragePool", 1 / 65536, 0),
                               ("Tanh", "Conv", 2e-4, 30000)):
        s, z = float(F(4e-4)), 30000
        i1, n1 = _qdq_in("x", s, z, "uint16")
        io, no = _qdq_out("f", "g", float(F(1 / 50000)), 1000, "uint16")
        nodes, inits = n1 + [helper.make_node(op, ["x_d"], ["f"])] + no, i1 + io
        if reader == "Add":
            nodes.append(helper.make_node("Add", ["g_dq", "x_d"], ["h"]))
        elif reader == "Conv":
            inits += [_init(rng.integers(-127, 128, (4, 4, 1, 1)), "w", np.int8),
                      _init(np.full(4, 0.01), "ws", np.float32), _init(np.zeros(4), "wz", np.int8)]
            nodes += [helper.make_node("DequantizeLinear", ["w", "ws", "wz"], ["wd"], axis=0),
                      helper.make_node("Conv", ["g_dq", "wd"], ["h"])]
        elif reader == "MaxPool":
            nodes.append(helper.make_node("MaxPool", ["g_dq"], ["h"], kernel_shape=[2, 2]))
        else:
            nodes.append(helper.make_node("GlobalAveragePool", ["g_dq"], ["h"]))
        io2, no2 = _qdq_out("h", "y", float(F(ys)), yz, "uint16")
        m = _model(nodes + no2, inits + io2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                   [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
        q = rng.integers(0, 65536, shape)
        jobs.append((m, {"x": ((q - z) * F(s)).astype(F)}))
    _check_many(tmp_path, jobs, arch)


def test_curve16_refusals(tmp_path):
    """A multiplier on a rounding tie (G s 2^15 = 10000.5 +- 0.01), x * Sigmoid(x) at 16 bits (measured: the HTP
    computes it otherwise than the curve followed by the 16-bit Mul kernel, 149-369 codes of 4,096 off), and a
    Reshape that requantizes from the imposed encoding, with a message that says why it requantizes."""
    s = float(F(10000.5 / (6144 * 2 ** 15)))
    m, _ = _unary_job("Sigmoid", "uint16", s, 32768, 1 / 65536, 0, np.arange(16))
    assert "rounding tie" in _refused(tmp_path, m, "qnn-htp-v73")
    i1, n1 = _qdq_in("x", 4e-4, 30000, "uint16")
    io, no = _qdq_out("f", "g", float(F(1 / 65536)), 0, "uint16")
    io2, no2 = _qdq_out("h", "y", 3e-4, 12768, "uint16")
    m = _model(n1 + [helper.make_node("Sigmoid", ["x_d"], ["f"])] + no + [helper.make_node("Mul", ["x_d", "g_dq"], ["h"])]
               + no2, i1 + io + io2, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "uint16" in _refused(tmp_path, m, "qnn-htp-v73")
    # a Reshape declaring the Sigmoid's own (calibrated) parameters: on the device it requantizes from the imposed
    # encoding (MEASURED.md: neither the copy table nor a requantization of the Q15 value fits)
    io, no = _qdq_out("f", "g", 1.5241644e-05, 0, "uint16")
    io2, no2 = _qdq_out("r", "y", 1.5241644e-05, 0, "uint16")
    m = _model(n1 + [helper.make_node("Sigmoid", ["x_d"], ["f"])] + no + [helper.make_node("Reshape", ["g_dq", "shp"], ["r"])]
               + no2, i1 + io + io2 + [_init(np.array([1, 8, 8]), "shp", np.int64)],
               [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    assert "imposes a 16-bit Sigmoid" in _refused(tmp_path, m, "qnn-htp-v73")
