"""ONNX Attention and RotaryEmbedding (opset 23) against ONNX Runtime's CPU kernels, float32 within
1e-5.  Attention: 4-D and 3-D inputs, grouped-query heads, causal with a KV cache (present outputs),
boolean and additive masks, softcap, explicit scale; RotaryEmbedding: halves and interleaved pairs,
partial rotation, position ids or per-token caches, 3-D input.  (onnx's own node cases run in
test_onnx_node_cases.py.)"""
from __future__ import annotations

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

from tests.onnx_models import ort_and_refinterp, single_node_model  # noqa: E402

B, HQ, HKV, SQ, SKV, P, D = 2, 4, 2, 5, 5, 3, 8

# (name, three_d, kv heads, causal, past, mask kind, attrs)
CASES = [("4d", False, HQ, False, False, None, {}),
         ("4d-gqa-causal", False, HKV, True, False, None, {}),
         ("4d-past-causal", False, HQ, True, True, None, {}),
         ("4d-bool-mask", False, HQ, False, False, "bool", {}),
         ("4d-float-mask-scale", False, HQ, False, False, "float", {"scale": 0.3}),
         ("3d-gqa", True, HKV, False, False, None, {}),
         ("4d-softcap", False, HQ, False, False, None, {"softcap": 2.0})]


def _model(three_d, hkv, causal, past, mask, attrs):
    rng = np.random.default_rng(len(attrs) + 3 * hkv + 7 * int(causal) + 11 * int(past))
    if three_d:
        shapes = {"Q": (B, SQ, HQ * D), "K": (B, SKV, hkv * D), "V": (B, SKV, hkv * D)}
        attrs = {**attrs, "q_num_heads": HQ, "kv_num_heads": hkv}
    else:
        shapes = {"Q": (B, HQ, SQ, D), "K": (B, hkv, SKV, D), "V": (B, hkv, SKV, D)}
    feeds = {k: rng.normal(0, 1, s).astype(np.float32) for k, s in shapes.items()}
    ins = ["Q", "K", "V"]
    total = SKV + (P if past else 0)
    if mask == "bool":
        feeds["mask"] = rng.random((SQ, total)) < 0.8
        feeds["mask"][:, 0] = True
    elif mask == "float":
        feeds["mask"] = rng.normal(0, 1, (SQ, total)).astype(np.float32)
    ins.append("mask" if mask else "")
    outs = ["Y"]
    if past:
        feeds["past_key"] = rng.normal(0, 1, (B, hkv, P, D)).astype(np.float32)
        feeds["past_value"] = rng.normal(0, 1, (B, hkv, P, D)).astype(np.float32)
        ins += ["past_key", "past_value"]
        outs += ["present_key", "present_value"]
    while ins and not ins[-1]:
        ins.pop()
    node = helper.make_node("Attention", ins, outs, is_causal=int(causal), **attrs)
    return single_node_model(node, feeds, {o: TensorProto.FLOAT for o in outs}, opset=23, ir_version=10), feeds, outs


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_attention_matches_onnxruntime(case, tmp_path):
    m, feeds, outs = _model(*case[1:])
    want, got, _ = ort_and_refinterp(m, feeds, tmp_path, optimize=False)
    for o in outs:
        assert got[o].shape == want[o].shape, o
        np.testing.assert_allclose(got[o], want[o], rtol=1e-5, atol=1e-5, err_msg=o)


@pytest.mark.parametrize("interleaved,rot_dim,with_ids,three_d", [(0, 0, True, False), (1, 4, True, True),
                                                                  (0, 4, False, False)])
def test_rotary_embedding_matches_onnxruntime(interleaved, rot_dim, with_ids, three_d, tmp_path):
    rng = np.random.default_rng(interleaved + rot_dim)
    r = rot_dim or D
    x = rng.normal(0, 1, (B, SQ, HQ * D) if three_d else (B, HQ, SQ, D)).astype(np.float32)
    feeds = {"X": x}
    if with_ids:
        feeds["cos"] = rng.normal(0, 1, (16, r // 2)).astype(np.float32)
        feeds["sin"] = rng.normal(0, 1, (16, r // 2)).astype(np.float32)
        feeds["pos"] = rng.integers(0, 16, (B, SQ)).astype(np.int64)
    else:
        feeds["cos"] = rng.normal(0, 1, (B, SQ, r // 2)).astype(np.float32)
        feeds["sin"] = rng.normal(0, 1, (B, SQ, r // 2)).astype(np.float32)
    attrs = {"interleaved": interleaved, "rotary_embedding_dim": rot_dim}
    if three_d:
        attrs["num_heads"] = HQ
    node = helper.make_node("RotaryEmbedding", list(feeds), ["Y"], **attrs)
    m = single_node_model(node, feeds, {"Y": TensorProto.FLOAT}, opset=23, ir_version=10)
    want, got, _ = ort_and_refinterp(m, feeds, tmp_path)
    np.testing.assert_allclose(got["Y"], want["Y"], rtol=1e-5, atol=1e-6)
