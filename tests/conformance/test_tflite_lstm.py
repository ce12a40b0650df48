"""TFLite UNIDIRECTIONAL_SEQUENCE_LSTM (float) against LiteRT: plain, peephole, CIFG + projection
(+ clips), layer norm, time-major.  The output and cell states are variable tensors: LiteRT starts
them at zero and keeps them from one invoke to the next, so each model runs three times in a row
(the second and third runs start from the first's final state) and every run must agree, within
1e-5 relative (float)."""
from __future__ import annotations

import numpy as np
import pytest

litert = pytest.importorskip("ai_edge_litert.interpreter")

import refinterp  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

F32 = np.float32
B, T, I, C = 2, 4, 3, 5


def _model(peephole=False, cifg=False, proj=0, layer_norm=False, time_major=False, cell_clip=0.0,
           proj_clip=0.0, seed=0):
    rng = np.random.default_rng(seed)
    o = proj or C
    b = TFLiteBuilder()
    x = b.tensor("x", (T, B, I) if time_major else (B, T, I))

    def w(name, *shape):
        return b.const(name, rng.normal(0, 0.4, shape).astype(F32))

    ins = [x]
    ins += [-1 if cifg else w("w_i", C, I), w("w_f", C, I), w("w_c", C, I), w("w_o", C, I)]
    ins += [-1 if cifg else w("r_i", C, o), w("r_f", C, o), w("r_c", C, o), w("r_o", C, o)]
    ins += [w("p_i", C) if peephole and not cifg else -1, w("p_f", C) if peephole else -1,
            w("p_o", C) if peephole else -1]
    ins += [-1 if cifg else w("b_i", C), w("b_f", C), w("b_c", C), w("b_o", C)]
    ins += [w("proj", proj, C) if proj else -1, w("proj_b", proj) if proj else -1]
    h = b.tensor("h_state", (B, o))
    c = b.tensor("c_state", (B, C))
    b.tensors[h].isVariable = b.tensors[c].isVariable = True
    ins += [h, c]
    if layer_norm:
        ins += [-1 if cifg else w("ln_i", C), w("ln_f", C), w("ln_c", C), w("ln_o", C)]
    y = b.tensor("y", (T, B, o) if time_major else (B, T, o))
    b.op("UNIDIRECTIONAL_SEQUENCE_LSTM", ins, [y], {"fused_activation": "TANH", "cell_clip": cell_clip,
                                                    "proj_clip": proj_clip, "time_major": time_major})
    feeds = [rng.normal(0, 1, (T, B, I) if time_major else (B, T, I)).astype(F32) for _ in range(3)]
    return b.build([x], [y]), feeds


CASES = {
    "plain": dict(),
    "peephole": dict(peephole=True, seed=1),
    "cifg-projection-clips": dict(cifg=True, proj=3, peephole=True, cell_clip=0.8, proj_clip=0.3, seed=2),
    "layer-norm": dict(layer_norm=True, peephole=True, seed=3),
    "time-major": dict(time_major=True, seed=4),
}


def _check_across_invokes(tmp_path, model, feeds, what: str):
    """Invoke LiteRT BUILTIN_REF and one refinterp Session on the feeds in turn (states carried by
    both) and compare every output after each invoke; returns the Session."""
    it = litert.Interpreter(model_content=model, num_threads=1,
                            experimental_op_resolver_type=litert.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    sess = refinterp.Session(refinterp.load(str(p)), "float32")
    for run, x in enumerate(feeds):
        it.set_tensor(it.get_input_details()[0]["index"], x)
        it.invoke()
        got = sess.run({"x": x})
        for d in it.get_output_details():
            np.testing.assert_allclose(got[d["name"]], it.get_tensor(d["index"]), rtol=1e-5, atol=1e-6,
                                       err_msg=f"{what}: {d['name']}, run {run}")
    return sess


@pytest.mark.parametrize("case", sorted(CASES))
def test_lstm_matches_litert_across_invokes(tmp_path, case):
    model, feeds = _model(**CASES[case])
    sess = _check_across_invokes(tmp_path, model, feeds, case)
    sess.reset_state()  # back to zero states: the first run again
    np.testing.assert_allclose(sess.run({"x": feeds[0]})["y"], _first_run(model, feeds[0]), rtol=1e-5, atol=1e-6)


def _first_run(model, x):
    it = litert.Interpreter(model_content=model, num_threads=1)
    it.allocate_tensors()
    it.set_tensor(it.get_input_details()[0]["index"], x)
    it.invoke()
    return it.get_tensor(it.get_output_details()[0]["index"])


def _bilstm_model(merge: bool, time_major: bool, seed: int = 7):
    rng = np.random.default_rng(seed)
    b = TFLiteBuilder()
    x = b.tensor("x", (T, B, I) if time_major else (B, T, I))

    def w(name, *shape):
        return b.const(name, rng.normal(0, 0.4, shape).astype(F32))

    ins = [x]
    for d in ("fw", "bw"):
        ins += [w(f"{d}_w{g}", C, I) for g in "ifco"] + [w(f"{d}_r{g}", C, C) for g in "ifco"]
        ins += [w(f"{d}_p{g}", C) for g in "ifo"] + [w(f"{d}_b{g}", C) for g in "ifco"] + [-1, -1]
    states = [b.tensor(n, (B, C)) for n in ("fw_h", "fw_c", "bw_h", "bw_c")]
    for s in states:
        b.tensors[s].isVariable = True
    ins += states + [-1] * 9
    shape = (T, B) if time_major else (B, T)
    outs = [b.tensor("y", shape + (2 * C,))] if merge else [b.tensor("y_fw", shape + (C,)),
                                                            b.tensor("y_bw", shape + (C,))]
    b.op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, outs, {"fused_activation": "TANH", "merge_outputs": merge,
                                                    "time_major": time_major})
    feeds = [rng.normal(0, 1, (T, B, I) if time_major else (B, T, I)).astype(F32) for _ in range(2)]
    return b.build([x], outs), feeds


# merge_outputs with batch-major input is left out: LiteRT 2.3's BUILTIN_REF output then depends on
# what ran in the process before (the backward half of batch 1 changes between runs of the same
# model: it reads memory it did not write), so it is no oracle there (a finding).  On a fresh
# interpreter it agrees with refinterp.
@pytest.mark.parametrize("merge,time_major", [(False, True), (False, False), (True, True)])
def test_bidirectional_lstm_matches_litert(tmp_path, merge, time_major):
    model, feeds = _bilstm_model(merge, time_major)
    _check_across_invokes(tmp_path, model, feeds, f"merge={merge}, time_major={time_major}")
