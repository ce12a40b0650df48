"""uint16 GlobalAveragePool near rounding ties (quant/htp_pool.py: below A = 1/2 the HTP rounds twice, the first
shift by the bit length of the cell count), against Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0).  Found on a
MobileNetV3-Small by get_qnn_qdq_config at uint16: one code of 576 off at v68."""
from __future__ import annotations

import zlib

import numpy as np
import pytest
from onnx import TensorProto, helper

from refinterp.quant import htp_pool
from tests.conformance.test_qnn_htp_numerics import _init, _model
from tests.conformance.test_qnn_htp_ops import _check_many

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

F = np.float32


def _near_tie_job(rng, hw: int, ratio: float):
    """A uint16 GlobalAveragePool over hw x hw whose channel sums S put S * i within 40 units of 2^-p below a
    rounding tie (and a few above), with the count of sums where one rounding and the HTP's two differ."""
    n = hw * hw
    sx = F(10 ** rng.uniform(-5, -4))
    sy = F(sx * ratio)
    zx, zy = int(rng.integers(28000, 36000)), int(rng.integers(25000, 40000))
    p, i = htp_pool.average_params(float(sx) / (float(sy) * n))
    S = np.arange(-n * 20000, n * 20000)
    r = (S * i) % (1 << p) - (1 << (p - 1))  # 0: S * i / 2^p exactly half-way
    S = S[(r >= -40) & (r <= 2)][:512]
    cells = np.floor_divide(S, n)[:, None] + np.zeros((1, n), np.int64)
    cells[:, 0] += S - cells.sum(1)
    q = (zx + cells).reshape(1, S.size, hw, hw)
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("GlobalAveragePool", ["xd"], ["g"]),
             helper.make_node("QuantizeLinear", ["g", "ys", "yz"], ["y"]),
             helper.make_node("DequantizeLinear", ["y", "ys", "yz"], ["yd"])]
    inits = [_init(sx, "xs", np.float32), _init(zx, "xz", np.uint16), _init(sy, "ys", np.float32),
             _init(zy, "yz", np.uint16)]
    m = _model(nodes, inits, [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(q.shape))],
               [helper.make_tensor_value_info("yd", TensorProto.FLOAT, None)])
    offset = 1 << (n.bit_length() - 1) if p >= 16 else 0  # the two roundings as one (htp_pool.py)
    apart = ((S * i + (1 << (p - 1))) >> p) != ((S * i + (1 << (p - 1)) + offset) >> p)
    return (m, {"x": ((q - zx) * sx).astype(F)}), int(apart.sum())


@pytest.mark.parametrize("arch", ["68", "73"])
def test_uint16_global_average_pool_near_ties(tmp_path, arch):
    jobs, apart = [], 0
    for hw in (2, 3, 7):
        rng = np.random.default_rng(zlib.crc32(repr(("gap16", hw)).encode()))
        for ratio in (0.4, 1.3, 2.0):  # A below 1/2: two roundings (hw = 2 with ratio 0.4: A = 0.625, one)
            job, d = _near_tie_job(rng, hw, ratio)
            jobs.append(job)
            apart += d
    assert apart >= 50  # one rounding would miss these codes: the check can fail
    assert _check_many(tmp_path, jobs, arch) > 0
