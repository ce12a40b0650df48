"""Pools and reductions under tflite-optimized / tflite-xnnpack vs LiteRT 2.3.0
BUILTIN_WITHOUT_DEFAULT_DELEGATES ("opt") and the default resolver with XNNPACK ("xnnpack",
experimental_preserve_all_tensors): 0 differing elements on every tensor, and (xnnpack) the same
delegation decision as XNNPACK on every MEAN / SUM node.

Sweeps: the reference-suite generators (pools: filters 1..4, strides 1..3, SAME/VALID, fused
activations, zero points incl. -128/127; MEAN/SUM/REDUCE_MAX: several axis sets, keep_dims, int8
and int16) plus the MEAN fast path of the optimized kernels (int8, 4-D, keep_dims, axes {1,2} in
either order) over channel counts 1/7/8/9/15/16/17/24/33 (16-channel blocks and tails), zero
points, equal and different scales, and a small-value sweep with many exact ties; int16 SUM (typed
float formula in the optimized kernel; XNNPACK refuses int16 and falls back).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance import test_tflite_int_pool_reduce as base  # noqa: E402
from tests.conformance._int_cases import Case, rand_q  # noqa: E402
from tests.conformance._opt_xnn_driver import OracleCache, check  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

FAST_CHANNELS = (1, 7, 8, 9, 15, 16, 17, 24, 33)


def mean_hw_cases(seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = []
    for i, c in enumerate(FAST_CHANNELS * 2):
        b = TFLiteBuilder()
        batch, h, w = int(rng.integers(1, 3)), int(rng.integers(1, 9)), int(rng.integers(1, 9))
        zx = int((-128, 127, 0, rng.integers(-128, 128))[i % 4])
        zo = int((0, -128, 127, rng.integers(-128, 128))[(i // 4) % 4])
        sx = float(np.float32(rng.uniform(0.005, 0.2)))
        so = float(np.float32(sx * (1.0, 0.37, 2.5, rng.uniform(0.2, 4.0))[i % 4]))
        axes = [1, 2] if i % 3 else [2, 1]
        x = b.tensor("x", (batch, h, w, c), "int8", scale=sx, zero_point=zx)
        ax = b.const("axes", np.array(axes, np.int32))
        y = b.tensor("y", (batch, 1, 1, c), "int8", scale=so, zero_point=zo)
        b.op("MEAN", [x, ax], [y], options=dict(keep_dims=True), version=2)
        xv = rand_q(rng, (batch, h, w, c), "int8", *((-3, 3) if i % 5 == 4 else (None, None)))
        cases.append(Case(f"MEAN_HW#{i}:{(batch, h, w, c)},axes{axes},zx{zx},zo{zo},so/sx{so / sx:.3g}", "MEAN",
                          b.build([x], [y]), {"x": xv}))
    for j, (c, (h, w)) in enumerate(zip((15, 16, 17, 24, 33), ((2, 2), (2, 4), (4, 4), (1, 2), (4, 2)))):
        b = TFLiteBuilder()  # equal scales and n = 2^k: exact ties of S / n (negative ones included)
        zx, zo = (0, 5, -7, 0, 3)[j], (0, -5, 7, 1, 0)[j]
        x = b.tensor("x", (1, h, w, c), "int8", scale=0.05, zero_point=zx)
        ax = b.const("axes", np.array([1, 2], np.int32))
        y = b.tensor("y", (1, 1, 1, c), "int8", scale=0.05, zero_point=zo)
        b.op("MEAN", [x, ax], [y], options=dict(keep_dims=True), version=2)
        cases.append(Case(f"MEAN_HW_TIE#{j}:{(1, h, w, c)},zx{zx},zo{zo}", "MEAN", b.build([x], [y]),
                          {"x": rand_q(rng, (1, h, w, c), "int8", -4, 4)}))
    return cases


GROUPS = {
    "AVERAGE_POOL_2D": lambda: base.pool_cases("AVERAGE_POOL_2D", 24, 21),
    "MAX_POOL_2D": lambda: base.pool_cases("MAX_POOL_2D", 16, 22),
    "MEAN": lambda: base.reduce_cases("MEAN", 24, 23),
    "MEAN_HW_FAST_PATH": lambda: mean_hw_cases(24),
    "SUM": lambda: base.reduce_cases("SUM", 16, 25, int16=False),
    "SUM_INT16": lambda: [c for c in base.reduce_cases("SUM", 16, 26) if "int16" in c.id],
    "REDUCE_MAX": lambda: base.reduce_cases("REDUCE_MAX", 12, 27, int16=False, same_params=True),
}
CACHE = OracleCache(GROUPS)


@pytest.mark.parametrize("backend", ["opt", "xnnpack"])
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_bit_exact(group, backend):
    check(CACHE, group, backend)


@pytest.mark.parametrize("group,backend,scheme", [
    ("MEAN_HW_FAST_PATH", "opt", "tflite-reference"),     # separately rounded bias, 16-blocks upward
    ("MEAN_HW_FAST_PATH", "xnnpack", "tflite-optimized"),  # XNNPACK float formula
    ("SUM", "opt", "tflite-reference"),                    # REF reads int8 as uint8 bytes
])
def test_other_schemes_differ(group, backend, scheme):
    """The oracles discriminate: the neighbouring scheme differs on the same cases."""
    out = CACHE.outcome(group, backend, scheme)
    print("\n" + out.line(f"{group} [{scheme}] vs {backend}"))
    assert out.differing > 0


@pytest.mark.parametrize("rounding", ["upward", "double"])
def test_mean_block_tail_matters(rounding, tmp_path):
    """The 16-channel-block hybrid is needed: one rounding on every channel differs from OPT."""
    f = tmp_path / "mean-one-rounding.yaml"
    f.write_text("name: mean-one-rounding\nextends: tflite-optimized\nops:\n  ReduceMean: {requant: "
                 f"{{rounding: {rounding}, block_rounding: {rounding}}}}}\n")
    out = CACHE.outcome("MEAN_HW_FAST_PATH", "opt", str(f))
    print("\n" + out.line(f"MEAN_HW_FAST_PATH [{rounding} on all channels] vs opt"))
    assert out.differing > 0
