"""Published legacy-uint8 and Keras PTQ models (tests/corpus/coral, Google Coral's test data): every
tensor equals the runtime's under each TFLite scheme, on x86 and (when the aarch64 emulation is
available) on ARM64.  What a runtime or scheme cannot run is listed (``EXPECTED``) and checked to fail.

Found with these models: LiteRT derives the multiplier of a uint8 CONV_2D from the float32 product of
the scales (22 codes of one DeepLabV3 layer differed with the double product), one-pixel
convolutions on ARM run the custom NEON GEMV (``gemv_rounding``), and XNNPACK's uint8 convolutions
on ARM requantize "rndnu" (one rounding).
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from refinterp.errors import RefinterpError  # noqa: E402
from tests.conformance._int_oracle import Aborted, arm64_skip_reason, compare, run_batch  # noqa: E402
from tests.conformance.test_corpus_tflite import _feeds  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "coral"
MODELS = sorted(p.name for p in CORPUS.glob("*.tflite"))
BACKENDS = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack", "tflm": "tflite-micro",
            "opt-arm64": "tflite-optimized-arm64", "xnnpack-arm64": "tflite-xnnpack-arm64",
            "opt-arm64-2.14": "tflite-optimized-arm64-2.14"}
# (model, backend) -> ("oracle" | "refinterp" | "differs", reason)
EXPECTED = {
    ("mobilenet_v1_0.25_128_quant.tflite", "tflm"): ("oracle", "TFLite Micro fails to allocate the legacy uint8 model"),
    ("split_concat.tflite", "tflm"): ("oracle", "TFLite Micro fails to allocate the uint8 model"),
    ("deeplabv3_mnv2_dm05_pascal_quant.tflite", "tflm"): ("refinterp", "tflite-micro has no uint8 ADD kernel"),
}
_ORACLE: dict[str, list] = {}


def _oracle(backend: str, name: str):
    if backend not in _ORACLE:
        jobs = [((CORPUS / m).read_bytes(), _feeds(refinterp.load(CORPUS / m))) for m in MODELS]
        _ORACLE[backend] = dict(zip(MODELS, run_batch(jobs, backend)))
    return _ORACLE[backend][name]


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("name", MODELS)
def test_published_model(name, backend):
    if "arm64" in backend and arm64_skip_reason(backend):
        pytest.skip(arm64_skip_reason(backend))
    kind, why = EXPECTED.get((name, backend), (None, None))
    g = refinterp.load(CORPUS / name)
    if kind == "refinterp":
        with pytest.raises(RefinterpError, match=why):
            refinterp.Session(g, BACKENDS[backend])
        pytest.xfail(f"refinterp refuses, as the runtime would: {why}")
    res = _oracle(backend, name)
    if kind == "oracle":
        assert isinstance(res, Aborted), f"{name} now runs on {backend}: drop it from EXPECTED"
        pytest.xfail(f"runtime failure (finding): {why}")
    assert not isinstance(res, Aborted), f"{backend} failed on {name} (finding): {res.message}"
    ours = refinterp.Session(g, BACKENDS[backend]).run(_feeds(g), capture="all")
    tensors, diff, notes = compare(res, ours)
    print(f"\n{name} [{BACKENDS[backend]}] vs {backend}: {tensors} tensors, {diff} differing")
    if kind == "differs":
        assert diff > 0, f"{name} now equals {backend}: drop it from EXPECTED"
        pytest.xfail(why)
    assert tensors >= 3 and diff == 0, "; ".join(notes)[:600]
