"""Each Numba fixed-point primitive (refinterp/quant/fixedpoint_nb.py) equals its NumPy form
(refinterp/quant/fixedpoint.py, requant.py) element for element, on the edge values where the
rounding rules differ: INT32_MIN / INT32_MAX, exact ties, shifts 0 and 31, multipliers 0, 1,
2^30 and 2^31 - 1, plus a random sweep."""
from __future__ import annotations

import itertools

import numba
import numpy as np
import pytest

from refinterp.quant import fixedpoint as fp
from refinterp.quant import fixedpoint_nb as nb
from refinterp.quant import requant as rq

I32_MIN, I32_MAX = -(1 << 31), (1 << 31) - 1
EDGE_A = [I32_MIN, I32_MIN + 1, -(1 << 30), -3, -2, -1, 0, 1, 2, 3, 1 << 30, I32_MAX - 1, I32_MAX]
EDGE_M = [0, 1, 1 << 30, (1 << 30) + 1, I32_MAX - 1, I32_MAX]
RNG = np.random.default_rng(7)
RAND_A = RNG.integers(I32_MIN, I32_MAX, 4000, endpoint=True)
RAND_M = RNG.integers(0, I32_MAX, 4000, endpoint=True)


def _loop(arity: int):
    """A Numba loop calling a scalar function on ``arity`` aligned columns (inside Numba, as a
    kernel calls it)."""
    args = ", ".join(f"c{i}[i]" for i in range(arity))
    cols = ", ".join(f"c{i}" for i in range(arity))
    src = f"def loop(fn, {cols}, out):\n    for i in range(out.size):\n        out[i] = fn({args})\n"
    ns: dict = {}
    exec(src, ns)  # noqa: S102 - a fixed template, arity only
    return numba.njit(cache=False)(ns["loop"])


_LOOPS = {n: _loop(n) for n in range(1, 6)}


def _map(fn, *cols):
    cols = [np.asarray(c, np.int64) for c in cols]
    out = np.empty(cols[0].size, np.int64)
    _LOOPS[len(cols)](fn, *cols, out)
    return out


def _pairs(xs, ys):
    a, b = zip(*itertools.product(xs, ys))
    return np.array(a, np.int64), np.array(b, np.int64)


def test_wrap32():
    v = np.array([I32_MIN - 1, I32_MIN, -1, 0, I32_MAX, I32_MAX + 1, (1 << 40) + 5, -(1 << 40) - 5], np.int64)
    assert np.array_equal(_map(nb.wrap32, v), fp.wrap_int32(v))


def test_srdhm_general_and_positive():
    a, b = _pairs(EDGE_A, EDGE_A)  # includes INT32_MIN * INT32_MIN (saturates) and negative b
    assert np.array_equal(_map(nb.srdhm, a, b), fp.srdhm(a, b))
    a, m = _pairs(EDGE_A, EDGE_M)
    assert np.array_equal(_map(nb.srdhm_pos, a, m), fp.srdhm(a, m))
    assert np.array_equal(_map(nb.srdhm, RAND_A, RAND_M), fp.srdhm(RAND_A, RAND_M))
    assert np.array_equal(_map(nb.srdhm_pos, RAND_A, RAND_M), fp.srdhm(RAND_A, RAND_M))


def test_rdbp_ties_and_shifts():
    shifts = [0, 1, 2, 5, 30, 31]
    ties = [(k << s) + (1 << s >> 1) * sign for s in shifts for k in (-3, 0, 3) for sign in (-1, 1)]
    q, e = _pairs(EDGE_A + ties, shifts)
    assert np.array_equal(_map(nb.rdbp, q, e), fp.rdbp(q, e))


def test_vqrdmulh():
    a, m = _pairs(EDGE_A, EDGE_M)
    assert np.array_equal(_map(nb.vqrdmulh, a, m), fp.vqrdmulh(a, m))
    assert np.array_equal(_map(nb.vqrdmulh_rdbp, a, m, np.full(a.size, 3)), fp.rdbp(fp.vqrdmulh(a, m), 3))


@pytest.mark.parametrize("shift", [-31, -30, -5, -1, 0, 1, 5, 30])
def test_mbqm_forms_equal_requant(shift):
    """The double / upward / single forms (and the one-shift ``mbqm_pot``) against
    requant.mbqm_double / mbqm_upward / mbqm_single."""
    a, m = _pairs(EDGE_A, EDGE_M)
    a = np.concatenate([a, RAND_A])
    m = np.concatenate([m, RAND_M])
    if shift > 0:  # the left shift wraps: keep to int32 inputs the kernels pass (already wrapped)
        a = fp.wrap_int32(a)
    left, right = max(shift, 0), max(-shift, 0)
    L, Rt = np.full(a.size, left), np.full(a.size, right)
    assert np.array_equal(_map(nb.mbqm_double, a, m, L, Rt), rq.mbqm_double(a, m, shift))
    assert np.array_equal(_map(nb.mbqm_upward, a, m, L, Rt), rq.mbqm_upward(a, m, shift))
    if shift <= 30:
        total = np.full(a.size, 31 - shift)
        assert np.array_equal(_map(nb.mbqm_single, a, m, total), rq.mbqm_single(a, m, shift))
    for upward, ref in ((False, rq.mbqm_double), (True, rq.mbqm_upward)):
        cp, cn, tot = nb.pot_consts(np.full(a.size, 0), np.full(a.size, shift), np.full(a.size, upward))
        pre = fp.wrap_int32(a << left)
        got = _map(nb.mbqm_pot, pre, m, cp, cn, tot)
        assert np.array_equal(got, ref(a, m, shift)), (shift, upward)


def test_forms_constants():
    from refinterp.quant.requant import Rounding

    assert nb.forms(1 << 30, -3, Rounding.DOUBLE) == (0, 1 << 30, 0, 3)
    assert nb.forms(1 << 30, 2, "upward") == (1, 1 << 30, 2, 0)
    assert nb.forms(1 << 30, -3, "single") == (2, 1 << 30, 34, 0)
    assert nb.forms(1 << 31, 0, "double") is None  # M out of range: the caller keeps NumPy
    assert nb.forms(1 << 30, 0, "float32_half_even") is None
