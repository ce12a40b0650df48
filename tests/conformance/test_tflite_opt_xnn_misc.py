"""SOFTMAX, QUANTIZE (float -> int and requantize), DEQUANTIZE, RESIZE_BILINEAR /
RESIZE_NEAREST_NEIGHBOR, L2_NORMALIZATION, CONCATENATION, ARG_MAX, PAD / PADV2 under
tflite-optimized and tflite-xnnpack vs LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES and the default
resolver with XNNPACK: every tensor, 0 differing elements, and (xnnpack) the same delegation
decision as XNNPACK on every node.

Cases: the reference suite plus tensor sizes around the optimized kernels' 8-element blocks
(QUANTIZE / DEQUANTIZE tails), exact ties and out-of-range floats, XNNPACK's requantization limits
(scale ratio outside [2^-8, 2^7], int8 -> uint8), per-channel DEQUANTIZE, uint8 softmax / resize,
and nearest-neighbour sizes where the optimized 16.16 fixed-point index differs from the float one.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance import test_tflite_int_misc as ref  # noqa: E402
from tests.conformance._opt_xnn_qcases import BACKENDS, OptXnnSuite, assert_reference_differs, with_backends  # noqa: E402
from tests.conformance._qcases import Case, assert_case, codes, rand, unary  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402


def _extra_cases() -> list[Case]:
    rng = np.random.default_rng(17)
    cs = []

    def add(cid, built, op):
        cs.append(Case(cid, built[0], built[1], op, BACKENDS))

    # QUANTIZE float -> int: block / tail sizes, ties at +-0.5 steps, saturation
    for n in (7, 8, 17, 64):
        s = 0.02
        f = np.concatenate([(np.arange(-n, n) + 0.5) * s, rng.normal(0, 3, n)]).astype(np.float32).reshape(1, -1)
        for dt, zp in (("int8", -3), ("uint8", 128), ("int16", 0)):
            add(f"quantize-f32-{dt}-n{n}", unary("QUANTIZE", dt, None, (s if dt != "int16" else 1e-3, zp), f,
                                                   in_dtype="float32"), "Quantize")
    # requantize at XNNPACK's limits: ratio 200 / 1/300 refused, 100 and 1/200 accepted, int8 -> uint8 refused
    for k, (idt, qi, odt, qo) in enumerate([("int8", (0.2, 3), "int8", (0.001, -5)),
                                            ("int8", (0.001, 3), "int8", (0.3, 1)),
                                            ("int8", (0.1, -7), "int8", (0.001, 2)),
                                            ("int8", (0.001, 9), "int8", (0.2, -4)),
                                            ("uint8", (0.03, 130), "uint8", (0.05, 120)),
                                            ("int8", (0.05, 0), "uint8", (0.04, 128)),
                                            ("int8", (0.0625, 1), "int8", (0.125, -1))]):
        add(f"requantize-limit-{k}", unary("QUANTIZE", odt, qi, qo, codes(idt).reshape(1, -1), in_dtype=idt),
            "Quantize")
    # DEQUANTIZE: tails, non-zero int16 zero point, per-channel
    for n in (5, 13, 24):
        add(f"dequantize-int8-n{n}", unary("DEQUANTIZE", "float32", (0.0371, 11), None, rand(rng, (1, n), "int8"),
                                           in_dtype="int8"), "Dequantize")
    b = TFLiteBuilder()
    x = b.tensor("x", [2, 3, 5], "int8", scale=[0.01, 0.37, 1e-4], zero_point=[3, -7, 0], axis=1)
    y = b.tensor("y", [2, 3, 5], "float32")
    b.op("DEQUANTIZE", [x], [y], version=5)
    add("dequantize-int8-perchannel", (b.build([x], [y]), {"x": rand(rng, (2, 3, 5), "int8")}), "Dequantize")
    # SOFTMAX: random rows over a scale sweep, uint8 in/out, int8 -> int16
    xs = rand(rng, (16, 33), "int8")
    for k, s in enumerate([0.03, 0.11, 0.37, 1.7]):
        add(f"softmax-int8-rand-{k}", unary("SOFTMAX", "int8", (s, 5 - 3 * k), (1 / 256, -128), xs), "Softmax")
    # two random draws (seed 9, draws 24 and 31 of a search) where the float-LUT softmax and the
    # reference fixed-point softmax differ on one element each
    r9 = np.random.default_rng(9)
    for k in range(32):
        sk = float(np.exp(r9.uniform(np.log(0.002), np.log(8))))
        bk = float(r9.choice([1.0, 0.5, 2.0, 1.3]))
        xk = rand(r9, (256, int(r9.integers(2, 40))), "int8")
        if k in (24, 31):
            add(f"softmax-int8-neartie-{k}", unary("SOFTMAX", "int8", (sk, 0), (1 / 256, -128), xk, {"beta": bk}),
                "Softmax")
    add("softmax-uint8-rand", unary("SOFTMAX", "uint8", (0.09, 120), (1 / 256, 0), rand(rng, (8, 50), "uint8")),
        "Softmax")
    # RESIZE_NEAREST 16.16 vs float index (in 2 -> out 82 / 94), int8 and uint8; bilinear uint8
    for dt, q in (("int8", (0.05, -3)), ("uint8", (0.05, 128))):
        img = rand(rng, (1, 2, 2, 3), dt)
        add(f"nearest-{dt}-fixed1616", ref._with_const("RESIZE_NEAREST_NEIGHBOR", img, q, q, (1, 82, 94, 3),
                                                       [82, 94], {}, 3), "Resize")
        big = rand(rng, (1, 5, 4, 2), dt)
        for j, (ac, hp) in enumerate([(False, False), (True, False), (False, True)]):
            built = ref._with_const("RESIZE_BILINEAR", big, q, q, (1, 11, 3, 2), [11, 3],
                                    {"align_corners": ac, "half_pixel_centers": hp}, 3)
            # uint8 bilinear outside XNNPACK (optimized float-weight kernel) is not modelled
            cs.append(Case(f"bilinear-{dt}-small-{j}", built[0], built[1], "Resize",
                           BACKENDS if dt == "int8" else ("xnnpack",)))
    # data movement (byte copies in every variant; XNNPACK takes several of them)
    q = (0.05, -3)
    x = rand(rng, (1, 4, 6, 8), "int8")
    for name, consts, out_shape, opts in [
            ("TRANSPOSE", [[0, 2, 1, 3]], (1, 6, 4, 8), None),
            ("RESHAPE", [[1, 24, 8]], (1, 24, 8), {"new_shape": [1, 24, 8]}),
            ("DEPTH_TO_SPACE", [], (1, 8, 12, 2), {"block_size": 2}),
            ("SPACE_TO_DEPTH", [], (1, 2, 3, 32), {"block_size": 2}),
            ("SLICE", [[0, 1, 2, 0], [1, 2, 3, 5]], (1, 2, 3, 5), None),
            ("STRIDED_SLICE", [[0, 0, 1, 0], [1, 4, 6, 8], [1, 2, 2, 3]], (1, 2, 3, 3), None)]:
        b = TFLiteBuilder()
        xi = b.tensor("x", list(x.shape), "int8", *q)
        ins = [xi] + [b.const(f"c{j}", np.asarray(c, np.int32)) for j, c in enumerate(consts)]
        yo = b.tensor("y", list(out_shape), "int8", *q)
        b.op(name, ins, [yo], options=opts, version=1 if name in ("RESHAPE", "TRANSPOSE") else 2)
        add(f"{name.lower()}-int8", (b.build([xi], [yo]), {"x": x}), name.title().replace("_", ""))
    return cs


SUITE = OptXnnSuite(with_backends(ref._cases()) + _extra_cases())
PARAMS = SUITE.params()


@pytest.mark.parametrize("case_id,backend", PARAMS, ids=[f"{c}[{b}]" for c, b in PARAMS])
def test_misc_matches_oracle(case_id, backend):
    assert_case(SUITE, case_id, backend, 2)


def test_reference_scheme_differs_from_xnnpack():
    """XNNPACK's reciprocal QUANTIZE, 8-bit requantize and Q11 bilinear resize differ from the
    reference kernels on these cases."""
    assert_reference_differs(SUITE, "xnnpack", {"Quantize", "Resize"})


def test_reference_scheme_differs_from_optimized():
    """The optimized QUANTIZE / DEQUANTIZE blocks, float-LUT SOFTMAX and 16.16 nearest resize differ
    from the reference kernels on these cases."""
    assert_reference_differs(SUITE, "opt", {"Quantize", "Dequantize", "Softmax", "Resize"})
