"""Per-tensor metrics: values checked against hand computations, non-finite handling, policy."""
import math

import numpy as np
import pytest

from refinterp.compare import metrics as M
from refinterp.compare.policy import Policy, parse_overrides
from refinterp.errors import InputError


def test_values_by_hand():
    ref = [np.array([0.0, 1.0, 2.0, 3.0])]
    dev = [np.array([0.0, 1.0, 2.0, 5.0])]
    m = M.compute(ref, dev, lsb=[np.array([0, 0, 0, 2.0])])
    assert m.num_elements == 4 and m.exact_fraction == 0.75
    assert m.max_abs_error == 2.0 and m.mean_error == 0.5 and m.mean_squared_error == 1.0 and m.rmse == 1.0
    assert m.range == 5.0 and m.nrmse == pytest.approx(0.2)
    assert m.cosine == pytest.approx(20 / (math.sqrt(14) * math.sqrt(30)))
    assert m.sqnr_db == pytest.approx(10 * math.log10(14 / 4))
    assert m.max_abs_lsb == 2 and m.needed_atol == 2.0 and m.needed_atol_lsb == 2.0
    assert m.lsb_histogram["0"] == 3 and m.lsb_histogram["2"] == 1 and sum(m.lsb_histogram.values()) == 4


def test_samples_are_concatenated():
    m = M.compute([np.zeros(2), np.ones(2)], [np.zeros(2), np.array([1.0, 4.0])])
    assert m.num_elements == 4 and m.exact_fraction == 0.75 and m.max_abs_error == 3.0


def test_nonfinite_counted_never_raises():
    ref = [np.array([np.nan, np.inf, 1.0, 2.0, np.nan])]
    dev = [np.array([np.nan, np.inf, np.inf, 2.0, 0.0])]
    m = M.compute(ref, dev)
    assert (m.nan_ref, m.nan_dev, m.inf_ref, m.inf_dev) == (2, 1, 1, 2)
    assert m.nonfinite_mismatch == 2 and m.needed_atol == math.inf
    assert m.exact_fraction == pytest.approx(3 / 5)
    assert not M.within(m, 1e9, 1e9, ref, dev)
    d = m.to_json()
    assert d["needed_atol"] == "inf"


def test_identical_and_constant_and_empty():
    m = M.compute([np.full(3, 2.0)], [np.full(3, 2.0)])
    assert m.exact_fraction == 1 and m.nrmse == 0 and m.sqnr_db is None
    z = M.compute([np.zeros(0)], [np.zeros(0)])
    assert z.num_elements == 0 and z.exact_fraction == 1.0


def test_polygraphy_elementwise_rule():
    ref, dev = [np.array([100.0, 0.0])], [np.array([100.5, 0.0])]
    m = M.compute(ref, dev)
    assert M.within(m, 0.1, 0.01, ref, dev)  # fails atol but passes rtol (0.5 / 100 = 0.005)
    assert not M.within(m, 0.1, 0.001, ref, dev)


def test_policy_overrides():
    assert parse_overrides(["1", "a:b:3"], "x") == (1.0, {"a:b": 3.0})
    p = Policy.from_args(["2", "conv:0"], ["1e-3"], None)
    assert p.lsb_for("conv") == 0 and p.lsb_for("other") == 2 and p.float_for("t") == (1e-3, 1e-4)
    with pytest.raises(InputError):
        Policy.from_args(["x:abc"])
    with pytest.raises(InputError):
        Policy.from_args(["-1"])
