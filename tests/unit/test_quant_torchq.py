"""refinterp/quant/torchq.py on hand-worked examples (the torch comparisons are in
tests/conformance/test_torch_quant_*.py)."""
from __future__ import annotations

import numpy as np

from refinterp.quant import torchq

F32 = np.float32


def test_quantize_multiplies_by_the_reciprocal():
    # FBGEMM's own example: x * f32(1/scale) = 127.5 -> 128, while x / scale = 127.49999 -> 127
    s, x = F32(0.00214854861), F32(0.273939937)
    assert int(torchq.quantize(x, s, 0, 0, 255)) == 128
    assert int(np.rint(x / s)) == 127


def test_quantize_adds_zero_point_before_rounding():
    # 0.5 + zp 3 = 3.5 -> 4 (RNE on the sum); rounding first would give 0 + 3 = 3
    assert int(torchq.quantize(F32(0.025), F32(0.05), 3, 0, 255)) == 4
    assert int(torchq.quantize(F32(0.025), F32(0.05), 2, 0, 255)) == 2
    assert list(torchq.quantize(F32([-100.0, 100.0]), F32(0.05), 3, 0, 255)) == [0, 255]


def test_rshift_half_away():
    assert list(torchq.rshift_half_away([5, -5, 6, -6, 7, -7], 1)) == [3, -3, 3, -3, 4, -4]


def test_qnnpack_add_fixed_point_ties_away():
    ma, mb, shift = torchq.qnnpack_add_params(F32(0.1), F32(0.1), F32(0.2))
    assert (ma, mb, shift) == (2 ** 21, 2 ** 21, 22)
    # 1*0.5 = 0.5 -> 1 and -0.5 -> -1 (ties away), where float RNE would give 0
    assert list(torchq.qnnpack_add(np.array([1, 0, 3]), np.array([0, -1, 0]), 0, 0, 0, (ma, mb, shift), -128, 127)) \
        == [1, -1, 2]


def test_qnnpack_avgpool_exact_multiplier_ties_away():
    mult, shift = torchq.qnnpack_avgpool_params(F32(1.0), F32(1.0), 4)  # scale 0.25 = 2^23 * 2^-25
    assert (mult, shift) == (2 ** 23, 25)
    assert list(torchq.qnnpack_avgpool(np.array([2, -2, 6, 5]), mult, shift, 10, 0, 255)) == [11, 9, 12, 11]


def test_fbgemm_float_bias_and_requant():
    aw = F32(0.5)
    b = torchq.fbgemm_bias(F32([1.25]), aw, per_channel=False)
    assert b[0] == F32(2.5)
    # f32(3 + 2.5) * 0.5 = 2.75 -> 3, + zp 1
    assert list(torchq.fbgemm_requant(np.array([3]), b, F32(0.5), 1, 0, 255)) == [4]
    # qnnpack rounds the bias once to int32: RNE(2.5) = 2 -> (3 + 2) * 0.5 = 2.5 -> 2
    bq = torchq.qnnpack_bias(F32([1.25]), aw)
    assert list(bq) == [2]
    assert list(torchq.qnnpack_requant(np.array([3]) + bq, F32(0.5), 1, 0, 255)) == [3]


def test_onednn_adds_zero_point_in_float():
    # f = 1 * 1.0 * 1.0 = 1; 1 * f32(1/2) = 0.5; + zp 1 = 1.5 -> 2 (fbgemm: RNE(0.5) + 1 = 1)
    assert list(torchq.onednn_requant(np.array([1]), F32(1.0), F32(1.0), None, F32(2.0), 1, 0, 255)) == [2]
    assert list(torchq.fbgemm_requant(np.array([1]), None, F32(0.5), 1, 0, 255)) == [1]


def test_reduce_range_halves_the_activation_range():
    s, z = torchq.activation_qparams(0.0, 12.7, reduce_range=True)
    assert s == F32(0.1) and z == 0
    s, z = torchq.activation_qparams(0.0, 25.5, reduce_range=False)
    assert s == F32(0.1) and z == 0
