"""AveragePool under the ``qnn-htp-*`` schemes against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0,
QNN 2.51): every window form refinterp accepts (kernels/qnn_htp/avgpool.py), every QuantizeLinear
output equal code for code, uint8 and int8, v68 and v73; the forms it refuses are refused by name."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

import refinterp
from refinterp.errors import UnsupportedOpError
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


def _pool_job(rng, act, kernel, pads, cip, hw, xs=None, ys=None, channels=16, spread=60, **extra):
    info = np.iinfo(act)
    xs = xs or float(F(10 ** rng.uniform(-3, -1) / (1 if info.bits == 8 else 256)))
    ys = ys or float(F(xs * 10 ** rng.uniform(-0.7, 0.3)))
    xz, yz = (int(rng.integers(int(info.min), int(info.max) + 1)) for _ in range(2))
    attrs = {"kernel_shape": list(kernel), "count_include_pad": cip, **extra}
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


@pytest.mark.parametrize("arch,act", [(a, act) for a in MAIN for act in ("uint8", "int8", "uint16")])
def test_average_pool_2x2_stride_2(tmp_path, arch, act):
    """The 2x2 stride-2 kernel (htp_pool.pair_average) over its whole multiplier range: A = s_x / (4 s_y)
    from 2^-8 to 2^7 (one set in each binade, so every second shift s2 = 0, 4 .. 7 runs, and one more
    in each binade below 1/2 where the second rounding shows), even and odd input sizes, ceil_mode on
    even sizes, count_include_pad 1 (no padding: no effect), and a window over the whole input
    (GlobalAveragePool's rule, which differs from this one below A = 1/2)."""
    rng = np.random.default_rng(zlib.crc32(repr(("avgpool2x2s2", arch, act)).encode()))
    sixteen = act == "uint16"
    xs = 0.01 / (256 if sixteen else 1)
    spread = 3000 if sixteen else 60
    exps = list(range(-8, 8)) + list(range(-8, -1))
    jobs = []
    for j, e in enumerate(exps):
        A = 2.0 ** (e + rng.uniform(0.02, 0.98))
        hw, extra = [((12, 12), {}), ((13, 15), {}), ((16, 10), {"ceil_mode": 1}), ((7, 9), {})][j % 4]
        jobs.append(_pool_job(rng, act, (2, 2), None, j % 2, hw, xs=xs, ys=float(F(xs / (4 * A))), spread=spread,
                              strides=[2, 2], **extra))
    for A in (0.039, 0.17, 0.39):
        jobs.append(_pool_job(rng, act, (2, 2), None, 0, (2, 2), xs=xs, ys=float(F(xs / (4 * A))), channels=256,
                              spread=spread, strides=[2, 2]))
    _check_many(tmp_path, jobs, arch)


@pytest.mark.parametrize("arch", MAIN)
def test_average_pool_refusals(tmp_path, arch):
    rng = np.random.default_rng(3)
    for kernel, strides in (((3, 3), [2, 2]), ((4, 4), [4, 4]), ((2, 2), [1, 2])):
        m, _ = _pool_job(rng, "uint8", kernel, None, 0, (12, 12), strides=strides)
        assert "2x2 windows with strides 2 only" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    m, _ = _pool_job(rng, "uint8", (2, 2), [0, 0, 1, 1], 1, (12, 12), strides=[2, 2])
    assert "padded 2x2 stride-2" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    m, _ = _pool_job(rng, "uint8", (2, 2), None, 0, (12, 12), xs=0.01, ys=float(F(0.01 / (4 * 2.0 ** -9))),
                     strides=[2, 2])
    assert "below 2^-8" in _refused(tmp_path, m, f"qnn-htp-v{arch}")
    m, feeds = _pool_job(rng, "uint8", (2, 2), None, 0, (13, 12), strides=[2, 2], ceil_mode=1)
    (tmp_path / "c.onnx").write_bytes(m.SerializeToString())
    sess = refinterp.Session(refinterp.load(str(tmp_path / "c.onnx")), f"qnn-htp-v{arch}")
    with pytest.raises(UnsupportedOpError, match="hangs past the input"):
        sess.run(feeds)
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
