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
    out.assert_exact(f"uint8 RESIZE_BILINEAR vs {backend}")
    assert out.tensors >= 2 * out.cases


def _u8_conv(rng, op: str, zw: int, act: str = "NONE", cin: int = 16, cout: int = 16, hw: int = 12,
             stride: int = 1) -> tuple[bytes, dict]:
    b = TFLiteBuilder()
    sx, sw = 0.02, 0.004
    x = b.tensor("x", (1, hw, hw, cin), "uint8", scale=sx, zero_point=int(rng.integers(0, 256)))
    wshape = {"CONV_2D": (cout, 3, 3, cin), "DEPTHWISE_CONV_2D": (1, 3, 3, cout),
              "FULLY_CONNECTED": (cout, hw * hw * cin)}[op]
    w = rng.integers(0, 256, wshape).astype(np.uint8)
    wt = b.const("w", w, scale=sw, zero_point=zw)
    k = int(np.prod(wshape[1:])) if op != "DEPTHWISE_CONV_2D" else 9
    bias = rng.integers(-3000, 3000, cout).astype(np.int32)
    bt = b.const("bias", bias, scale=float(np.float32(sx) * np.float32(sw)), zero_point=0)
    # an output scale that leaves ~200 codes of spread: many values near .5 ties
    so = float(sx * sw * 128 * 64 * np.sqrt(k) / 200)
    if op == "FULLY_CONNECTED":
        y = b.tensor("y", (1, cout), "uint8", scale=so, zero_point=int(rng.integers(60, 200)))
        b.op(op, [x, wt, bt], [y], options=dict(fused_activation=act))
    else:
        oh = -(-hw // stride)
        y = b.tensor("y", (1, oh, oh, cout), "uint8", scale=so, zero_point=int(rng.integers(60, 200)))
        opts = dict(padding="SAME", stride_w=stride, stride_h=stride, fused_activation=act)
        if op == "DEPTHWISE_CONV_2D":
            opts["depth_multiplier"] = 1
        b.op(op, [x, wt, bt], [y], options=opts)
    return b.build([x], [y]), {"x": rng.integers(0, 256, (1, hw, hw, cin)).astype(np.uint8)}


def conv_cases() -> list[Case]:
    """Filter zero points over the whole uint8 range (XNNPACK's QU8 operators take every one of them;
    refinterp once refused zero points >= 128 and fell back to the built-in arithmetic)."""
    rng = np.random.default_rng(22)
    cases = []
    for op in ("CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED"):
        for i, zw in enumerate((0, 1, 100, 127, 128, 200, 255)):
            act = ("NONE", "RELU", "RELU6", "NONE")[i % 4]
            model, feeds = _u8_conv(rng, op, zw, act, stride=1 + i % 2)
            cases.append(Case(f"{op}:u8,zw{zw},{act}", op, model, feeds))
    return cases


def mobilenet_like() -> Case:
    """CONV 3x3/2 -> DEPTHWISE 3x3 -> CONV 1x1 (ReLU6) -> ADD (residual) -> AVERAGE_POOL -> RESHAPE ->
    FULLY_CONNECTED -> SOFTMAX, all uint8 with filter zero points above 127 (as legacy converters wrote)."""
    rng = np.random.default_rng(23)
    b = TFLiteBuilder()

    def act(name, shape, s):
        return b.tensor(name, shape, "uint8", scale=s, zero_point=int(rng.integers(90, 160)))

    def w(name, shape, sw, zw):
        return b.const(name, rng.integers(0, 256, shape).astype(np.uint8), scale=sw, zero_point=zw)

    def bias(name, n, s):
        return b.const(name, rng.integers(-2000, 2000, n).astype(np.int32), scale=s, zero_point=0)

    x = b.tensor("x", (1, 16, 16, 3), "uint8", scale=1 / 128, zero_point=128)
    c1 = act("c1", (1, 8, 8, 16), 0.05)
    b.op("CONV_2D", [x, w("w1", (16, 3, 3, 3), 0.01, 141), bias("b1", 16, float(np.float32(1 / 128) * np.float32(0.01)))],
         [c1], options=dict(padding="SAME", stride_w=2, stride_h=2, fused_activation="RELU6"))
    d1 = act("d1", (1, 8, 8, 16), 0.05)
    b.op("DEPTHWISE_CONV_2D", [c1, w("w2", (1, 3, 3, 16), 0.02, 133), bias("b2", 16, float(np.float32(0.05) * np.float32(0.02)))],
         [d1], options=dict(padding="SAME", stride_w=1, stride_h=1, fused_activation="RELU6", depth_multiplier=1))
    p1 = act("p1", (1, 8, 8, 16), 0.08)
    b.op("CONV_2D", [d1, w("w3", (16, 1, 1, 16), 0.01, 121), bias("b3", 16, float(np.float32(0.05) * np.float32(0.01)))],
         [p1], options=dict(padding="VALID", stride_w=1, stride_h=1, fused_activation="NONE"))
    r1 = act("r1", (1, 8, 8, 16), 0.1)
    b.op("ADD", [p1, c1], [r1], options=dict(fused_activation="NONE"))
    ap = act("ap", (1, 1, 1, 16), 0.1)
    b.op("AVERAGE_POOL_2D", [r1], [ap], options=dict(padding="VALID", stride_w=8, stride_h=8, filter_width=8,
                                                      filter_height=8, fused_activation="NONE"))
    rs = act("rs", (1, 16), 0.1)
    b.op("RESHAPE", [ap, b.const("shape", np.array([1, 16], np.int32))], [rs], options=dict(new_shape=[1, 16]))
    fc = act("fc", (1, 10), 0.2)
    b.op("FULLY_CONNECTED", [rs, w("w4", (10, 16), 0.02, 140), bias("b4", 10, float(np.float32(0.1) * np.float32(0.02)))],
         [fc], options=dict(fused_activation="NONE"))
    sm = b.tensor("sm", (1, 10), "uint8", scale=1 / 256, zero_point=0)
    b.op("SOFTMAX", [fc], [sm], options=dict(beta=1.0))
    return Case("mobilenet-like-u8", "model", b.build([x], [sm]),
                {"x": rng.integers(0, 256, (1, 16, 16, 3)).astype(np.uint8)})


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack"])
def test_uint8_conv_family_every_filter_zero_point(backend):
    out = run_cases(conv_cases(), backend)
    out.assert_exact(f"uint8 conv family vs {backend}")


def test_uint8_xnnpack_takes_filters_with_high_zero_points(tmp_path):
    """The decision itself: XNNPACK runs a uint8 conv whose filter zero point is >= 128."""
    import refinterp

    model, _ = _u8_conv(np.random.default_rng(0), "CONV_2D", 200)
    p = tmp_path / "c.tflite"
    p.write_bytes(model)
    step = refinterp.Session(refinterp.load(str(p)), "tflite-xnnpack").steps[0]
    assert step.plan.executed_by == "xnnpack"


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack"])
def test_uint8_model_every_tensor(backend):
    out = run_cases([mobilenet_like()], backend)
    out.assert_exact(f"uint8 MobileNet-like model vs {backend}")
    assert out.tensors >= 9


def eltwise_cases() -> list[Case]:
    """ADD / SUB / MUL uint8 with scales whose multipliers are exact binary fractions (where roundings
    tie and kernels that round differently part), sizes with and without a tail after 8 / 16 lanes."""
    rng = np.random.default_rng(24)
    cases = []
    scales = [(0.08, 0.05, 0.1), (0.05, 0.08, 0.1), (0.25, 0.5, 0.5), (0.02, 0.01, 0.04), (0.037, 0.021, 0.05)]
    for op in ("ADD", "SUB", "MUL"):
        for i, (s1, s2, so) in enumerate(scales):
            for n in (1000, 24, 7):
                b = TFLiteBuilder()
                z1, z2, zo = (int(v) for v in rng.integers(0, 256, 3))
                so_op = so * 40 if op == "MUL" else so
                a = b.tensor("a", (1, n), "uint8", scale=s1, zero_point=z1)
                c = b.tensor("c", (1, n), "uint8", scale=s2, zero_point=z2)
                y = b.tensor("y", (1, n), "uint8", scale=so_op, zero_point=zo)
                act = ("NONE", "RELU6", "NONE")[i % 3]
                b.op(op, [a, c], [y], options=dict(fused_activation=act))
                feeds = {"a": rng.integers(0, 256, (1, n)).astype(np.uint8),
                         "c": rng.integers(0, 256, (1, n)).astype(np.uint8)}
                cases.append(Case(f"{op}:u8,{s1}/{s2}->{so_op:g},n{n},{act}", op, b.build([a, c], [y]), feeds))
    return cases


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack"])
def test_uint8_elementwise_near_ties(backend):
    out = run_cases(eltwise_cases(), backend)
    out.assert_exact(f"uint8 ADD/SUB/MUL vs {backend}")
