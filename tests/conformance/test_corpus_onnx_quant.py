"""Published quantized ONNX models (tests/corpus/onnx_ort_testdata: ONNX Runtime's own test models,
made by its quantizer from real networks) against ONNX Runtime's CPU EP.

QDQ models: every integer tensor a node produces is made a graph output and must equal ORT with 0
differences, under ``onnxruntime-cpu`` (8-bit QDQ units fused to integer kernels, as ORT does by
default; 16-bit ones run in float in ORT's own order) and, with the fusion pass off, against ORT with
its optimizer off (DQ -> float op -> Q literally).
The dynamically quantized GPT-2 attention (MatMulInteger with uint8 activations and int8 / uint8
weights fed as graph inputs, scales and zero points as inputs, per-tensor and per-column) is
compared on every tensor ORT exposes: integer ones exactly, float ones within 1e-5 relative.  Its
nodes are not in topological order in the file (ORT sorts them); refinterp used to refuse it.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import refinterp  # noqa: E402
from refinterp.loaders.onnx_dump_io import model_with_all_outputs  # noqa: E402
from tests.conformance.test_ort_quant_models import _compare, _no_pass_scheme  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "onnx_ort_testdata"

QDQ = ("qdq_with_multi_consumer_dq_nodes.onnx", "qdq_with_multi_consumer_dq_nodes.fixed.qdq16.onnx",
       "layout_transform_reshape.qdq.onnx",
       "nhwc_resize_sizes_opset18.quant.onnx", "layout_transform_fix_transpose_without_dq.qdq.onnx",
       "test_conv_follow_convtrans_s8.onnx")

def _feeds(path: Path, seed: int) -> dict[str, np.ndarray]:
    m = onnx.load(str(path))
    inits = {i.name for i in m.graph.initializer}
    rng = np.random.default_rng(seed)
    return {i.name: (rng.standard_normal([d.dim_value or 2 for d in i.type.tensor_type.shape.dim])
                     * (1 + seed % 3)).astype(np.float32)
            for i in m.graph.input if i.name not in inits}


@pytest.mark.parametrize("name", QDQ)
def test_published_qdq_model_vs_ort_default(name):
    n = _compare(CORPUS / name, "onnxruntime-cpu", "ort", feeds=_feeds)
    print(f"\n{name}: {n} integer tensors x 3 inputs equal to ORT (default optimization)")


@pytest.mark.parametrize("name", QDQ)
def test_published_qdq_model_vs_ort_unoptimized(name):
    """With ORT's optimizer off every Conv runs in float (MLAS) and its QuantizeLinear rounds the float
    sum: the EdgeTPU blocks' 3x3 convs need MLAS's expand-then-GEMM order (before it was modelled, 2 of
    401408 codes differed at the second conv, 51 of 100352 three layers later)."""
    n = _compare(CORPUS / name, _no_pass_scheme(), "ort", level="NONE", feeds=_feeds)
    print(f"\n{name}: {n} integer tensors x 3 inputs equal to ORT (optimizer off)")


def _attention_feeds(signed: bool, columns: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(columns)
    wt, lo, hi = (np.int8, -128, 128) if signed else (np.uint8, 0, 256)
    zp_lo, zp_hi = (-16, 16) if signed else (112, 144)
    return {"input": rng.integers(0, 256, (2, 5, 768)).astype(np.uint8),
            "weight": rng.integers(lo, hi, (768, 2304)).astype(wt),
            "bias": rng.normal(0, 0.1, 2304).astype(np.float32),
            "input_scale": np.array([0.02], np.float32),
            "weight_scale": rng.uniform(1e-4, 1e-3, columns).astype(np.float32),
            "input_zero_point": np.array([120], np.uint8),
            "weight_zero_point": rng.integers(zp_lo, zp_hi, columns).astype(wt),
            "past": rng.normal(0, 1, (2, 2, 12, 3, 64)).astype(np.float32)}


@pytest.mark.parametrize("columns", [1, 2304])
@pytest.mark.parametrize("scheme", ["onnxruntime-cpu", "float32", "onnx-reference"])
def test_dynamic_quantized_attention_every_tensor(scheme, columns, tmp_path):
    src = CORPUS / "attention_past_state.u8s8.onnx"
    data, _ = model_with_all_outputs(src)
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    outs = [o.name for o in sess.get_outputs()]
    # the u8u8 variant of the same test model differs only in the weight's type: exercised by
    # re-typing the weight input here rather than shipping a second 1 MB file
    for signed in (True, False):
        model = onnx.load(str(src))
        if not signed:
            for vi in model.graph.input:
                if vi.name in ("weight", "weight_zero_point"):
                    vi.type.tensor_type.elem_type = onnx.TensorProto.UINT8
            path = tmp_path / "u8u8.onnx"
            onnx.save(model, str(path))
            data, _ = model_with_all_outputs(path)
            sess = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
            outs = [o.name for o in sess.get_outputs()]
        else:
            path = src
        feed = _attention_feeds(signed, columns)
        want = dict(zip(outs, sess.run(outs, feed)))
        # refinterp runs the graph ORT ran: every tensor an output, which keeps ORT's optimizer from
        # fusing them away (e.g. MatMulScaleFusion's FusedMatMul, which onnxruntime-cpu makes too)
        exposed = tmp_path / ("all_" + path.name)
        exposed.write_bytes(data)
        graph = refinterp.load(exposed)
        got = refinterp.Session(graph, scheme).run(feed, capture="all")
        bad, ints = [], 0
        for t, w in want.items():  # Constant node outputs are constants of the loaded graph
            g = np.asarray(got[t] if t in got else graph.tensors[t].const)
            if w.dtype.kind in "iub":
                ints += 1
                ok = g.shape == w.shape and np.array_equal(g, w)
            else:
                scale = max(1.0, float(np.abs(w).max())) if w.size else 1.0
                ok = g.shape == w.shape and np.allclose(g, w, rtol=1e-5, atol=1e-5 * scale)
            if not ok:
                bad.append(t)
        print(f"\n{'u8s8' if signed else 'u8u8'} [{scheme}], {columns} weight column scale(s): "
              f"{len(want)} tensors ({ints} integer), {len(bad)} differ")
        assert len(want) > 100 and ints > 50 and not bad, bad[:10]
