"""com.microsoft.DynamicQuantizeLSTM (kernels/onnxruntime/dq_lstm.py) under ``onnxruntime-cpu`` against
onnxruntime 1.32.0, bit for bit: float LSTMs quantized by ORT's own ``quantize_dynamic`` (int8 / uint8
weights, per tensor / per column), forward / reverse / bidirectional, peepholes with clip,
input_forget, sequence_lens, Y omitted, hidden sizes on both sides of ORT's batch-split rule, batches
of 1, 3 and 6 (one chunk, and the rows split over the cores)."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import refinterp  # noqa: E402
from refinterp.kernels.onnxruntime.float_conv import physical_cores  # noqa: E402

T_LEN = 7
WEIGHTS = {"int8": (quantization.QuantType.QInt8, False), "uint8": (quantization.QuantType.QUInt8, False),
           "int8-per-column": (quantization.QuantType.QInt8, True),
           "uint8-per-column": (quantization.QuantType.QUInt8, True)}
CASES = {
    "forward": dict(I=8, H=16),
    "reverse": dict(I=8, H=16, direction="reverse"),
    "bidirectional": dict(I=12, H=20, direction="bidirectional"),
    "hidden-300": dict(I=8, H=300),  # H > 256: ORT splits the batch only above 4 rows
    "peepholes-clip": dict(I=8, H=16, peep=True, clip=2.0),
    "no-Y-sequence-lens": dict(I=8, H=16, y_out=False, seq_lens=True),
    "bidirectional-sequence-lens": dict(I=8, H=16, seq_lens=True, direction="bidirectional"),
    "input-forget": dict(I=8, H=16, input_forget=1),
}


def _float_lstm(I, H, direction="forward", peep=False, clip=None, y_out=True, seq_lens=False, input_forget=0, seed=0):
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    inits = [numpy_helper.from_array(rng.normal(0, 0.4, (d, 4 * H, I)).astype(np.float32), "W"),
             numpy_helper.from_array(rng.normal(0, 0.4, (d, 4 * H, H)).astype(np.float32), "R"),
             numpy_helper.from_array(rng.normal(0, 0.2, (d, 8 * H)).astype(np.float32), "B")]
    ins = ["X", "W", "R", "B", "sl" if seq_lens else "", "", "", "P" if peep else ""]
    if peep:
        inits.append(numpy_helper.from_array(rng.normal(0, 0.3, (d, 3 * H)).astype(np.float32), "P"))
    while not ins[-1]:
        ins.pop()
    attrs = dict(hidden_size=H, direction=direction, **({"clip": clip} if clip else {}),
                 **({"input_forget": 1} if input_forget else {}))
    outs = ["Y" if y_out else "", "Yh", "Yc"]
    g_in = [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", I])]
    if seq_lens:
        g_in.append(helper.make_tensor_value_info("sl", TensorProto.INT32, ["N"]))
    g = helper.make_graph([helper.make_node("LSTM", ins, outs, **attrs)], "g", g_in,
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs if o], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])
    m.ir_version = 8
    return m


def _quantized(tmp_path, case: str, weights: str):
    src, dst = tmp_path / "float.onnx", tmp_path / "dynamic.onnx"
    onnx.save(_float_lstm(**CASES[case], seed=len(case)), str(src))
    wt, per_channel = WEIGHTS[weights]
    quantization.quantize_dynamic(str(src), str(dst), weight_type=wt, per_channel=per_channel)
    ops = [n.op_type for n in onnx.load(str(dst)).graph.node]
    assert ops == ["DynamicQuantizeLSTM"], ops
    return dst


def _feeds(case: str, batch: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed + batch)
    feeds = {"X": rng.normal(0, 1, (T_LEN, batch, CASES[case]["I"])).astype(np.float32)}
    if CASES[case].get("seq_lens"):
        # without Y, a row of length 0 makes ORT read memory it never wrote (see the finding below)
        low = 1 if batch == 1 or not CASES[case].get("y_out", True) else 0
        feeds["sl"] = rng.integers(low, T_LEN + 1, batch).astype(np.int32)
    return feeds


def _ort(path, feeds) -> dict:
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return dict(zip([o.name for o in sess.get_outputs()], sess.run(None, feeds)))


def _bits(a):
    return np.ascontiguousarray(a, np.float32).view(np.uint32)


@pytest.mark.parametrize("weights", sorted(WEIGHTS))
@pytest.mark.parametrize("case", sorted(CASES))
def test_dynamic_quantize_lstm_bit_exact(tmp_path, case, weights):
    path = _quantized(tmp_path, case, weights)
    sess = refinterp.Session(refinterp.load(str(path)), "onnxruntime-cpu")
    for batch in (1, 3, 6):
        feeds = _feeds(case, batch)
        want = _ort(path, feeds)
        got = sess.run(feeds)
        for name, w in want.items():
            assert np.array_equal(_bits(got[name]), _bits(w)), \
                f"batch {batch}, {name}: {np.mean(_bits(got[name]) != _bits(w)):.2%} of the values differ"


def test_batch_split_and_dynamic_quantization_are_needed(tmp_path):
    """The batch rows ORT splits over its threads quantize apart (batch 3, two cores: rows 0-1 and 2),
    so one chunk differs; and a float LSTM on the dequantized weights differs everywhere."""
    if physical_cores() < 2:
        pytest.skip("one physical core: ORT does not split the batch here")
    path = _quantized(tmp_path, "forward", "int8")
    feeds = _feeds("forward", 3)
    want = _ort(path, feeds)["Y"]
    one_chunk = refinterp.Session(refinterp.load(str(path)), "float32").run(feeds)["Y"]  # the ``float`` variant
    assert not np.array_equal(_bits(one_chunk), _bits(want))
    fl = _ort(tmp_path / "float.onnx", feeds)["Y"]
    assert np.mean(_bits(fl) != _bits(want)) > 0.5


def test_finding_ort_reads_stale_memory_for_empty_rows_without_y(tmp_path):
    """Finding: without the Y output, a row of sequence length 0 feeds ORT's never-written Y_h buffer
    into the next steps' quantization of its chunk, so one session's answer to one input changes after
    other runs.  refinterp assumes a fresh (zeroed) buffer, as in ORT's first run in a fresh process."""
    if physical_cores() < 2:
        pytest.skip("one physical core: the empty row shares no chunk here")
    path = _quantized(tmp_path, "no-Y-sequence-lens", "int8")
    rng = np.random.default_rng(106)
    feeds = {"X": rng.normal(0, 1, (T_LEN, 6, 8)).astype(np.float32), "sl": np.array([1, 1, 4, 0, 6, 7], np.int32)}
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    first = sess.run(None, feeds)[0]  # equals refinterp's in a fresh process (not asserted: memory this
    # process freed before may already be stale)
    for k in range(5):
        sess.run(None, {"X": np.random.default_rng(k).normal(0, 50, (T_LEN, 6, 8)).astype(np.float32),
                        "sl": np.full(6, T_LEN, np.int32)})
    again = sess.run(None, feeds)[0]
    assert not np.array_equal(_bits(again), _bits(first)), \
        "ONNX Runtime now answers the same: it no longer reads stale memory here (update dq_lstm.py's note)"
