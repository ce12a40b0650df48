"""TFLite integer activations vs LiteRT BUILTIN_REF and tflite-micro, every tensor, 0 differences.

8-bit ops are fed all 256 input codes; int16 ops a 4k-value sweep incl. both extremes.
Scales sweep tiny / typical / large values and zero points sweep the range.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance._qcases import Case, Suite, assert_case, codes, unary  # noqa: E402

IN_Q8 = [(0.05, 0), (0.1, -128), (0.0123, 17), (0.5, 127), (1e-3, -5), (0.031, -90)]


def _cases() -> list[Case]:
    cs: list[Case] = []

    def add(cid, built, op, backends=("ref",), tflm_gap=None):
        cs.append(Case(cid, built[0], built[1], op, backends, {"tflm": tflm_gap} if tflm_gap else {}))

    x8 = codes("int8").reshape(2, 128)
    xu8 = codes("uint8").reshape(2, 128)
    x16 = codes("int16").reshape(1, -1)
    for k, (s, z) in enumerate(IN_Q8):
        add(f"logistic-int8-{k}", unary("LOGISTIC", "int8", (s, z), (1 / 256, -128), x8), "Sigmoid", ("ref", "tflm"))
        add(f"tanh-int8-{k}", unary("TANH", "int8", (s, z), (1 / 128, 0), x8), "Tanh", ("ref", "tflm"))
        add(f"hardswish-int8-{k}", unary("HARD_SWISH", "int8", (s, z), (s * 0.8, (z // 2)), x8), "HardSwish",
            ("ref", "tflm"))
        add(f"relu-int8-{k}", unary("RELU", "int8", (s, z), (s * 0.7, -100 + 20 * k), x8), "Relu", ("ref", "tflm"))
        add(f"relu6-int8-{k}", unary("RELU6", "int8", (s, z), (6 / 255 * (1 + k), -128), x8), "Relu6",
            ("ref", "tflm"))
        add(f"relun1to1-int8-{k}", unary("RELU_N1_TO_1", "int8", (s, z), (1 / 127, 3 * k), x8), "ReluN1To1",
            ("ref", "tflm"),
            tflm_gap="tflite_micro has no RELU_N1_TO_1 kernel (allocate_tensors fails)")
        add(f"leakyrelu-int8-{k}", unary("LEAKY_RELU", "int8", (s, z), (s * 1.3, z // 3), x8,
                                         options={"alpha": [0.1, 0.2, 0.01, 0.3, 0.125, 0.7][k]}), "LeakyRelu",
            ("ref", "tflm"))
        add(f"gelu-int8-{k}", unary("GELU", "int8", (s, z), (s * 0.9, -60), x8, options={"approximate": k % 2 == 1}),
            "Gelu", ("ref", "tflm"), tflm_gap="tflite_micro rejects int8 GELU (allocate_tensors fails)")
        add(f"rsqrt-int8-{k}", unary("RSQRT", "int8", (s, -128), (0.05 * (k + 1), -128 + 10 * k),
                                     np.arange(-127, 128, dtype=np.int8).reshape(1, -1)), "Rsqrt", ("ref", "tflm"))
    # uint8 LUT / HardSwish paths
    add("logistic-uint8", unary("LOGISTIC", "uint8", (0.07, 130), (1 / 256, 0), xu8), "Sigmoid")
    add("hardswish-uint8", unary("HARD_SWISH", "uint8", (0.03, 100), (0.02, 30), xu8), "HardSwish")
    # saturating / extreme scales
    add("logistic-int8-tinyscale", unary("LOGISTIC", "int8", (1e-5, 3), (1 / 256, -128), x8), "Sigmoid",
        ("ref", "tflm"))
    add("tanh-int8-hugescale", unary("TANH", "int8", (2.5, -7), (1 / 128, 0), x8), "Tanh", ("ref", "tflm"))
    add("relu-int8-upscale", unary("RELU", "int8", (0.2, 5), (0.01, -128), x8), "Relu")
    add("leakyrelu-int8-negalpha", unary("LEAKY_RELU", "int8", (0.05, 0), (0.05, 0), x8,
                                         options={"alpha": -0.5}), "LeakyRelu")
    # int16 LOGISTIC / TANH: power-of-two input scales (multiplier 3 << shift) and general scales
    for k, s in enumerate([2.0 ** -12, 2.0 ** -11, 3e-4, 1e-3, 2.5e-5, 0.01]):
        add(f"logistic-int16-{k}", unary("LOGISTIC", "int16", (s, 0), (1 / 32768, 0), x16), "Sigmoid",
            ("ref", "tflm"))
        add(f"tanh-int16-{k}", unary("TANH", "int16", (s, 0), (1 / 32768, 0), x16), "Tanh", ("ref", "tflm"))
    # int16
    for k, s in enumerate([1 / 2048, 3e-4, 0.01]):
        add(f"relu-int16-{k}", unary("RELU", "int16", (s, 0), (s * 0.6, 0), x16), "Relu", ("ref", "tflm"))
        add(f"relu6-int16-{k}", unary("RELU6", "int16", (s, 0), (6 / 32767, 0), x16), "Relu6", ("ref", "tflm"))
        add(f"leakyrelu-int16-{k}", unary("LEAKY_RELU", "int16", (s, 0), (s * 1.1, 0), x16,
                                          options={"alpha": 0.2}), "LeakyRelu", ("ref", "tflm"))
        add(f"gelu-int16-{k}", unary("GELU", "int16", (s, 0), (s * 0.8, 0), x16,
                                     options={"approximate": k == 1}), "Gelu", ("ref", "tflm"),
            tflm_gap="tflite_micro rejects int16 GELU (allocate_tensors fails)")
        add(f"rsqrt-int16-{k}", unary("RSQRT", "int16", (s, 0), (0.01 * (k + 1), 0),
                                      np.clip(np.abs(x16.astype(np.int32)), 0, 32767).astype(np.int16)), "Rsqrt",
            ("ref", "tflm"))
    return cs


SUITE = Suite(_cases())


@pytest.mark.parametrize("case_id,backend", SUITE.params(), ids=[f"{c}[{b}]" for c, b in SUITE.params()])
def test_activation_matches_oracle(case_id, backend):
    assert_case(SUITE, case_id, backend, 2)
