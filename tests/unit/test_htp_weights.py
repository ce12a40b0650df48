"""refinterp/quant/htp_weights.py and the bilinear Resize plan without the emulator: hand-worked values
(the emulator comparisons are in tests/conformance/test_qnn_htp_weights.py / test_qnn_htp_resize.py)."""
from __future__ import annotations

import numpy as np

from refinterp.quant import htp_weights


def test_channels_that_fit_int8_are_kept_and_the_others_rescaled_by_a_12_bit_factor():
    d = np.array([[100, -50], [128, 100], [200, 100], [-135, 3], [155, 3]])
    w, rh = htp_weights.requantize_channels(d)
    assert rh[0] == 1.0 and w[0].tolist() == [100, -50]
    assert rh[1] == 1.0078125 and w[1].tolist() == [127, 99]  # 128 / 127 -> 12 bits; 100 / rh = 99.22
    assert rh[2] == 3225 / 2048 and w[2].tolist() == [127, 64]  # 200 / 127 = 1.574803 -> 1.574707
    assert rh[3] == 135 / 128 and w[3].tolist() == [-128, 3]  # the negative side maps onto -128
    assert rh[4] == 2500 / 2048  # 155 / 127 = 1.2204724: rounded up (2499.53 / 2048)
    assert w.min() >= -128 and w.max() <= 127


def test_weights_use_a_16_bit_reciprocal():
    # -92 / rh (rh = 2129 / 2048) = -88.49977 would round to -88; the 16-bit reciprocal gives -89
    d = np.array([[-92, 132]])
    w, rh = htp_weights.requantize_channels(d)
    assert rh[0] == 2129 / 2048 and w[0].tolist() == [-89, 127]


def test_multipliers_and_the_v68_offset_fold_bias_and_zero_point_in_one_rounding():
    M = htp_weights.multipliers(np.float32(0.003), np.array([1.0, 1.0078125]))
    assert M[0] == float(np.float32(0.003)) and M[1] == float(np.float32(np.float32(0.003) * np.float32(1.0078125)))
    # b / rh = 19356.775 and -15320.310: rounded alone 19357 / -15320, with zp / M's fraction once
    rh = np.array([1.0078125, 1.0078125])
    z = htp_weights.folded_offset_v68(0, np.array([1.0, 1.0]), np.array([19508, -15440]), rh)
    assert z.tolist() == [19357, -15320]
    z = htp_weights.folded_offset_v68(153, np.array([0.00306, 0.00306]), np.array([19508, -15440]), rh)
    zf = float(np.float32(np.float32(153) / np.float32(0.00306)))
    assert z.tolist() == [int(np.floor(zf + 19508 / 1.0078125 + 0.5)), int(np.floor(zf - 15440 / 1.0078125 + 0.5))]


def test_bilinear_axis_weights_come_from_the_size_ratio():
    from refinterp.kernels.qnn_htp.resize import BilinearPlan, _axis, run

    i0, i1, num, den = _axis(2, 4)  # x = (o + 1/2) / 2 - 1/2, clamped: 0, 1/4, 3/4, 1
    assert i0.tolist() == [0, 0, 0, 1] and i1.tolist() == [1, 1, 1, 1] and (num / den).tolist() == [0, 0.25, 0.75, 0]
    i0, _, num, den = _axis(5, 7)  # the size ratio 5 / 7, not a scale of 1.5: o = 3 sits on input cell 2
    assert i0[3] == 2 and num[3] == 0
    same = BilinearPlan(_axis(1, 1), _axis(2, 4), True, 0.1, 0, 0.1, 0, 0, 255, "uint8")
    y = run(same, np.array([[[[0, 3]]]], np.uint8))  # 0, 0.75, 2.25, 3 rounded half up
    assert y.tolist() == [[[[0, 1, 2, 3]]]]
    y = run(same, np.array([[[[0, 2]]]], np.uint8))  # 0, 0.5, 1.5, 2: ties go up
    assert y.tolist() == [[[[0, 1, 2, 2]]]]
