"""Row-split parallelism (fast/parallel.py) never changes a bit: fast_conv split into 2 and 3 parts
equals the NumPy reference on every geometry (1x1 plain and strided, padded 3x3, dilation, batch,
a long-K chunked sum), and split_rows covers every row exactly once and propagates errors."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from refinterp.kernels.fast import parallel
from refinterp.kernels.fast.qconv_fast import fast_conv

from test_fast_kernels import SETTINGS, _numpy_qconv, _plan, _x

CASES = [  # (x shape, w shape (O, KH, KW, I), strides, dilations, padding)
    ((1, 9, 7, 16), (24, 1, 1, 16), (1, 1), (1, 1), "VALID"),
    ((2, 9, 7, 16), (24, 1, 1, 16), (2, 2), (1, 1), "VALID"),
    ((1, 11, 10, 3), (8, 3, 3, 3), (2, 2), (1, 1), "SAME_UPPER"),
    ((2, 11, 10, 5), (7, 3, 3, 5), (1, 1), (2, 2), "SAME_UPPER"),
    ((1, 6, 5, 160), (9, 3, 3, 160), (1, 1), (1, 1), "SAME_UPPER"),  # K = 1440: chunked float32 sums
]


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"x{c[0]}w{c[1]}s{c[2]}d{c[3]}{c[4]}")
def test_split_conv_equals_numpy(monkeypatch, k, case):
    xs, ws, strides, dil, pad = case
    x, w = _x(xs), _x(ws)
    attrs = {"layout": "NHWC", "weight_layout": "OHWI", "strides": list(strides), "dilations": list(dil),
             "auto_pad": pad, "group": 1}
    _, plan = _plan("Conv", x, w, None, attrs, SETTINGS["tflite_ref"], -3, 0, 5, True)
    seen = []
    real = parallel.split_rows

    def forced(n, work, fn):
        seen.append(n)
        monkeypatch.setattr(parallel, "parts", lambda n_, w_: min(k, n_))
        try:
            real(n, work, fn)
        finally:
            monkeypatch.undo()

    monkeypatch.setattr("refinterp.kernels.fast.qconv_fast.split_rows", forced)
    got = fast_conv(plan, x)
    assert seen, "fast_conv did not go through split_rows"
    assert got is not None and np.array_equal(got, _numpy_qconv(plan, x))


def test_split_rows_partition_and_errors(monkeypatch):
    monkeypatch.setattr(parallel, "parts", lambda n, w: 3)
    hits = np.zeros(10, np.int64)
    names = set()

    def fn(r0, r1):
        hits[r0:r1] += 1
        names.add(threading.current_thread().name)

    parallel.split_rows(10, 1 << 30, fn)
    assert np.all(hits == 1)
    assert any(n.startswith("refinterp") for n in names) and threading.current_thread().name in names

    def bad(r0, r1):
        if r0 > 0:
            raise ValueError("part failed")

    with pytest.raises(ValueError, match="part failed"):
        parallel.split_rows(10, 1 << 30, bad)


def test_blas_thread_count_restored():
    fns = parallel._blas_fns()
    if not fns:
        pytest.skip("NumPy is not linked to OpenBLAS here: split_rows runs unsplit")
    get, _ = fns
    before = int(get())
    with parallel.blas_single_thread():
        assert int(get()) == 1
    assert int(get()) == before


def test_import_configures_threads_and_wait_policy():
    import os
    import subprocess
    import sys

    code = ("import os, refinterp; print(os.environ['OPENBLAS_NUM_THREADS'], os.environ['OMP_WAIT_POLICY'], "
            "os.environ['OPENBLAS_THREAD_TIMEOUT'])")
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS",
                                                            "MKL_NUM_THREADS", "OMP_WAIT_POLICY",
                                                            "OPENBLAS_THREAD_TIMEOUT")}
    out = subprocess.run([sys.executable, "-c", code], env={**env, "REFINTERP_THREADS": "1"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["1", "PASSIVE", "4"]
    out = subprocess.run([sys.executable, "-c", code], env={**env, "REFINTERP_THREADS": "2", "OMP_WAIT_POLICY": "ACTIVE"},
                         capture_output=True, text=True, check=True).stdout.split()
    assert out == ["2", "ACTIVE", "4"]  # explicit settings win
