"""AveragePool under the ``qnn-htp-*`` schemes against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0,
QNN 2.51): every window form refinterp accepts (kernels/qnn_htp/avgpool.py), every QuantizeLinear
output equal code for code, uint8 and int8, v68 and v73; the forms it refuses are refused by name."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from refinterp.kernels.qnn_htp.avgpool import AVERAGE_WINDOWS, CONV_WINDOWS

from tests.conformance.test_qnn_htp_numerics import _model
from tests.conformance.test_qnn_htp_ops import MAIN, _check_many, _qdq_in, _qdq_out, _refused

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32

# (kernel, pads, count_include_pad, input H x W): both kernels, padded and not, a window as large as
# the input, auto_pad
FORMS = [((k, k), None, 0, (12, 12)) for k in range(2, 9)] + [
    ((1, 3), None, 0, (12, 12)), ((2, 3), None, 0, (12, 12)), ((3, 5), None, 0, (12, 12)),
    ((5, 3), None, 0, (12, 12)), ((4, 3), None, 0, (12, 12)), ((7, 3), None, 0, (12, 12)),
    ((3, 3), [1, 1, 1, 1], 1, (12, 12)), ((5, 5), [2, 2, 2, 2], 1, (12, 12)), ((7, 7), [3, 3, 3, 3], 1, (9, 9)),
    ((2, 2), [0, 0, 1, 1], 0, (12, 12)), ((2, 2), [0, 0, 1, 1], 1, (12, 12)), ((3, 5), [1, 2, 1, 2], 0, (12, 12)),
    ((4, 4), [1, 1, 2, 2], 0, (12, 12)), ((7, 7), None, 0, (7, 7)), ((3, 3), "SAME_UPPER", 1, (10, 10)),
    ((2, 2), None, 0, (2, 2)), ((9, 9), None, 0, (12, 12)), ((15, 15), None, 0, (18, 18)),
    ((16, 1), None, 0, (18, 18)), ((8, 16), None, 0, (18, 18)), ((8, 8), None, 0, (16, 16)),
]


def _pool_job(rng, act, kernel, pads, cip, hw, xs=None, ys=None, channels=16, spread=60):
    info = np.iinfo(act)
    xs = xs or float(F(10 ** rng.uniform(-3, -1) / (1 if info.bits == 8 else 256)))
    ys = ys or float(F(xs * 10 ** rng.uniform(-0.7, 0.3)))
    xz, yz = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(2))
    attrs = {"kernel_shape": list(kernel), "count_include_pad": cip}
    if isinstance(pads, str):
        attrs["auto_pad"] = pads
    elif pads is not None:
        attrs["pads"] = pads
    i1, n1 = _qdq_in("x", xs, xz, act)
    n1.append(helper.make_node("AveragePool", ["x_d"], ["p"], **attrs))
    io, no = _qdq_out("p", "y", ys, yz, act)
    shape = [1, channels, *hw]
    m = _model(n1 + no, i1 + io, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
               [helper.make_tensor_value_info("y_dq", TensorProto.FLOAT, None)])
    # codes spread around a per-channel centre, so window means cover the range without saturating
    q = np.clip(rng.integers(int(info.min), int(info.max) + 1, (1, channels, 1, 1)) + rng.integers(-spread, spread, shape),
                int(info.min), int(info.max))
    return m, {"x": ((q - xz) * F(xs)).astype(F)}


@pytest.mark.parametrize("arch,act", [(a, act) for a in MAIN for act in ("uint8", "int8")])
def test_average_pool_stride_one(tmp_path, arch, act):
    """The three kernels at random scales (28 forms), and the float32 path on exact ties: s_x = s_y and
    2^j cells, so half the window means end in .5 (the tie rule and the summation order show)."""
    rng = np.random.default_rng(zlib.crc32(repr(("avgpool", arch, act)).encode()))
    jobs = [_pool_job(rng, act, *form) for form in FORMS]
    jobs.append(_pool_job(rng, act, (8, 8), None, 0, (24, 24), channels=64))  # 8x8: 2-7 codes in 6,000 show
    for kernel in ((2, 2), (2, 1), (4, 4)):
        jobs.append(_pool_job(rng, act, kernel, None, 0, (12, 12), xs=0.01, ys=0.01))
        jobs.append(_pool_job(rng, act, kernel, None, 0, (12, 12), xs=0.02, ys=0.01))
    assert {f[0][0] for f in FORMS if f[0][0] == f[0][1]} >= set(CONV_WINDOWS) | set(AVERAGE_WINDOWS) | {2, 4, 9}
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
def test_average_pool_refusals(tmp_path, arch):
    rng = np.random.default_rng(3)
    for kernel, strides in (((2, 2), [2, 2]), ((3, 3), [2, 2]), ((4, 4), [4, 4])):
        m, _ = _pool_job(rng, "uint8", kernel, None, 0, (12, 12))
        next(n for n in m.graph.node if n.op_type == "AveragePool").attribute.append(
            helper.make_attribute("strides", strides))
        assert "stride 1 only" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    m, _ = _pool_job(rng, "uint8", (3, 3), [1, 1, 1, 1], 0, (12, 12))
    assert "count_include_pad 0" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    m, _ = _pool_job(rng, "uint8", (8, 8), [1, 1, 1, 1], 1, (12, 12))
    assert "padded 8x8" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    m, _ = _pool_job(rng, "uint8", (16, 16), None, 0, (20, 20))
    assert "16x16 follows another rule" in _refused(tmp_path, m, f"qnn-htp-v{arch}")


# uint16: every form of the 8-bit test (the convolution windows on the 16-bit convolution, 8x8 on the float32
# path, whole-input windows on GlobalAveragePool's rule)
A16_FORMS = FORMS


@pytest.mark.parametrize("arch", MAIN)
def test_a16_average_pool(tmp_path, arch):
    """uint16 AveragePool on the float32 path: every non-convolution form of the 8-bit test, codes spread
    by +-3,000 around a per-channel centre."""
    rng = np.random.default_rng(zlib.crc32(repr(("a16avgpool", arch)).encode()))
    jobs = [_pool_job(rng, "uint16", *form, spread=3000) for form in A16_FORMS]
    jobs.append(_pool_job(rng, "uint16", (8, 8), None, 0, (24, 24), channels=64, spread=3000))
    for k in CONV_WINDOWS * 3:  # the multiplier's float32 derivation shows on about one scale set in five
        jobs.append(_pool_job(rng, "uint16", (k, k), None, 0, (16, 16), channels=32, spread=3000))
    _check_many(tmp_path, jobs, arch)


def test_a16_average_pool_refusals(tmp_path):
    m, _ = _pool_job(np.random.default_rng(1), "uint16", (3, 3), [1, 1, 1, 1], 0, (12, 12))
    assert "count_include_pad 0" in _refused(tmp_path, m, "qnn-htp-v73")
    m, _ = _pool_job(np.random.default_rng(1), "uint16", (8, 8), [1, 1, 1, 1], 1, (12, 12))
    assert "padded 8x8" in _refused(tmp_path, m, "qnn-htp-v73")
    m, _ = _pool_job(np.random.default_rng(1), "int16", (2, 2), None, 0, (12, 12))
    assert "int16 AveragePool" in _refused(tmp_path, m, "qnn-htp-v73")
