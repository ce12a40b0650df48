"""Full-integer UNIDIRECTIONAL_SEQUENCE_LSTM (8x8_16) against LiteRT's reference, optimized and XNNPACK
resolvers and TFLite Micro (kernels/tflite/ref/lstm.py; TFLM through ``impl: tflm``): the three
converter-made LSTM models of the corpus (keyword spotting, MNIST rows, DTLN noise suppression),
several random inputs each, and built models (CIFG, clipping, zero points, 16x8, peephole, layer
norm, projection; the last three also against LiteRT's aarch64 build under emulation), every tensor
equal.  Runtimes run in a subprocess (_int_oracle)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from tests.conformance._int_oracle import Aborted, arm64_skip_reason, compare, run_batch  # noqa: E402

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


# -- built models: batch 2, CIFG, cell clip, time-major, zero points, saturation ---------------------

def _int_model(cifg=False, time_major=False, cell_clip=0.0, zx=-3, zh=5, wscale=0.02, bias_span=3000,
               seed=0, B=2, T=5, I=7, C=6, act="int8", peephole=False, layer_norm=False, proj=0,
               proj_clip=0.0, hidden=(1 / 128, 5)):
    """An 8x8_16 LSTM as the converter writes it: int8 input / output state / output, int16 cell state
    (scale 2^-11), int8 weights, int32 biases, and the five intermediates (the last one, the hidden
    state, quantized like the output state unless ``hidden`` says otherwise).  ``peephole``: int16
    cell-to-gate weights; ``layer_norm``: int16 coefficients and int16-quantized gate intermediates;
    ``proj``: an int8 projection to that many outputs (int32 bias), clipped at ``proj_clip``."""
    from tests.tflite_builder import TFLiteBuilder

    rng = np.random.default_rng(seed)
    sx, sh = (0.05, 1 / 128) if act == "int8" else (0.05 / 256, 1 / 32768)
    bias_dt = "int32" if act == "int8" else "int64"
    lo, hi = (-128, 127) if act == "int8" else (-32768, 32767)
    b = TFLiteBuilder()
    x = b.tensor("x", (T, B, I) if time_major else (B, T, I), act, sx, zx)

    def w(name, rows, cols):
        return b.const(name, rng.integers(-127, 128, (rows, cols)).astype(np.int8), "int8",
                       float(wscale * rng.uniform(0.5, 1.5)), 0)

    def bias(name):
        return b.const(name, rng.integers(-bias_span, bias_span + 1, C).astype(bias_dt), bias_dt, sx * wscale, 0)

    def vec16(name, scale):
        return b.const(name, rng.integers(-32767, 32768, C).astype(np.int16), "int16", scale, 0)

    O = proj or C
    ins = [x, -1 if cifg else w("w_i", C, I), w("w_f", C, I), w("w_c", C, I), w("w_o", C, I)]
    ins += [-1 if cifg else w("r_i", C, O), w("r_f", C, O), w("r_c", C, O), w("r_o", C, O)]
    if peephole:
        ins += [-1 if cifg else vec16("p_i", float(rng.uniform(1e-5, 4e-5))),
                vec16("p_f", float(rng.uniform(1e-5, 4e-5))), vec16("p_o", float(rng.uniform(1e-5, 4e-5)))]
    else:
        ins += [-1, -1, -1]
    ins += [-1 if cifg else bias("b_i"), bias("b_f"), bias("b_c"), bias("b_o")]
    if proj:
        ins += [b.const("w_p", rng.integers(-127, 128, (O, C)).astype(np.int8), "int8",
                        float(rng.uniform(0.005, 0.02)), 0),
                b.const("b_p", rng.integers(-2000, 2001, O).astype(np.int32), "int32", 1e-4, 0)]
    else:
        ins += [-1, -1]
    h = b.tensor("h_state", (B, O), act, sh, zh)
    c = b.tensor("c_state", (B, C), "int16", 2.0 ** -11, 0)
    b.tensors[h].isVariable = b.tensors[c].isVariable = True
    ins += [h, c]
    if layer_norm:
        ins += [-1 if cifg else vec16("ln_i", float(rng.uniform(2e-5, 6e-5)))]
        ins += [vec16(f"ln_{g}", float(rng.uniform(2e-5, 6e-5))) for g in "fco"]
    else:
        ins += [-1, -1, -1, -1]
    y = b.tensor("y", (T, B, O) if time_major else (B, T, O), act, sh, zh)
    k = b.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], {"fused_activation": "TANH", "cell_clip": cell_clip,
                                                         "proj_clip": proj_clip, "time_major": time_major})
    if layer_norm:
        inter = [b.tensor(f"inter{j}", (0,), "int16", float(2.0 ** -12 * rng.uniform(0.3, 3)), 0) for j in range(4)]
    else:
        inter = [b.tensor(f"inter{j}", (0,), "float32") for j in range(4)]
    inter += [b.tensor("hidden", (0,), act, *(hidden if proj else (sh, zh)))]
    b.operators[k].intermediates = inter
    shape = (T, B, I) if time_major else (B, T, I)
    feeds = {"x": rng.integers(lo, hi + 1, shape).astype(act)}
    return b.build([x], [y]), feeds


BUILT = {
    "plain": dict(),
    "cifg": dict(cifg=True, seed=1),
    "cell-clip": dict(cell_clip=0.25, seed=2, wscale=0.05),
    "time-major": dict(time_major=True, seed=3),
    "zero-points-and-saturation": dict(zx=-128, zh=-120, wscale=0.2, bias_span=300000, seed=4),
}


@pytest.mark.parametrize("backend", sorted(SCHEMES))
def test_built_integer_lstm_every_tensor(tmp_path, backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    names = [k for k in sorted(BUILT) if not (backend == "tflm" and BUILT[k].get("cifg"))]
    cases = [_int_model(**BUILT[k]) for k in names]
    oracle = run_batch(cases, backend)
    for name, (model, feeds), want in zip(names, cases, oracle):
        if isinstance(want, Aborted):
            pytest.fail(f"finding: {backend} aborted on the {name} LSTM: {want.message}")
        p = tmp_path / f"{name}.tflite"
        p.write_bytes(model)
        ours = refinterp.Session(refinterp.load(str(p)), SCHEMES[backend]).run(feeds, capture="all")
        ours = {k: v for k, v in ours.items() if not k.endswith("#next")}
        n, bad, notes = compare(want, ours)
        assert n >= 2 and bad == 0, f"{name} under {backend}: {bad} differing; {notes[:3]}"


def test_tflm_cifg_lstm_is_refused_as_the_runtime_refuses_it(tmp_path):
    """TFLite Micro fails to allocate tensors for a CIFG LSTM (measured): tflite-micro refuses it by
    name rather than computing what no TFLM build runs."""
    pytest.importorskip("tflite_micro")
    from refinterp.errors import UnsupportedOpError

    model, feeds = _int_model(**BUILT["cifg"])
    p = tmp_path / "cifg.tflite"
    p.write_bytes(model)
    (res,) = run_batch([(model, feeds)], "tflm")  # in a subprocess
    assert isinstance(res, Aborted) and "allocate" in res.message, res
    with pytest.raises(UnsupportedOpError, match="no CIFG form"):
        refinterp.Session(refinterp.load(str(p)), "tflite-micro")


# Peephole, layer-norm and projection LSTMs (lstm_parts.py).  "peephole-projection" is the case where
# LiteRT's peephole covers only the first n_output cells of each batch row; the C >= 16 cases take
# the aarch64 NEON layer norm's vector blocks (and, at C = 17 / 20, its scalar tail); "ln-bias-2^31"
# has biases near 2^31, where r * coef + b overflows int32 (both builds form it in int64).
FORMS = {
    "peephole": dict(peephole=True, seed=7),
    "layer-norm": dict(layer_norm=True, seed=8),
    "projection": dict(proj=4, seed=9, hidden=(0.02, -7)),
    "projection-clip": dict(proj=4, proj_clip=0.3, seed=14, hidden=(0.03, 3)),
    "peephole-projection": dict(peephole=True, proj=4, seed=12, hidden=(0.03, 3)),
    "cifg-layer-norm-peephole": dict(cifg=True, peephole=True, layer_norm=True, seed=11),
    "all-C20": dict(peephole=True, layer_norm=True, proj=12, proj_clip=0.5, seed=20, B=3, T=4, I=24, C=20,
                    hidden=(0.02, -5)),
    "ln-saturating-C32": dict(layer_norm=True, seed=22, B=2, T=6, I=16, C=32, wscale=0.3, bias_span=300000,
                              zx=-128, zh=-120),
    "ln-C17": dict(layer_norm=True, seed=62, B=2, T=3, I=9, C=17),
    "ln-bias-2^31": dict(layer_norm=True, peephole=True, seed=71, B=3, T=4, I=9, C=40, bias_span=2**31 - 1,
                         wscale=0.2),
}


def _forms_every_tensor(tmp_path, backend: str, scheme: str, names) -> int:
    cases = [_int_model(**FORMS[k]) for k in names]
    checked = 0
    for name, (model, feeds), want in zip(names, cases, run_batch(cases, backend)):
        if isinstance(want, Aborted):
            pytest.fail(f"finding: {backend} aborted on the {name} LSTM: {want.message}")
        p = tmp_path / f"{name}.tflite"
        p.write_bytes(model)
        ours = refinterp.Session(refinterp.load(str(p)), scheme).run(feeds, capture="all")
        n, bad, notes = compare(want, {k: v for k, v in ours.items() if not k.endswith("#next")})
        assert n >= 2 and bad == 0, f"{name} under {backend}: {bad} differing; {notes[:3]}"
        checked += n
    return checked


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack"])
def test_peephole_layer_norm_projection_lstm_every_tensor(tmp_path, backend):
    n = _forms_every_tensor(tmp_path, backend, SCHEMES[backend], sorted(FORMS))
    print(f"\n{len(FORMS)} LSTM forms under {backend}: {n} tensors, 0 differing")


@pytest.mark.parametrize("backend", ["opt-arm64", "xnnpack-arm64"])
def test_peephole_layer_norm_projection_lstm_arm64(tmp_path, backend):
    """LiteRT 2.3's aarch64 build: NeonApplyLayerNorm (``impl: litert_neon``)."""
    why = arm64_skip_reason(backend)
    if why:
        pytest.skip(why)
    scheme = {"opt-arm64": "tflite-optimized-arm64", "xnnpack-arm64": "tflite-xnnpack-arm64"}[backend]
    n = _forms_every_tensor(tmp_path, backend, scheme, sorted(FORMS))
    print(f"\n{len(FORMS)} LSTM forms under {backend}: {n} tensors, 0 differing")


def test_layer_norm_lstm_on_old_arm64_runtime_is_refused(tmp_path):
    """tflite-runtime 2.14's aarch64 wheel computes the layer-norm LSTM otherwise (not modelled): its
    schemes refuse it by name, and the runtime's answer differs from LiteRT 2.3's on ARM (the finding
    that makes the refusal necessary); its peephole and projection forms are equal."""
    why = arm64_skip_reason("opt-arm64-2.14")
    if why:
        pytest.skip(why)
    from refinterp.errors import UnsupportedOpError

    plain = [k for k in sorted(FORMS) if not FORMS[k].get("layer_norm")]
    _forms_every_tensor(tmp_path, "opt-arm64-2.14", "tflite-optimized-arm64-2.14", plain)
    model, feeds = _int_model(**FORMS["all-C20"])
    p = tmp_path / "ln.tflite"
    p.write_bytes(model)
    g = refinterp.load(str(p))
    for scheme in ("tflite-optimized-arm64-2.14", "tflite-reference-arm64-2.14"):
        with pytest.raises(UnsupportedOpError, match="2.14.*layer-norm"):
            refinterp.Session(g, scheme)
    (old,) = run_batch([(model, feeds)], "opt-arm64-2.14")
    new = refinterp.Session(g, "tflite-optimized-arm64").run(feeds)
    assert not isinstance(old, Aborted) and not np.array_equal(old["y"], new["y"])


def test_tflm_refuses_peephole_layer_norm_projection_lstms(tmp_path):
    """TFLite Micro implements the Keras LSTM only: it fails to allocate these (measured) and
    tflite-micro refuses them naming the node and the form."""
    pytest.importorskip("tflite_micro")
    from refinterp.errors import UnsupportedOpError

    names = ["peephole", "layer-norm", "projection"]
    cases = [_int_model(**FORMS[k]) for k in names]
    for name, (model, _), res in zip(names, cases, run_batch(cases, "tflm")):
        assert isinstance(res, Aborted) and "allocate" in res.message, (name, res)
        p = tmp_path / f"{name}.tflite"
        p.write_bytes(model)
        what = {"peephole": "peephole", "layer-norm": "layer normalization", "projection": "projection"}[name]
        with pytest.raises(UnsupportedOpError, match=f"y.*TFLite Micro.*{what}"):
            refinterp.Session(refinterp.load(str(p)), "tflite-micro")


SIXTEEN = {
    "16x8": dict(act="int16", zx=0, zh=0, seed=5, bias_span=2 ** 20),
    "16x8-saturating": dict(act="int16", zx=0, zh=0, wscale=0.3, bias_span=2 ** 34, seed=6, cell_clip=0.5),
}


def test_16x8_integer_lstm_tflm_every_tensor(tmp_path):
    """TFLite Micro's int16-activation LSTM (int64 biases); LiteRT refuses it and so does refinterp
    under tflite-reference."""
    pytest.importorskip("tflite_micro")
    from refinterp.errors import UnsupportedOpError

    cases = [_int_model(**SIXTEEN[k]) for k in sorted(SIXTEEN)]
    for name, (model, feeds), want in zip(sorted(SIXTEEN), cases, run_batch(cases, "tflm")):
        if isinstance(want, Aborted):
            pytest.fail(f"finding: tflm aborted on the {name} LSTM: {want.message}")
        p = tmp_path / f"{name}.tflite"
        p.write_bytes(model)
        g = refinterp.load(str(p))
        ours = refinterp.Session(g, "tflite-micro").run(feeds, capture="all")
        n, bad, notes = compare(want, {k: v for k, v in ours.items() if not k.endswith("#next")})
        assert n >= 2 and bad == 0, f"{name}: {bad} differing; {notes[:3]}"
        with pytest.raises(UnsupportedOpError, match="16x8"):
            refinterp.Session(g, "tflite-reference")
    (litert,) = run_batch(cases[:1], "ref")  # LiteRT fails to prepare it (int64 gate biases)
    assert isinstance(litert, Aborted) and "INT64" in litert.message, litert


# -- dynamic-range ("hybrid") LSTM: float activations, int8 weights -----------------------------------

def _hybrid_model(cifg=False, asymmetric=False, time_major=False, cell_clip=0.0, seed=0, B=2, T=4, I=6, C=5,
                  peephole=False, layer_norm=False, proj=0, proj_clip=0.0):
    from tests.tflite_builder import TFLiteBuilder

    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("x", (T, B, I) if time_major else (B, T, I))

    def w(name, rows, cols):
        return b.const(name, rng.integers(-127, 128, (rows, cols)).astype(np.int8), "int8",
                       float(rng.uniform(0.002, 0.01)), 0)

    def vec8(name):
        return b.const(name, rng.integers(-127, 128, C).astype(np.int8), "int8", float(rng.uniform(0.002, 0.01)), 0)

    def fvec(name, mean=0.0):
        return b.const(name, rng.normal(mean, 0.3, C).astype(np.float32))

    O = proj or C
    ins = [x, -1 if cifg else w("w_i", C, I), w("w_f", C, I), w("w_c", C, I), w("w_o", C, I)]
    ins += [-1 if cifg else w("r_i", C, O), w("r_f", C, O), w("r_c", C, O), w("r_o", C, O)]
    ins += ([-1 if cifg else vec8("p_i"), vec8("p_f"), vec8("p_o")] if peephole else [-1, -1, -1])
    ins += [-1 if cifg else fvec("b_i"), fvec("b_f"), fvec("b_c"), fvec("b_o")]
    ins += ([w("w_p", O, C), b.const("b_p", rng.normal(0, 0.1, O).astype(np.float32))] if proj else [-1, -1])
    h = b.tensor("h_state", (B, O))
    c = b.tensor("c_state", (B, C))
    b.tensors[h].isVariable = b.tensors[c].isVariable = True
    ins += [h, c]
    ins += ([-1 if cifg else fvec("ln_i", 1.0), fvec("ln_f", 1.0), fvec("ln_c", 1.0), fvec("ln_o", 1.0)]
            if layer_norm else [-1, -1, -1, -1])
    y = b.tensor("y", (T, B, O) if time_major else (B, T, O))
    b.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], {"fused_activation": "TANH", "cell_clip": cell_clip,
                                                    "proj_clip": proj_clip, "time_major": time_major,
                                                    "asymmetric_quantize_inputs": asymmetric})
    shape = (T, B, I) if time_major else (B, T, I)
    return b.build([x], [y]), {"x": rng.normal(0, 1.5, shape).astype(np.float32)}


HYBRID = {
    "symmetric": dict(),
    "peephole": dict(peephole=True, seed=4),
    "layer-norm-asymmetric": dict(layer_norm=True, asymmetric=True, seed=5, C=7),
    "projection-clip": dict(proj=3, proj_clip=0.4, seed=6),
    "cifg-peephole-layer-norm-projection": dict(cifg=True, peephole=True, layer_norm=True, proj=4, seed=7, C=9,
                                                asymmetric=True),
    "asymmetric": dict(asymmetric=True, seed=1),
    "cifg-clip": dict(cifg=True, cell_clip=0.6, seed=2),
    "time-major-asymmetric": dict(time_major=True, asymmetric=True, seed=3),
}


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack"])
def test_hybrid_lstm_matches_litert(tmp_path, backend):
    """Float outputs within 1e-5 relative (float order of the element-wise steps; libm exp / tanh)."""
    _hybrid_cases_match(tmp_path, backend, HYBRID, _hybrid_model, "hybrid LSTM")


def _hybrid_cases_match(tmp_path, backend: str, table: dict, build, what: str) -> list:
    """Every output of every case within 1e-5 relative of the runtime; [(name, graph, feeds, want)]."""
    cases = [build(**table[k]) for k in sorted(table)]
    checked = []
    for name, (model, feeds), want in zip(sorted(table), cases, run_batch(cases, backend)):
        if isinstance(want, Aborted):
            pytest.fail(f"finding: {backend} aborted on the {name} {what}: {want.message}")
        p = tmp_path / f"{name}.tflite"
        p.write_bytes(model)
        g = refinterp.load(str(p))
        ours = refinterp.Session(g, SCHEMES[backend]).run(feeds)
        for k in g.outputs:
            np.testing.assert_allclose(ours[k], want[k], rtol=1e-5, atol=1e-6, err_msg=f"{name} {backend} {k}")
        checked.append((name, g, feeds, want))
    return checked


def _hybrid_bilstm_model(merge=False, time_major=False, asymmetric=False, cifg=False, seed=0, B=2, T=4, I=6, C=5):
    from tests.tflite_builder import TFLiteBuilder

    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("x", (T, B, I) if time_major else (B, T, I))

    def w(name, rows, cols):
        return b.const(name, rng.integers(-127, 128, (rows, cols)).astype(np.int8), "int8",
                       float(rng.uniform(0.002, 0.01)), 0)

    ins = [x]
    for d in ("fw", "bw"):
        ins += [-1 if cifg else w(f"{d}_wi", C, I)] + [w(f"{d}_w{g}", C, I) for g in "fco"]
        ins += [-1 if cifg else w(f"{d}_ri", C, C)] + [w(f"{d}_r{g}", C, C) for g in "fco"]
        ins += [-1, -1, -1]
        ins += [-1 if cifg else b.const(f"{d}_bi", rng.normal(0, 0.3, C).astype(np.float32))]
        ins += [b.const(f"{d}_b{g}", rng.normal(0, 0.3, C).astype(np.float32)) for g in "fco"] + [-1, -1]
    states = [b.tensor(n, (B, C)) for n in ("fw_h", "fw_c", "bw_h", "bw_c")]
    for st in states:
        b.tensors[st].isVariable = True
    ins += states + [-1] * 9
    shape = (T, B) if time_major else (B, T)
    outs = [b.tensor("y", shape + (2 * C,))] if merge else [b.tensor("y_fw", shape + (C,)),
                                                            b.tensor("y_bw", shape + (C,))]
    b.op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, outs, {"fused_activation": "TANH", "merge_outputs": merge,
                                                    "time_major": time_major,
                                                    "asymmetric_quantize_inputs": asymmetric})
    return b.build([x], outs), {"x": rng.normal(0, 1.5, (T, B, I) if time_major else (B, T, I)).astype(np.float32)}


HYBRID_BI = {
    "batch-major": dict(),
    "time-major-merged": dict(merge=True, time_major=True, seed=1),
    "asymmetric-cifg": dict(asymmetric=True, cifg=True, seed=2),
    "time-major-asymmetric": dict(time_major=True, asymmetric=True, seed=3, B=3, T=6, I=17, C=9),
}


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack"])
def test_hybrid_bidirectional_lstm_matches_litert(tmp_path, backend):
    """LiteRT's hybrid BIDIRECTIONAL_SEQUENCE_LSTM (int8 weights, float activations): both directions'
    outputs within 1e-5 relative (float order of the element-wise steps; libm exp / tanh)."""
    for name, g, feeds, want in _hybrid_cases_match(tmp_path, backend, HYBRID_BI, _hybrid_bilstm_model,
                                                    "hybrid BiLSTM"):
        # the float kernel (weights dequantized) is not what LiteRT computes: the test can tell
        flt = refinterp.Session(g, "float32").run(feeds)
        assert any(not np.allclose(flt[k], want[k], rtol=1e-5, atol=1e-6) for k in g.outputs), name


def test_hybrid_bidirectional_lstm_merged_batch_major_is_refused(tmp_path):
    from refinterp.errors import UnsupportedOpError

    model, _ = _hybrid_bilstm_model(merge=True)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    with pytest.raises(UnsupportedOpError, match="merged batch-major"):
        refinterp.Session(refinterp.load(str(p)), "tflite-reference")
