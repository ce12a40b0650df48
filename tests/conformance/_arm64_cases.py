"""The case families of the ARM64 LiteRT conformance tests: every single-op sweep of the x86
tflite-optimized / tflite-xnnpack tests, the ARM-specific sweeps below, and the integer models
(converter fixtures and the published TFLite Micro corpus).

A family is a list of ``(case id, model bytes, feeds)``.  Only integer models: LiteRT's float
kernels on aarch64 sum in other orders and fuse multiply-adds, which refinterp does not model
bit-exactly (the float schemes compare with tolerances).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from tests.conformance import test_tflite_int_elementwise as ew
from tests.conformance._qcases import binary, codes, rand, unary

TESTS = Path(__file__).resolve().parents[1]
INT_MODELS = (
    *(TESTS / "fixtures" / "tflite" / f"{n}.tflite" for n in (
        "attention_block_int8", "depth_space_int8", "efficientnet_tiny_int8", "mobilenet_tiny_int16x8",
        "mobilenet_v1_tiny_int8", "mobilenet_v2_tiny_int8", "mobilenet_v3_tiny_int8", "ops_zoo_int8",
        "streaming_state_int8")),
    *(TESTS / "corpus" / "tflite_micro" / f"{n}.tflite" for n in (
        "dtln_noise_suppression", "hello_world_int8", "keyword_scrambled", "micro_speech_lstm",
        "micro_speech_quantized", "mobilenet_v2_quantized_1x3x224x224", "simple_add_model", "trained_lstm_int8")),
)


def _from_groups(groups: dict) -> dict[str, list]:
    return {g: [(c.id, c.model, c.feeds) for c in make()] for g, make in groups.items()}


def _from_suite(suite) -> list:
    return [(c.id, c.model, c.feeds) for c in suite.cases.values()]


def arm_extra_cases() -> list:
    """What differs on ARM: int16 LUT tables built with fused multiply-adds (GELU both forms, RSQRT,
    SOFTMAX over scale sweeps) and XNNPACK's fixed-point NEON MUL (product/output scale ratios across
    its whole [2^-16, 2^8) range, power-of-two ratios whose rounding shift meets exact ties, uint8)."""
    rng = np.random.default_rng(17)
    out = []
    x16 = codes("int16").reshape(1, -1)
    for k in range(8):
        s = float(np.float32(rng.uniform(2e-5, 6e-4)))
        so = float(np.float32(s * rng.uniform(0.3, 1.5)))
        for approx in (False, True):
            m, f = unary("GELU", "int16", (s, 0), (so, 0), x16, options={"approximate": approx})
            out.append((f"gelu-int16-{'tanh' if approx else 'erf'}-{k}", m, f))
        xr = np.clip(np.abs(x16.astype(np.int32)), 0, 32767).astype(np.int16)
        m, f = unary("RSQRT", "int16", (s, 0), (float(np.float32(rng.uniform(0.002, 0.05))), 0), xr)
        out.append((f"rsqrt-int16-{k}", m, f))
    for k, (s, beta) in enumerate([(1e-3, 1.0), (3e-4, 1.0), (2e-3, 0.5), (5e-4, 2.0)]):
        x = rand(rng, (3, 37), "int16")
        m, f = unary("SOFTMAX", "int16", (s, 0), (1 / 32768, 0), x, {"beta": beta})
        out.append((f"softmax-int16-{k}", m, f))
    for dt in ("int8", "uint8"):
        a, b = ew._all_pairs(dt)
        zs = (-5, 7, 3) if dt == "int8" else (128, 120, 131)
        for k, ratio in enumerate((2.0 ** -16 * 1.5, 2.0 ** -12, 2.0 ** -6 * 1.3, 0.25, 0.5, 0.75, 1.0, 3.3,
                                   2.0 ** 5, 200.0)):
            s1, s2 = 0.05, 0.02
            so = float(np.float32(np.float32(s1 * s2) / np.float32(ratio)))
            act = {"fused_activation": ("NONE", "RELU", "RELU6", "NONE")[k % 4]}
            m, f = binary("MUL", dt, (s1, zs[0]), (s2, zs[1]), (so, zs[2]), a, b, act)
            out.append((f"mul-{dt}-ratio{ratio:.3g}", m, f))
    return out


def gemv_cases() -> list:
    """8-bit FULLY_CONNECTED over one input row and CONV_2D with one output pixel (LiteRT's custom
    GEMV path on ARM: >= 8 inputs, >= 4 outputs), exact power-of-two ties and typical scales,
    per-tensor and per-channel."""
    from tests.conformance import test_tflite_int_conv as base

    rng = np.random.default_rng(23)
    cs = [base._fc_case(rng, 300 + j, tie=True, n_in=n_in, n_out=n_out, batch=1)
          for j, (n_in, n_out) in enumerate(((16, 8), (8, 4), (33, 12), (64, 5)))]
    cs += [base._fc_case(rng, 310 + j, n_in=n_in, n_out=n_out, batch=1, per_channel=j % 2 == 1,
                         act=base.ACTS[j % 4]) for j, (n_in, n_out) in enumerate(((16, 8), (40, 17), (9, 4), (7, 9)))]
    # one-pixel CONV_2D (1x1 on a 1x1 input; 3x3 VALID on a 3x3 input): the GEMM has one column
    cs += [base._conv_case(rng, "CONV_2D", 320 + j, cin=cin, cout=cout, k=k, hw=k, stride=(1, 1), pad="VALID",
                           act="NONE", per_channel=j % 2 == 1, tie=j < 2)
           for j, (cin, cout, k) in enumerate(((16, 8, (1, 1)), (4, 12, (3, 3)), (24, 9, (1, 1)), (3, 5, (3, 3))))]
    return [(c.id, c.model, c.feeds) for c in cs]


def uint8_cases() -> list:
    """The legacy-uint8 sweeps of the x86 tests (test_tflite_uint8.py): conv family over filter zero
    points, a MobileNet-like model, element-wise near ties, bilinear resize."""
    from tests.conformance import test_tflite_uint8 as u8

    return [(c.id, c.model, c.feeds) for c in u8.conv_cases() + [u8.mobilenet_like()] + u8.eltwise_cases()
            + u8.resize_cases()]


def families() -> dict[str, list]:
    from tests.conformance import (test_tflite_opt_xnn_activation as act, test_tflite_opt_xnn_conv as conv,
                                   test_tflite_opt_xnn_elementwise as elem, test_tflite_opt_xnn_misc as misc,
                                   test_tflite_opt_xnn_pool_reduce as pool)

    fam = {**_from_groups(conv.GROUPS), **_from_groups(pool.GROUPS)}
    fam["ELEMENTWISE"] = _from_suite(elem.SUITE)
    fam["ACTIVATION"] = _from_suite(act.SUITE)
    fam["MISC"] = _from_suite(misc.SUITE)
    fam["ARM_EXTRA"] = arm_extra_cases()
    fam["FC_GEMV"] = gemv_cases()
    fam["UINT8"] = uint8_cases()
    fam["MODELS"] = [(p.name, p.read_bytes(), None) for p in INT_MODELS]
    return fam


def model_feeds(path_name: str, model: bytes) -> dict[str, np.ndarray]:
    """Random integer inputs (seed 0) for a model family entry."""
    import tempfile

    import refinterp
    from tests.conformance.test_corpus_tflite import _feeds

    with tempfile.TemporaryDirectory(prefix="arm64_model_") as tmp:
        p = Path(tmp) / path_name
        p.write_bytes(model)
        return _feeds(refinterp.load(p))
