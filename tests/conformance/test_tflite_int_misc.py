"""TFLite integer SOFTMAX, QUANTIZE, DEQUANTIZE, RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR,
L2_NORMALIZATION, CONCATENATION, ARG_MAX, PAD / PADV2 vs LiteRT BUILTIN_REF and tflite-micro,
every tensor, 0 differing elements."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance._qcases import Case, Suite, assert_case, codes, rand, unary  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

BOTH = ("ref", "tflm")


def _with_const(op, x, qin, qout, out_shape, const, options=None, version=1, const_dtype="int32",
                extra=None, out_dtype=None):
    b = TFLiteBuilder()
    i = b.tensor("x", list(x.shape), str(x.dtype), *qin)
    ins = [i, b.const("c", np.asarray(const, const_dtype))]
    if extra is not None:
        ins.append(b.const("v", extra[0], scale=extra[1], zero_point=extra[2]))
    o = b.tensor("y", list(out_shape), out_dtype or str(x.dtype), *(qout or (None, None)))
    b.op(op, ins, [o], options=options, version=version)
    return b.build([i], [o]), {"x": x}


def _cases() -> list[Case]:
    cs: list[Case] = []
    rng = np.random.default_rng(7)

    def add(cid, built, op, backends=BOTH, tflm_gap=None):
        cs.append(Case(cid, built[0], built[1], op, backends, {"tflm": tflm_gap} if tflm_gap else {}))

    # SOFTMAX int8: rows with ties, saturated rows, wide rows; beta and input scale sweep
    x8 = np.concatenate([codes("int8").reshape(4, 64), rand(rng, (6, 64), "int8"),
                         np.full((1, 64), 127, np.int8), np.full((1, 64), -128, np.int8)])
    for k, (s, z, beta) in enumerate([(0.1, 0, 1.0), (0.02, -30, 1.0), (0.5, 10, 0.7), (1e-3, 0, 1.0),
                                      (0.25, -128, 2.0), (4.0, 3, 1.0), (40.0, 0, 2.0)]):
        add(f"softmax-int8-{k}", unary("SOFTMAX", "int8", (s, z), (1 / 256, -128), x8, {"beta": beta}), "Softmax")
    add("softmax-int8-depth1000", unary("SOFTMAX", "int8", (0.05, 0), (1 / 256, -128),
                                        rand(rng, (2, 1000), "int8")), "Softmax")
    add("softmax-int8-4d", unary("SOFTMAX", "int8", (0.08, -3), (1 / 256, -128), rand(rng, (1, 2, 3, 40), "int8")),
        "Softmax")
    add("softmax-uint8", unary("SOFTMAX", "uint8", (0.06, 128), (1 / 256, 0), codes("uint8").reshape(4, 64)),
        "Softmax", ("ref",))
    add("softmax-int8-to-int16", unary("SOFTMAX", "int8", (0.07, 5), (1 / 65536, -32768), x8, out_dtype="int16"),
        "Softmax")
    sweep16 = np.linspace(-32768, 32767, 256).round().astype(np.int16).reshape(4, 64)
    x16 = np.concatenate([sweep16, rand(rng, (4, 64), "int16")]).astype(np.int16)
    for k, s in enumerate([1e-3, 4e-4, 0.01]):
        add(f"softmax-int16-{k}", unary("SOFTMAX", "int16", (s, 0), (1 / 32768, 0), x16), "Softmax")
    # QUANTIZE float -> int: ties (exact .5 multiples), extremes, NaN-free large values
    s = 0.05
    f = np.concatenate([(np.arange(-300, 301) * (s / 2)), [0.0, -0.0, 1e30, -1e30, 3.4e38, 1e-30]]).astype(np.float32)
    f = np.concatenate([f, rng.normal(0, 4, 391).astype(np.float32)]).reshape(1, -1)
    for k, (sq, zq, dt) in enumerate([(0.05, 0, "int8"), (0.05, -7, "int8"), (0.013, 100, "uint8"),
                                      (1e-3, 0, "int16"), (0.05, 127, "int8")]):
        add(f"quantize-f32-{dt}-{k}", unary("QUANTIZE", dt, None, (sq, zq), f, in_dtype="float32"), "Quantize",
            tflm_gap="TFLM QUANTIZE has no float32 -> uint8 kernel (invoke fails)" if dt == "uint8" else None)
    # QUANTIZE int -> int (requantize)
    for k, (idt, qi, odt, qo) in enumerate([("int8", (0.05, 3), "int8", (0.07, -9)),
                                            ("int8", (0.05, 3), "int8", (0.0123, 0)),
                                            ("int8", (0.1, 0), "uint8", (0.1, 128)),
                                            ("uint8", (0.1, 128), "int8", (0.1, 0)),
                                            ("int8", (0.02, -4), "int16", (1e-4, 0)),
                                            ("int16", (1e-4, 0), "int8", (0.02, 5)),
                                            ("int16", (1e-4, 0), "int16", (3e-4, 0))]):
        x = codes(idt).reshape(1, -1)
        add(f"requantize-{idt}-{odt}-{k}", unary("QUANTIZE", odt, qi, qo, x, in_dtype=idt), "Quantize")
    # DEQUANTIZE
    for k, (dt, q) in enumerate([("int8", (0.05, 3)), ("uint8", (0.0123, 130)), ("int16", (3.1e-5, 0)),
                                 ("int8", (1e-7, -128))]):
        add(f"dequantize-{dt}-{k}", unary("DEQUANTIZE", "float32", q, None, codes(dt).reshape(1, -1),
                                          in_dtype=dt), "Dequantize")
    # RESIZE_BILINEAR / NEAREST, int8 and int16, all coordinate modes, up and down sampling
    img8 = rand(rng, (1, 5, 7, 3), "int8")
    img16 = rand(rng, (2, 4, 3, 2), "int16")
    for k, (size, ac, hp) in enumerate([((10, 14), False, False), ((10, 14), True, False),
                                        ((10, 14), False, True), ((3, 4), False, False), ((3, 4), True, False),
                                        ((3, 5), False, True), ((9, 1), False, True), ((1, 1), True, False)]):
        opts = {"align_corners": ac, "half_pixel_centers": hp}
        q = (0.05, -3)
        add(f"bilinear-int8-{k}", _with_const("RESIZE_BILINEAR", img8, q, q, (1, *size, 3), size, opts, 3),
            "Resize")
        add(f"nearest-int8-{k}", _with_const("RESIZE_NEAREST_NEIGHBOR", img8, q, q, (1, *size, 3), size, opts, 3),
            "Resize")
        q16 = (1e-3, 0)
        add(f"bilinear-int16-{k}", _with_const("RESIZE_BILINEAR", img16, q16, q16, (2, *size, 2), size, opts, 3),
            "Resize", tflm_gap="TFLM RESIZE_BILINEAR has no int16 kernel (invoke fails)")
        add(f"nearest-int16-{k}", _with_const("RESIZE_NEAREST_NEIGHBOR", img16, q16, q16, (2, *size, 2), size,
                                              opts, 3), "Resize")
    # L2_NORMALIZATION int8
    for k, (shape, z) in enumerate([((3, 16), 0), ((2, 5, 7), -20), ((4, 1), 3), ((1, 300), 100)]):
        x = rand(rng, shape, "int8")
        add(f"l2norm-int8-{k}", unary("L2_NORMALIZATION", "int8", (0.05, z), (1 / 128, 0), x), "L2Normalization")
    add("l2norm-int8-allzero", unary("L2_NORMALIZATION", "int8", (0.05, 7), (1 / 128, 0),
                                     np.full((2, 8), 7, np.int8)), "L2Normalization")
    # CONCATENATION (equal params), ARG_MAX, PAD / PADV2 (generic "int" kernels)
    b = TFLiteBuilder()
    q = (0.05, -3)
    ia = b.tensor("a", [1, 2, 3, 4], "int8", *q)
    ib = b.tensor("b", [1, 2, 5, 4], "int8", *q)
    o = b.tensor("y", [1, 2, 8, 4], "int8", *q)
    b.op("CONCATENATION", [ia, ib], [o], {"axis": 2}, version=1)
    add("concat-int8", (b.build([ia, ib], [o]), {"a": rand(rng, (1, 2, 3, 4), "int8"),
                                                 "b": rand(rng, (1, 2, 5, 4), "int8")}), "Concat")
    for k, axis in enumerate([1, 3, -1]):
        x = rand(rng, (2, 5, 3, 6), "int8")
        x[0, 1, 2, :] = 127  # ties: first index wins
        shp = [d for i, d in enumerate(x.shape) if i != axis % 4]
        add(f"argmax-int8-{k}", _with_const("ARG_MAX", x, q, None, shp, [axis], {"output_type": "int32"},
                                            out_dtype="int32"), "ArgMax")
    pads = [[0, 0], [1, 2], [0, 3], [0, 0]]
    xp = rand(rng, (1, 3, 4, 2), "int8")
    add("pad-int8", _with_const("PAD", xp, q, q, (1, 6, 7, 2), pads), "Pad")
    add("padv2-int8", _with_const("PADV2", xp, q, q, (1, 6, 7, 2), pads, extra=(np.array([11], np.int8), 0.05, -3)),
        "Pad")
    return cs


SUITE = Suite(_cases())


@pytest.mark.parametrize("case_id,backend", SUITE.params(), ids=[f"{c}[{b}]" for c, b in SUITE.params()])
def test_misc_matches_oracle(case_id, backend):
    assert_case(SUITE, case_id, backend, 2)
