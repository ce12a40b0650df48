"""TFLite Micro's audio front end (signal-library custom ops: window, FFT auto-scale, int16 real FFT,
energy, mel filter bank, square root, spectral subtraction with its streaming noise estimate, PCAN
gain control, log) against TFLite Micro itself: the two published micro_speech audio preprocessors
(tests/corpus/tflite_micro), several consecutive frames in one interpreter so the noise estimate
carried between invokes is compared too, every tensor of every frame equal.

Frames cover a sine, noise, full-scale square waves reaching -32768 (FFT auto-scale's int16 maximum,
wrapping sums in the FFT), silence (log of zero energy) and a quiet frame after loud ones (the
spectral subtraction's estimate above the signal).  SignalEnergy writes only bins start_index ..
end_index - 1; TFLite Micro leaves the rest of its output (and of the Cast reading it) as the arena
held them, so those elements are not compared (``unwritten``).  LiteRT has none of these ops: it
refuses the models (asserted in test_corpus_tflite.py)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite_micro")

import refinterp  # noqa: E402
from refinterp.compare.unwritten import unwritten_masks as unwritten  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tflite_micro"
MODELS = ("audio_preprocessor_int8.tflite", "audio_preprocessor_float.tflite")

CHILD = r"""
import sys, numpy as np
sys.path.insert(0, sys.argv[4])
from tests.conformance._int_oracle import _names
from tflite_micro.python.tflite_micro import runtime
model = open(sys.argv[1], "rb").read()
frames = np.load(sys.argv[2], allow_pickle=False)["frames"]
it = runtime.Interpreter.from_bytes(model, arena_size=1 << 22,
                                    intrepreter_config=runtime.InterpreterConfig.kPreserveAllTensors)
out = {}
names = _names(model)
for k, f in enumerate(frames):
    it.set_input(np.ascontiguousarray(f[None]), 0)
    it.invoke()
    for i, name in enumerate(names):
        t = it.GetTensor(i, 0)
        if isinstance(t, dict) and t.get("tensor_data") is not None:
            out[f"{k}|{i}"] = np.array(t["tensor_data"])
np.savez(sys.argv[3], **out)
"""


def frames() -> np.ndarray:
    rng = np.random.default_rng(7)
    t = np.arange(480)
    sq = np.where(np.sin(t * 0.09) >= 0, 32767, -32768)
    out = [np.sin(t * 0.05) * 8000 + rng.normal(0, 300, 480), rng.normal(0, 4000, 480), sq,
           np.clip(sq * 1.0 + rng.normal(0, 2000, 480), -32768, 32767), np.zeros(480),
           np.sin(t * 0.31) * 30 + rng.normal(0, 3, 480), np.full(480, -32768.0),
           np.sin(t * 0.02) * 1200]
    return np.stack([np.clip(np.round(f), -32768, 32767) for f in out]).astype(np.int16)


@pytest.mark.parametrize("name", MODELS)
def test_audio_frontend_streaming_every_tensor(name, tmp_path):
    path = CORPUS / name
    fr = frames()
    np.savez(tmp_path / "f.npz", frames=fr)
    out = tmp_path / "o.npz"
    root = str(Path(__file__).resolve().parents[2])
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), str(tmp_path / "f.npz"), str(out), root],
                       capture_output=True, text=True, timeout=300)
    if r.returncode < 0:
        pytest.fail(f"finding: TFLite Micro aborted (signal {-r.returncode}) on {name}")
    assert r.returncode == 0, r.stderr[-1500:]
    from tests.conformance._int_oracle import _names

    names = _names(path.read_bytes())
    g = refinterp.load(path)
    masks = unwritten(g)
    s = refinterp.Session(g, "tflite-micro")
    compared = elements = 0
    with np.load(out, allow_pickle=False) as z:
        for k, f in enumerate(fr):
            got = s.run({g.inputs[0]: f[None]}, capture="all")
            for key in (x for x in z.files if x.startswith(f"{k}|")):
                tname = names[int(key.split("|")[1])]
                if tname not in got:
                    continue
                w, v = z[key], np.asarray(got[tname])
                assert v.shape == w.shape and v.dtype == w.dtype, \
                    f"frame {k} {tname}: {v.dtype}{v.shape} vs {w.dtype}{w.shape}"
                keep = ~masks[tname].reshape(w.shape) if tname in masks else np.ones(w.shape, bool)
                bad = int(np.sum((v != w) & keep)) if w.dtype.kind != "f" else int(np.sum(~np.isclose(v, w) & keep))
                assert bad == 0, f"frame {k} {tname}: {bad} of {int(keep.sum())} differ"
                compared += 1
                elements += int(keep.sum())
    print(f"\n{name}: {len(fr)} frames, {compared} tensors ({elements} elements), 0 differing")
    assert compared >= len(fr) * 15
    s.reset_state()  # the noise estimate starts from zero again: the first frame repeats exactly
    again = s.run({g.inputs[0]: fr[0][None]}, capture="all")
    with np.load(out, allow_pickle=False) as z:
        final = [k for k in z.files if k.startswith("0|") and names[int(k.split("|")[1])] == g.outputs[0]]
        assert final and np.array_equal(again[g.outputs[0]], z[final[0]])


def test_spectral_subtraction_state_is_carried():
    """The noise estimate is Session state: a frame after loud frames subtracts more than the same
    frame after a reset."""
    g = refinterp.load(CORPUS / MODELS[0])
    s = refinterp.Session(g, "tflite-micro")
    fr = frames()
    est = next(n.outputs[1] for n in g.nodes if n.op == "SignalFilterBankSpectralSubtraction")
    for f in fr[:4]:
        s.run({g.inputs[0]: f[None]})
    after = s.run({g.inputs[0]: fr[5][None]}, capture=[est])[est]
    s.reset_state()
    fresh = s.run({g.inputs[0]: fr[5][None]}, capture=[est])[est]
    assert after.sum() > fresh.sum()


def test_capture_then_diff(tmp_path):
    """The CLI: TFLite Micro's own dump of the int8 preprocessor diffs clean (its unwritten energy bins,
    and the Cast of them, are not counted: compare/unwritten.py)."""
    model = CORPUS / MODELS[0]
    dump = tmp_path / "d.npz"
    cli = [sys.executable, "-m", "refinterp"]
    r = subprocess.run(cli + ["capture", "--runtime", "tflm", "--random-inputs", "3", "--out", str(dump), str(model)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"capture exit {r.returncode}: {r.stderr[-800:]}"
    r = subprocess.run(cli + ["diff", str(model), "--against", str(dump), "--scheme", "tflite-micro"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    assert "25 model tensors (exact 25)" in r.stdout, r.stdout[-800:]
