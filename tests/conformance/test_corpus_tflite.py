"""Published TFLite models (tests/corpus/tflite_micro, see its README) against their runtimes.

Each model runs on one deterministic input under the scheme of each runtime that can run it
(tflite-reference vs LiteRT BUILTIN_REF, tflite-optimized vs its optimized resolver, tflite-xnnpack vs
the default resolver with XNNPACK, tflite-micro vs TFLite Micro; float models under float32 vs LiteRT),
every tensor both sides hold compared: integer tensors at 0 differing elements, float
tensors within 1e-5 relative.  What refinterp cannot run yet, and what a runtime itself refuses, is
listed in ``EXPECTED`` with the reason; ``test_corpus_summary`` prints the tally
(loaded / run / equal) so the corpus measures progress.  An entry that starts to pass fails the
test (strict), so the list cannot go stale.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from refinterp.errors import RefinterpError  # noqa: E402
from tests.conformance._int_oracle import Aborted, run_batch  # noqa: E402
from refinterp.compare.unwritten import unwritten_masks as unwritten  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tflite_micro"
MODELS = sorted(p.name for p in CORPUS.glob("*.tflite"))
BACKENDS = {"ref": "tflite-reference", "tflm": "tflite-micro", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack"}

# (model, backend) -> ("refinterp" | "oracle", reason).  "refinterp": refinterp refuses the model
# (an UnsupportedOpError / ModelError naming the reason); "oracle": the runtime cannot run it.
_SIGNAL = ("LiteRT has no TFLite Micro signal-library ops (SignalWindow, SignalRfft, ...); TFLite Micro "
           "runs them and equals refinterp (here and in test_tflm_signal.py)")
EXPECTED = {
    **{(m, b): ("oracle", _SIGNAL) for m in ("audio_preprocessor_float.tflite",
                                              "audio_preprocessor_int8.tflite") for b in ("ref", "opt", "xnnpack")},
    **{("person_detect_vela.tflite", b): ("refinterp", "the Ethos-U command stream (ethos-u custom op) is "
                                                      "not modelled") for b in BACKENDS},
    **{("person_detect.tflite", b): ("oracle", "LiteRT refuses a bias whose quantized_dimension (3) was "
                                               "copied from its filter; TFLite Micro runs the model")
       for b in ("ref", "opt", "xnnpack")},
    **{("keyword_scrambled_8bit.tflite", b): ("refinterp", "LiteRT's integer SVDF takes an int16 state "
                                                          "only (LiteRT 2.3 corrupts its heap on this model)")
       for b in ("ref", "opt", "xnnpack")},
    ("mobilenet_v2_quantized_1x3x224x224.tflite", "tflm"): ("oracle", "TFLite Micro's Python interpreter "
                                                                      "fails to allocate its tensors"),
}


def _feeds(g) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for n in g.inputs:
        t = g.tensors[n]
        dt = np.dtype(t.dtype)
        shape = [d or 1 for d in t.shape]
        if dt.kind in "iu":
            info = np.iinfo(dt)
            out[n] = rng.integers(info.min, info.max + 1, size=shape).astype(dt)
        else:
            out[n] = rng.uniform(-1, 1, shape).astype(dt)
    return out


def _is_float(g) -> bool:
    return all(g.tensors[n].dtype == "float32" for n in g.inputs) and not any(
        t.quant is not None and t.const is None for t in g.tensors.values())


_ORACLE: dict[str, list] = {}


def _oracle(backend: str, name: str):
    if backend not in _ORACLE:
        cases = []
        for m in MODELS:
            g = refinterp.load(CORPUS / m)
            cases.append(((CORPUS / m).read_bytes(), _feeds(g)))
        _ORACLE[backend] = run_batch(cases, backend)
    return _ORACLE[backend][MODELS.index(name)]


def _outcome(name: str, backend: str) -> tuple[str, str]:
    """("equal" | "differ" | "refinterp" | "oracle", detail)."""
    try:
        g = refinterp.load(CORPUS / name)
        scheme = "float32" if _is_float(g) else BACKENDS[backend]
        feeds = _feeds(g)
        ours = refinterp.Session(g, scheme).run(feeds, capture="all")
    except RefinterpError as e:
        return "refinterp", str(e)
    o = _oracle(backend, name)
    if isinstance(o, Aborted):
        return "oracle", o.message
    tensors = differing = 0
    notes = []
    masks = unwritten(g)
    for k, v in ours.items():
        if k not in o or k.endswith("#next"):
            continue
        w = np.asarray(o[k])
        if k in masks:  # elements the runtime does not write (arena contents): not compared
            keep = ~masks[k].reshape(w.shape)
            w, v = w[keep], np.asarray(v)[keep]
        tensors += 1
        if w.shape != v.shape or w.dtype != v.dtype:
            differing += max(w.size, v.size)
            notes.append(f"{k}: {w.dtype}{list(w.shape)} vs {v.dtype}{list(v.shape)}")
        elif v.dtype.kind == "f":
            bad = ~np.isclose(v, w, rtol=1e-5, atol=1e-6)
            differing += int(bad.sum())
            if bad.any():
                notes.append(f"{k}: {int(bad.sum())} float values off")
        else:
            n = int(np.count_nonzero(v != w))
            differing += n
            if n:
                notes.append(f"{k}: {n}/{w.size} differ")
    return ("equal" if differing == 0 and tensors >= 2 else "differ"), f"{tensors} tensors; " + "; ".join(notes[:4])


@pytest.mark.parametrize("backend", sorted(BACKENDS))
@pytest.mark.parametrize("name", MODELS)
def test_corpus_model(name, backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    status, detail = _outcome(name, backend)
    expected = EXPECTED.get((name, backend))
    if expected is not None:
        assert status == expected[0], f"expected {expected[0]} ({expected[1]}), got {status}: {detail[:300]}"
        pytest.xfail(f"{expected[0]}: {expected[1]}")
    assert status == "equal", detail[:600]


def test_corpus_summary():
    """The tally, printed; at least the models known to run must run."""
    pytest.importorskip("tflite_micro")
    rows = {b: [_outcome(m, b)[0] for m in MODELS] for b in BACKENDS}
    loaded = sum(1 for m in MODELS if _loads(m))
    lines = [f"corpus: {len(MODELS)} models, {loaded} load"]
    for b, st in rows.items():
        lines.append(f"  {b}: {st.count('equal')} equal, {st.count('refinterp')} not run by refinterp, "
                     f"{st.count('oracle')} not run by the runtime, {st.count('differ')} differ")
    print("\n" + "\n".join(lines))
    assert all(st.count("differ") == 0 for st in rows.values())
    assert loaded == len(MODELS)


def _loads(name: str) -> bool:
    try:
        refinterp.load(CORPUS / name)
        return True
    except RefinterpError:
        return False
