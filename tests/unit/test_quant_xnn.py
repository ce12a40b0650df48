"""XNNPACK parameter derivations (refinterp/quant/xnn.py) and the optimized MUL broadcast
decomposition, on hand-checked values."""
from __future__ import annotations

import numpy as np

from refinterp.kernels.tflite.optimized.elementwise import _fivefold, _vector_mask
from refinterp.quant import xnn


def test_add_params_equal_scales():
    p = xnn.add_params(0.5, 3, 0.5, -2, 0.5)
    assert p["shift"] == 20 and p["a_multiplier"] == 1 << 20 and p["b_multiplier"] == 1 << 20
    assert p["bias"] == (1 << 19) - (1 << 20) * 3 + (1 << 20) * 2


def test_sub_negates_second_multiplier():
    p = xnn.add_params(0.25, 0, 0.5, 0, 1.0, sign_b=-1)
    assert p["shift"] == 21 and p["a_multiplier"] == 1 << 19 and p["b_multiplier"] == -(1 << 20)


def test_add_ratio_limits():
    assert xnn.add_refusal(1.0, 1.0, 1.0 / 256) is not None      # ratio 256: refused
    assert xnn.add_refusal(1.0, 1.0, 1.0 / 255.5) is None
    assert xnn.add_refusal(1.0 / 1025, 1.0, 1.0) is not None     # below 2^-10
    assert xnn.mul_refusal(0.5, 0.5, 0.25 / 256) is not None
    assert xnn.mul_refusal(1e-3, 1e-3, 0.1) is not None          # 1e-5 < 2^-16


def test_lrelu_limits_and_multipliers():
    assert xnn.lrelu_refusal(1.0, 1.0 / 129, 0.1) is not None   # positive scale > 128
    assert xnn.lrelu_refusal(1.0, 1.0, 0.003) is not None       # |negative scale| < 2^-8
    assert xnn.lrelu_refusal(1.0, 1.0, 0.0) is not None         # alpha 0
    assert xnn.lrelu_refusal(1.0, 1.0, -0.5) is None
    assert xnn.lrelu_multipliers(1.0, 1.0, -0.5) == (256, -128)
    # (zo*256 + 0x80 + v*m) >> 8: 0.5 ties round up
    assert xnn.eight_bit_shift(np.array([1, -1]), 128, 0, -128, 127).tolist() == [1, 0]


def test_activation_bounds_round_half_even():
    # 6 / 4 = 1.5 -> 2 (RNE), 0 -> zp
    assert xnn.activation_bounds("RELU6", 4.0, 0, "int8") == (0, 2)
    assert xnn.activation_bounds("RELU6", 4.0, -1, "int8") == (-1, 0)   # 0.5 -> 0 (RNE)


def test_fivefold_runs():
    assert _fivefold((2, 3), (2, 3)) == (0, True)                   # no broadcast: one elementwise run
    assert _fivefold((1, 16, 16, 1), (1, 1, 1, 256)) == (256, False)  # scalar x row: y3, scalar-broadcast loop
    assert _fivefold((2, 1, 5, 3), (1, 4, 1, 3)) is None            # generic broadcast
    assert _fivefold((4, 5, 3), (5, 3)) == (15, True)               # y4: the elementwise loop
    assert _vector_mask(40, 20, 16).tolist() == ([True] * 16 + [False] * 4) * 2
