"""Quantized SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND (the TF 1.x dilated-convolution pattern) against
LiteRT BUILTIN_REF, the optimized kernels, XNNPACK and TFLite Micro: every tensor, 0 differing
elements.  LiteRT pads with the output zero point (real 0), TFLite Micro with code 0 (scheme
tflite-micro ``impl: zero_code``): the cases use zero points far from 0 and non-zero paddings, so
each scheme's padding is told apart from the other's.  A whole int8 dilated conv (SPACE_TO_BATCH_ND -> CONV_2D ->
BATCH_TO_SPACE_ND) checks the pattern end to end."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance._int_cases import Case, rand_q, run_cases  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

I32 = np.int32
PARAMS = {"int8": (0.05, -100), "uint8": (0.04, 200), "int16": (0.001, 0)}


def _s2b(dtype: str, shape, block, pads, out_shape) -> Case:
    s, z = PARAMS[dtype]
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, s, z)
    y = b.tensor("y", out_shape, dtype, s, z)
    b.op("SPACE_TO_BATCH_ND", [x, b.const("block", np.array(block, I32)), b.const("pads", np.array(pads, I32))], [y])
    feeds = {"x": rand_q(np.random.default_rng(len(shape)), shape, dtype)}
    return Case(f"S2B:{dtype}:{'x'.join(map(str, shape))}", "SPACE_TO_BATCH_ND", b.build([x], [y]), feeds)


def _b2s(dtype: str, shape, block, crops, out_shape) -> Case:
    s, z = PARAMS[dtype]
    b = TFLiteBuilder()
    x = b.tensor("x", shape, dtype, s, z)
    y = b.tensor("y", out_shape, dtype, s, z)
    b.op("BATCH_TO_SPACE_ND", [x, b.const("block", np.array(block, I32)), b.const("crops", np.array(crops, I32))],
         [y])
    feeds = {"x": rand_q(np.random.default_rng(len(shape) + 7), shape, dtype)}
    return Case(f"B2S:{dtype}:{'x'.join(map(str, shape))}", "BATCH_TO_SPACE_ND", b.build([x], [y]), feeds)


def _dilated_conv() -> Case:
    """int8 3x3 conv, dilation 2, SAME, as TF 1.x emitted it; per-channel weights."""
    rng = np.random.default_rng(3)
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 8, 8, 3), "int8", 0.05, -20)
    s2b = b.tensor("s2b", (4, 6, 6, 3), "int8", 0.05, -20)
    b.op("SPACE_TO_BATCH_ND", [x, b.const("block", np.array([2, 2], I32)), b.const("pads", np.full((2, 2), 2, I32))],
         [s2b])
    w_scales = rng.uniform(0.002, 0.01, 5).astype(np.float32)
    w = b.const("w", rng.integers(-127, 128, (5, 3, 3, 3)).astype(np.int8), "int8", w_scales, np.zeros(5, np.int64),
                axis=0)
    bias = b.const("bias", rng.integers(-3000, 3000, 5).astype(np.int32), "int32",
                   (np.float32(0.05) * w_scales).astype(np.float32), np.zeros(5, np.int64), axis=0)
    c = b.tensor("conv", (4, 4, 4, 5), "int8", 0.08, 5)
    b.op("CONV_2D", [s2b, w, bias], [c], {"padding": "VALID", "fused_activation": "RELU"})
    y = b.tensor("y", (1, 8, 8, 5), "int8", 0.08, 5)
    b.op("BATCH_TO_SPACE_ND", [c, b.const("block2", np.array([2, 2], I32)), b.const("crops", np.zeros((2, 2), I32))],
         [y])
    return Case("dilated-conv:int8", "SPACE_TO_BATCH_ND", b.build([x], [y]),
                {"x": rand_q(rng, (1, 8, 8, 3), "int8")})


def cases(backend: str) -> list[Case]:
    out = []
    # TFLM has no uint8 kernels for these (refused by the tflite-micro scheme, test below); XNNPACK
    # does not take them and LiteRT's built-in int16 kernels are checked under ref / opt
    dtypes = {"tflm": ("int8",), "xnnpack": ("int8", "uint8")}.get(backend, ("int8", "uint8", "int16"))
    for dt in dtypes:
        out.append(_s2b(dt, (2, 5, 6, 3), [2, 3], [[1, 0], [0, 0]], (12, 3, 2, 3)))
        out.append(_s2b(dt, (1, 4, 4, 2), [2, 2], [[1, 1], [2, 0]], (4, 3, 3, 2)))
        out.append(_s2b(dt, (2, 5, 3), [2], [[0, 1]], (4, 3, 3)))
        out.append(_b2s(dt, (8, 3, 2, 3), [2, 2], [[1, 0], [0, 1]], (2, 5, 3, 3)))
        out.append(_b2s(dt, (4, 3, 3), [2], [[1, 2]], (2, 3, 3)))
    out.append(_dilated_conv())
    return out


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack", "tflm"])
def test_space_batch_matches_oracle(backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    cs = cases(backend)
    out = run_cases(cs, backend)
    out.assert_exact(f"SPACE_TO_BATCH_ND / BATCH_TO_SPACE_ND vs {backend}")
    assert out.tensors >= 2 * out.cases


def test_tflm_padding_differs_from_litert_and_uint8_is_refused():
    """The two paddings are different numbers on these cases (a sweep that cannot tell them apart
    would pass either scheme), and tflite-micro refuses the uint8 nodes TFLM cannot run."""
    import tempfile
    from pathlib import Path

    import refinterp
    from refinterp.errors import UnsupportedOpError

    c = _s2b("int8", (1, 4, 4, 2), [2, 2], [[1, 1], [2, 0]], (4, 3, 3, 2))
    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "m.tflite"
        p.write_bytes(c.model)
        g = refinterp.load(str(p))
        ref = refinterp.Session(g, "tflite-reference").run(c.feeds)["y"]
        tflm = refinterp.Session(g, "tflite-micro").run(c.feeds)["y"]
        assert (ref == -100).sum() > 0 and (tflm == 0).sum() > 0 and not np.array_equal(ref, tflm)
        u = _b2s("uint8", (4, 3, 3), [2], [[1, 2]], (2, 3, 3))
        p.write_bytes(u.model)
        with pytest.raises(UnsupportedOpError, match="no uint8 BATCH_TO_SPACE_ND"):
            refinterp.Session(refinterp.load(str(p)), "tflite-micro")
