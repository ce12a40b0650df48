"""Full-integer UNIDIRECTIONAL_SEQUENCE_LSTM (8x8_16) against LiteRT's reference, optimized and XNNPACK
resolvers and TFLite Micro (kernels/tflite/ref/lstm.py; TFLM through ``impl: tflm``): the three
converter-made LSTM models of the corpus (keyword spotting, MNIST rows, DTLN noise suppression),
several random inputs each, every tensor equal.  Runtimes run in a subprocess (_int_oracle)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from tests.conformance._int_oracle import Aborted, compare, run_batch  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tflite_micro"
MODELS = ("micro_speech_lstm.tflite", "trained_lstm_int8.tflite", "dtln_noise_suppression.tflite")
SCHEMES = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack",
           "tflm": "tflite-micro"}
SEEDS = (0, 1, 2)


def _feeds(g, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.integers(-128, 128, size=[d or 1 for d in g.tensors[n].shape]).astype(np.int8) for n in g.inputs}


@pytest.mark.parametrize("backend", sorted(SCHEMES))
def test_integer_lstm_models_every_tensor(backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    graphs = {m: refinterp.load(CORPUS / m) for m in MODELS}
    cases = [((CORPUS / m).read_bytes(), _feeds(graphs[m], s)) for m in MODELS for s in SEEDS]
    oracle = run_batch(cases, backend)
    checked = 0
    for (model, feeds), (m, seed), want in zip(cases, [(m, s) for m in MODELS for s in SEEDS], oracle):
        if isinstance(want, Aborted):
            pytest.fail(f"finding: {backend} aborted on {m}: {want.message}")
        ours = refinterp.Session(graphs[m], SCHEMES[backend]).run(feeds, capture="all")
        ours = {k: v for k, v in ours.items() if not k.endswith("#next")}
        n, bad, notes = compare(want, ours)
        assert n >= 3 and bad == 0, f"{m} seed {seed} under {backend}: {bad} differing; {notes[:3]}"
        checked += n
    assert checked >= len(cases) * 3


@pytest.mark.parametrize("slot,what", [(20, "layer normalization"), (9, "peephole"), (16, "projection")])
def test_unmodelled_integer_lstm_forms_are_refused_by_name(slot, what):
    """Layer-norm, peephole and projection integer LSTMs have their own arithmetic (not modelled): a
    Session refuses them naming the node and the form, never computes something else."""
    import dataclasses

    from refinterp.errors import UnsupportedOpError
    from refinterp.ir import TensorInfo

    g = refinterp.load(CORPUS / "micro_speech_lstm.tflite")
    k = next(i for i, n in enumerate(g.nodes) if n.op == "UnidirectionalSequenceLSTM")
    node = g.nodes[k]
    extra = TensorInfo("extra_const", (80,), "int16", const=np.zeros(80, np.int16))
    g.tensors["extra_const"] = extra
    ins = list(node.inputs)
    ins[slot] = "extra_const"
    g.nodes[k] = dataclasses.replace(node, inputs=ins)
    with pytest.raises(UnsupportedOpError, match=f"{node.name}.*{what}"):
        refinterp.Session(g, "tflite-reference")
