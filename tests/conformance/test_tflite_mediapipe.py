"""MediaPipe's ``Convolution2DTransposeBias`` custom op (segmentation models) vs LiteRT with XNNPACK.

LiteRT's built-in resolvers refuse the op (an oracle finding, asserted below); the XNNPACK delegate runs
it.  refinterp reads its custom options (the raw ``TfLiteTransposeConvParams`` struct: padding 1 SAME /
2 VALID, strides) and runs it as a float transpose conv with bias under every scheme: equal to LiteRT +
XNNPACK within float tolerance.  A fused activation written as a fourth field of the options is ignored
by XNNPACK (measured: RELU / RELU6 codes change nothing), and so by refinterp.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from tests.conformance.litert_oracle import run_litert  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

# (in h, in w, in channels, out channels, kernel, stride, padding 1 SAME / 2 VALID, activation)
CASES = [(8, 8, 16, 8, 4, 2, 1, 0), (5, 7, 4, 3, 3, 2, 2, 0), (6, 6, 8, 8, 2, 2, 1, 1), (4, 4, 8, 4, 3, 1, 1, 3)]


def _model(ih, iw, cin, cout, k, s, pad, act, rng):
    b = TFLiteBuilder()
    oh, ow = (ih * s, iw * s) if pad == 1 else ((ih - 1) * s + k, (iw - 1) * s + k)
    x = b.tensor("x", (1, ih, iw, cin), "float32")
    w = b.const("w", rng.standard_normal((cout, k, k, cin)).astype(np.float32))
    bias = b.const("bias", rng.standard_normal(cout).astype(np.float32))
    y = b.tensor("y", (1, oh, ow, cout), "float32")
    b.op("CUSTOM:Convolution2DTransposeBias", [x, w, bias], [y], custom_options=struct.pack("<iiii", pad, s, s, act))
    return b.build([x], [y])


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}x{c[1]}x{c[2]}-k{c[4]}s{c[5]}-{'SAME' if c[6] == 1 else 'VALID'}"
                                             f"-act{c[7]}" for c in CASES])
def test_convolution2d_transpose_bias(case, tmp_path):
    rng = np.random.default_rng(sum(case))
    model = _model(*case, rng)
    x = rng.standard_normal((1, case[0], case[1], case[2])).astype(np.float32)
    want = run_litert(model, {"x": x}, "xnnpack")["y"]
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    g = refinterp.load(str(p))
    assert g.nodes[0].op == "ConvTranspose" and g.nodes[0].source_op == "CUSTOM:Convolution2DTransposeBias"
    for scheme in ("float32", "tflite-xnnpack", "tflite-reference", "tflite-optimized"):
        got = refinterp.Session(g, scheme).run({"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=2e-5, err_msg=scheme)


def test_litert_builtin_resolvers_refuse_it():
    model = _model(*CASES[0], np.random.default_rng(0))
    x = np.zeros((1, 8, 8, 16), np.float32)
    for resolver in ("ref", "opt"):
        with pytest.raises(RuntimeError, match="Convolution2DTransposeBias"):
            run_litert(model, {"x": x}, resolver)
