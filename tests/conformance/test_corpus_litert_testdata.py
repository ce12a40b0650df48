"""LiteRT's own published test models (tests/corpus/litert_testdata) that real exporters make today:
an int4 blockwise-quantized FULLY_CONNECTED from a Qwen decoder (ai-edge-quantizer output) and a 16x8
attention einsum (int16 activations, per-channel int8 weights) lowered to BATCH_MATMUL.  The float
torchaudio Conformer runs in test_corpus_float_tflite.py.

Wrong answers found with them and fixed:
- the blockwise int4 filter was read as plain integer codes (its scales live in a separate float16
  tensor that refinterp ignored): outputs 50-200x off under every scheme.  Now: the loader attaches
  the scales, tflite-optimized follows ``EvalBlockwise4Bit`` bit for bit, the float schemes
  dequantize the filter, and what is not modelled is refused when the session is built;
- BATCH_MATMUL with a per-channel operand used the first channel's scale; LiteRT reads the legacy
  per-tensor scale, 0 for such a tensor, and outputs the output zero point everywhere.

Runtime findings asserted here: LiteRT 2.3 REF and tflite-runtime 2.14 OPT on aarch64 output zeros for
the blockwise layer;
TFLite Micro refuses the per-channel BATCH_MATMUL (allocation fails).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from refinterp.errors import UnsupportedOpError  # noqa: E402
from tests.conformance._int_oracle import Aborted, arm64_skip_reason, compare, run_batch  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "litert_testdata"
BLOCKWISE = CORPUS / "qwen_fc_blockwise_quantized.tflite"
EINSUM = CORPUS / "static_w8_a16_quantized_q_einsum.tflite"


def _blockwise_inputs(g) -> list[dict[str, np.ndarray]]:
    """Random rows, a row of one sign (zero point at a bound), a constant row, tiny and huge values."""
    name, shape = g.inputs[0], g.tensors[g.inputs[0]].shape
    rng = np.random.default_rng(5)
    rows = [rng.uniform(-1, 1, shape), rng.uniform(0, 3, shape), np.full(shape, 0.37), rng.normal(0, 1e-6, shape),
            rng.normal(0, 1e4, shape), np.zeros(shape)]
    return [{name: r.astype(np.float32)} for r in rows]


@pytest.mark.parametrize("backend,scheme", [("opt", "tflite-optimized"), ("opt-arm64", "tflite-optimized-arm64")])
def test_blockwise_fc_equals_litert_optimized(backend, scheme):
    if "arm64" in backend and arm64_skip_reason(backend):
        pytest.skip(arm64_skip_reason(backend))
    g = refinterp.load(BLOCKWISE)
    node = g.nodes[0]
    assert node.attrs.get("blockwise") == 32 and len(node.inputs) == 4
    feeds = _blockwise_inputs(g)
    res = run_batch([(BLOCKWISE.read_bytes(), f) for f in feeds], backend)
    s = refinterp.Session(g, scheme)
    for k, (f, r) in enumerate(zip(feeds, res)):
        assert not isinstance(r, Aborted), r.message
        got = s.run(f)[g.outputs[0]]
        want = np.asarray(r[g.outputs[0]])
        assert got.dtype == want.dtype and np.array_equal(got, want), \
            f"input {k}: {int(np.sum(got != want))} of {want.size} differ"


def test_blockwise_fc_float_scheme_dequantizes_the_filter():
    g = refinterp.load(BLOCKWISE)
    wq = np.asarray(g.tensors[g.nodes[0].inputs[1]].const, np.float32)
    sc = np.asarray(g.tensors[g.nodes[0].inputs[3]].const, np.float32)
    w = wq * np.repeat(sc, 32, axis=1)
    f = _blockwise_inputs(g)[0]
    got = refinterp.Session(g, "float32").run(f)[g.outputs[0]]
    want = f[g.inputs[0]].reshape(-1, w.shape[1]) @ w.T
    np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-4, atol=1e-5)
    # and near LiteRT's int8-activation answer (the quantization of x is the only difference)
    r = run_batch([(BLOCKWISE.read_bytes(), f)], "opt")[0]
    assert np.max(np.abs(got - r[g.outputs[0]])) < 0.01 * np.max(np.abs(want))


@pytest.mark.parametrize("scheme,why", [("tflite-reference", "no blockwise path"),
                                        ("tflite-optimized-arm64-2.14", "no blockwise path"),
                                        ("tflite-xnnpack", "qd8-f32-qb4w GEMM is not modelled"),
                                        ("tflite-xnnpack-arm64", "qd8-f32-qb4w GEMM is not modelled"),
                                        ("tflite-micro", "no dynamic-range")])
def test_blockwise_fc_refused_where_not_modelled(scheme, why):
    g = refinterp.load(BLOCKWISE)
    with pytest.raises(UnsupportedOpError, match=why):
        refinterp.Session(g, scheme)


@pytest.mark.parametrize("backend", ["ref", "opt-arm64-2.14"])
def test_blockwise_fc_runtimes_without_a_blockwise_path_output_zeros(backend):
    """The finding behind the tflite-reference and tflite-optimized-arm64-2.14 refusals."""
    if "arm64" in backend and arm64_skip_reason(backend):
        pytest.skip(arm64_skip_reason(backend))
    g = refinterp.load(BLOCKWISE)
    r = run_batch([(BLOCKWISE.read_bytes(), _blockwise_inputs(g)[0])], backend)[0]
    assert not isinstance(r, Aborted)
    assert not np.any(np.asarray(r[g.outputs[0]])), f"{backend} now runs blockwise layers: model it"


def test_a_blockwise_operand_elsewhere_is_refused_at_load(tmp_path):
    """Only FULLY_CONNECTED's filter takes blockwise scales: the loader refuses any other use."""
    from ai_edge_litert import schema_py_generated as fb

    data = bytearray(BLOCKWISE.read_bytes())
    m = fb.Model.GetRootAs(data, 0)
    code = m.OperatorCodes(m.Subgraphs(0).Operators(0).OpcodeIndex())
    assert code.BuiltinCode() == fb.BuiltinOperator.FULLY_CONNECTED
    import struct

    for slot, fmt in ((4, "<b"), (10, "<i")):  # deprecated_builtin_code (int8), builtin_code (int32)
        pos = code._tab.Offset(slot)
        if pos:
            struct.pack_into(fmt, data, code._tab.Pos + pos, fb.BuiltinOperator.BATCH_MATMUL)
    p = tmp_path / "bmm_blockwise.tflite"
    p.write_bytes(bytes(data))
    with pytest.raises(UnsupportedOpError, match="blockwise-quantized operand"):
        refinterp.load(p)


EINSUM_BACKENDS = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack",
                   "opt-arm64": "tflite-optimized-arm64", "xnnpack-arm64": "tflite-xnnpack-arm64"}


@pytest.mark.parametrize("backend", list(EINSUM_BACKENDS))
def test_per_channel_batch_matmul_gives_the_zero_point(backend):
    if "arm64" in backend and arm64_skip_reason(backend):
        pytest.skip(arm64_skip_reason(backend))
    g = refinterp.load(EINSUM)
    x = {g.inputs[0]: np.random.default_rng(1).integers(-32768, 32768, g.tensors[g.inputs[0]].shape).astype(np.int16)}
    r = run_batch([(EINSUM.read_bytes(), x)], backend)[0]
    assert not isinstance(r, Aborted), r.message
    ours = refinterp.Session(g, EINSUM_BACKENDS[backend]).run(x, capture="all")
    tensors, diff, notes = compare(r, ours)
    assert tensors == 4 and diff == 0, notes
    out = ours[g.outputs[0]]
    assert out.dtype == np.int16 and not np.any(out)  # output zero point 0 everywhere, as LiteRT


def test_tflite_micro_refuses_the_per_channel_batch_matmul():
    pytest.importorskip("tflite_micro")
    g = refinterp.load(EINSUM)
    x = {g.inputs[0]: np.zeros(g.tensors[g.inputs[0]].shape, np.int16)}
    r = run_batch([(EINSUM.read_bytes(), x)], "tflm")[0]
    assert isinstance(r, Aborted) and "allocate" in r.message, "TFLite Micro now runs it: compare it"
