"""Legacy uint8 (asymmetric QUANTIZED_UINT8) TFLite kernels vs LiteRT REF / OPT / XNNPACK, every tensor.

RESIZE_BILINEAR uint8 runs in float32 in LiteRT (reference and optimized in different orders, with
the optimized x8 half-pixel fixed-point special case), not in the int8 fixed-point kernel.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance._int_cases import Case, run_cases  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

# (in h, in w, out h, out w, depth, align_corners, half_pixel_centers)
RESIZE = [(5, 7, 9, 13, 3, False, False), (5, 7, 10, 14, 8, False, False), (5, 7, 9, 13, 5, True, False),
          (5, 7, 9, 13, 16, False, True), (8, 8, 33, 33, 8, False, True), (6, 6, 3, 4, 4, False, False),
          (3, 4, 24, 32, 8, False, True),   # x8 half-pixel, depth % 8 == 0: the optimized 8.8 kernel
          (3, 4, 24, 32, 6, False, True),   # the same without depth % 8: the generic kernel
          (4, 4, 8, 8, 8, False, False), (1, 1, 5, 3, 2, False, True), (7, 5, 1, 1, 3, True, False)]


def resize_cases() -> list[Case]:
    rng = np.random.default_rng(21)
    cases = []
    for ih, iw, oh, ow, c, align, half in RESIZE:
        b = TFLiteBuilder()
        zp = int(rng.integers(0, 256))
        x = b.tensor("x", (1, ih, iw, c), "uint8", scale=0.05, zero_point=zp)
        size = b.const("size", np.array([oh, ow], np.int32))
        y = b.tensor("y", (1, oh, ow, c), "uint8", scale=0.05, zero_point=zp)
        b.op("RESIZE_BILINEAR", [x, size], [y], options=dict(align_corners=align, half_pixel_centers=half))
        xv = rng.integers(0, 256, (1, ih, iw, c)).astype(np.uint8)
        xv[0, 0, 0] = 255
        xv[0, -1, -1] = 0
        cases.append(Case(f"RESIZE_BILINEAR:u8,{ih}x{iw}->{oh}x{ow}x{c},align{int(align)},half{int(half)}",
                          "RESIZE_BILINEAR", b.build([x], [y]), {"x": xv}))
    return cases


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack"])
def test_uint8_resize_bilinear(backend):
    cases = resize_cases()
    out = run_cases(cases, backend)
    print("\n" + out.line(f"uint8 RESIZE_BILINEAR vs {backend}"))
    assert not out.aborted, " || ".join(out.aborted)
    assert out.differing == 0, " || ".join(out.failures[:5])
    assert out.tensors >= 2 * out.cases
