"""The int16x8 layers of a published SEANet speech-enhancement model (tests/corpus/seanet_16x8: TFLite
Micro's per-layer integration-test models, one real layer each: CONV_2D, TRANSPOSE_CONV, ADD, SUB,
LEAKY_RELU, PAD, STRIDED_SLICE, QUANTIZE), every tensor against LiteRT REF / OPT / XNNPACK, TFLite
Micro and the aarch64 LiteRT (OPT, XNNPACK; emulated), inputs over the whole int16 range.

Found with them: TFLite Micro derives LEAKY_RELU's multipliers in double (LiteRT: float32); the
float32 quotient moved one tie per layer on 3 of the 23 layers (``LeakyRelu: {impl: float64}`` in
tflite-micro.yaml).  TRANSPOSE_CONV's output_shape is a graph input in these extractions: refinterp
runs the declared output geometry and checks the fed value against it (it used to refuse the model).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from refinterp.errors import InputError  # noqa: E402
from tests.conformance._int_oracle import Aborted, arm64_skip_reason, compare, run_batch  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "seanet_16x8"
MODELS = sorted(p.name for p in CORPUS.glob("*.tflite"))
BACKENDS = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack", "tflm": "tflite-micro",
            "opt-arm64": "tflite-optimized-arm64", "xnnpack-arm64": "tflite-xnnpack-arm64"}
_ORACLE: dict[str, list] = {}


def _feeds(g) -> dict[str, np.ndarray]:
    """Codes over each input's whole range; a TRANSPOSE_CONV output_shape input gets the declared shape."""
    rng = np.random.default_rng(len(g.nodes) + len(g.tensors))
    out = {}
    for n in g.inputs:
        t = g.tensors[n]
        consumer = next(nd for nd in g.nodes if n in nd.inputs)
        if consumer.op == "ConvTranspose" and n == consumer.inputs[-1] and t.dtype == "int32":
            out[n] = np.asarray(g.tensors[consumer.outputs[0]].shape, np.int32)
        elif np.dtype(t.dtype).kind in "iu":
            info = np.iinfo(t.dtype)
            out[n] = rng.integers(int(info.min), int(info.max) + 1, t.shape).astype(t.dtype)
        else:
            out[n] = rng.uniform(-1, 1, t.shape).astype(t.dtype)
    return out


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("name", MODELS)
def test_seanet_layer(name, backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    if "arm64" in backend and arm64_skip_reason(backend):
        pytest.skip(arm64_skip_reason(backend))
    if backend not in _ORACLE:
        jobs = [((CORPUS / m).read_bytes(), _feeds(refinterp.load(CORPUS / m))) for m in MODELS]
        _ORACLE[backend] = run_batch(jobs, backend)
    res = _ORACLE[backend][MODELS.index(name)]
    assert not isinstance(res, Aborted), f"finding: {backend} failed on {name}: {res.message}"
    g = refinterp.load(CORPUS / name)
    ours = refinterp.Session(g, BACKENDS[backend]).run(_feeds(g), capture="all")
    tensors, diff, notes = compare(res, ours)
    assert tensors >= 2 and diff == 0, "; ".join(notes)[:600]


def test_the_corpus_is_int16x8():
    kinds = set()
    for m in MODELS:
        g = refinterp.load(CORPUS / m)
        kinds |= {g.tensors[o].dtype for nd in g.nodes for o in nd.outputs}
    assert len(MODELS) == 127 and "int16" in kinds


def test_transpose_conv_refuses_a_runtime_shape_it_was_not_built_for():
    g = refinterp.load(CORPUS / "transpose_conv0.tflite")
    feeds = _feeds(g)
    shape_input = next(n for n in g.inputs if g.tensors[n].dtype == "int32")
    feeds[shape_input] = feeds[shape_input] + np.array([0, 1, 0, 0], np.int32)
    with pytest.raises(InputError, match="differs from the model's declared output shape"):
        refinterp.Session(g, "tflite-reference").run(feeds)
