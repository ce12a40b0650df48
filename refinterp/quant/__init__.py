"""Integer numerics of quantized backends (bit-exact, NumPy int64).  See fixedpoint.py, requant.py."""
from .fixedpoint import (INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, quantize_multiplier,
                         quantize_multiplier_greater_than_one, quantize_multiplier_smaller_than_one_exp,
                         quantize_multipliers, rdbp, round_half_away, round_half_even, sat_left_shift,
                         srdhm, srdhm16, wrap_int32)
from .requant import (FLOAT_ROUNDINGS, INTEGER_ROUNDINGS, Rounding, mbqm64, mbqm_double, mbqm_single,
                      mbqm_upward, pot_shift, requantize, requantize_float)

__all__ = [
    "INT16_MAX", "INT16_MIN", "INT32_MAX", "INT32_MIN", "quantize_multiplier",
    "quantize_multiplier_greater_than_one", "quantize_multiplier_smaller_than_one_exp",
    "quantize_multipliers", "rdbp", "round_half_away", "round_half_even", "sat_left_shift", "srdhm",
    "srdhm16", "wrap_int32", "FLOAT_ROUNDINGS", "INTEGER_ROUNDINGS", "Rounding", "mbqm64",
    "mbqm_double", "mbqm_single", "mbqm_upward", "pot_shift", "requantize", "requantize_float",
]
