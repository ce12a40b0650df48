"""com.microsoft EmbedLayerNormalization against ONNX Runtime's CPU kernel (float32 within 1e-5; the int32
mask index exactly): with and without segment embeddings, mask and position ids, two or three outputs
(ORT requires beta and the mask_index output)."""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.errors import InputError  # noqa: E402
from tests.onnx_models import ort_and_refinterp, single_node_model  # noqa: E402

B, S, H, V, P, G = 3, 7, 16, 50, 20, 2


def _model(with_segment: bool, with_beta: bool, with_mask: bool, with_pos: bool, n_out: int):
    rng = np.random.default_rng(int(with_segment) + 2 * int(with_beta) + 4 * int(with_mask) + 8 * int(with_pos))
    inits = {"word": rng.normal(0, 1, (V, H)), "position": rng.normal(0, 0.5, (P, H)),
             "gamma": rng.uniform(0.5, 1.5, H)}
    if with_segment:
        inits["segment"] = rng.normal(0, 0.2, (G, H))
    if with_beta:
        inits["beta"] = rng.normal(0, 0.1, H)
    ins = ["ids", "seg" if with_segment else "", "word", "position", "segment" if with_segment else "", "gamma",
           "beta" if with_beta else "", "mask" if with_mask else ""]
    feeds = {"ids": rng.integers(0, V, (B, S)).astype(np.int32)}
    if with_segment:
        feeds["seg"] = rng.integers(0, G, (B, S)).astype(np.int32)
    if with_mask:
        feeds["mask"] = (np.arange(S)[None, :] < rng.integers(1, S + 1, (B, 1))).astype(np.int32)
    if with_pos:
        ins.append("pos")
        feeds["pos"] = rng.permutation(P)[:S].astype(np.int32)[None, :]
    while ins and not ins[-1]:
        ins.pop()
    outs = ["y", "mask_index", "sum"][:n_out]
    node = helper.make_node("EmbedLayerNormalization", ins, outs, domain="com.microsoft", epsilon=1e-5)
    types = {"y": TensorProto.FLOAT, "mask_index": TensorProto.INT32, "sum": TensorProto.FLOAT}
    m = single_node_model(node, feeds, {o: types[o] for o in outs}, opset=17, ir_version=8,
                          inits=[numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
                          domains=("com.microsoft",))
    return m, feeds, outs


CASES = [(True, True, True, False, 3), (False, True, False, False, 2), (True, True, True, True, 2),
         (False, True, True, True, 3), (True, True, False, True, 3)]


@pytest.mark.parametrize("seg,beta,mask,pos,n_out", CASES, ids=lambda v: str(v))
def test_embed_layer_norm_matches_onnxruntime(tmp_path, seg, beta, mask, pos, n_out):
    m, feeds, outs = _model(seg, beta, mask, pos, n_out)
    want, got, _ = ort_and_refinterp(m, feeds, tmp_path, optimize=False)
    for o in outs:
        assert got[o].dtype == want[o].dtype and got[o].shape == want[o].shape, o
        if want[o].dtype.kind == "i":
            assert np.array_equal(got[o], want[o]), o
        else:
            np.testing.assert_allclose(got[o], want[o], rtol=1e-5, atol=1e-5, err_msg=o)


def test_embed_layer_norm_index_out_of_range_is_an_input_error(tmp_path):
    m, feeds, _ = _model(False, True, False, False, 2)
    p = tmp_path / "m.onnx"
    p.write_bytes(m.SerializeToString())
    feeds["ids"] = feeds["ids"].copy()
    feeds["ids"][0, 0] = V
    with pytest.raises(InputError, match="input_ids outside"):
        refinterp.Session(refinterp.load(str(p)), "float32").run(feeds)
