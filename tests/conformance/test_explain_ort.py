"""``refinterp diff --explain`` on ONNX Runtime dumps: ``best_scheme`` is ``onnxruntime-cpu`` when the
dump can tell the engines apart, and the ambiguity is reported when it cannot.

The discriminating model is QOperator (QLinear kernels run by a plain ORT session exactly as by the
capture) with ops whose arithmetic really differs between engines, fed inputs that reach the
differences (the single-op models and sweeps of test_ort_quant_ops.py, chained):
  QLinearConv  output channel 0: multiplier 2^-1, odd output zero point, codes near the input zero
               point -> exact .5 ties (ORT: RNE, then + zp; onnx.reference: RNE of v + zp);
               channel 1: bias 2^25 + 2^17 with multiplier 2^-18 (f32(acc) rounds to a multiple of 4);
               channels 2-3: full-range u8 x s8 codes (int16 pair saturation of onnxruntime-cpu-avx2)
  QLinearAdd   every (a, b) code pair, power-of-two scales, odd zero points (ORT: float32 FMA on raw
               codes with the zero point inside the rounding; ARM fixed point / torch / TVM differ)
  QLinearMul   rules out fbgemm / qnnpack again (torch requantization of the product);
  QLinearSigmoid, QLinearLeakyRelu  chained after it; their tables agree across the engines on these
               inputs (observed with onnxruntime 1.31.1): they add no evidence, only realism.
Observed: conv output exact under onnxruntime-cpu/-arm64, fbgemm, qnnpack only; add output under
onnxruntime-cpu, onnx-reference and the -avx2 scheme among the ORT-like ones; only onnxruntime-cpu both.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from refinterp import load  # noqa: E402
from refinterp.cli.main import main  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_ort_quant_ops import _all_pairs, _ort_run  # noqa: E402

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "small_cnn_qop_u8s8.onnx"


def _discriminating_model(tmp_path, rng):
    u8 = TensorProto.UINT8
    w = rng.integers(-2, 3, (4, 4, 3, 3)).astype(np.int8)
    w[2:] = rng.integers(-128, 128, (2, 4, 3, 3)).astype(np.int8)
    inits = dict(xs=np.float32(1.0), xz=np.uint8(128), w=w,
                 ws=np.float32([0.5, 2.0 ** -18, 2.0 ** -11, 2.0 ** -11]), wz=np.zeros(4, np.int8),
                 cs=np.float32(1.0), cz=np.uint8(3), b=np.int32([3, (1 << 25) + (1 << 17), -5, 7]),
                 ps=np.float32(0.5), pz=np.uint8(1), qs=np.float32(0.25), qz=np.uint8(3),
                 as_=np.float32(0.5), az=np.uint8(5), ms=np.float32(0.5 * 20 * 0.5 * 0.25 / 0.0049),
                 mz=np.uint8(101), ss=np.float32(1 / 256), sz=np.uint8(0), ls=np.float32(0.0047),
                 lz=np.uint8(13))
    ms = "com.microsoft"
    nodes = [
        helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "cs", "cz", "b"], ["c"],
                         pads=[1, 1, 1, 1]),
        helper.make_node("QLinearAdd", ["p", "ps", "pz", "q", "qs", "qz", "as_", "az"], ["a"], domain=ms),
        helper.make_node("QLinearMul", ["a", "as_", "az", "q", "qs", "qz", "ms", "mz"], ["m"], domain=ms),
        helper.make_node("QLinearSigmoid", ["m", "ms", "mz", "ss", "sz"], ["s"], domain=ms),
        helper.make_node("QLinearLeakyRelu", ["s", "ss", "sz", "ls", "lz"], ["y"], domain=ms, alpha=0.15),
    ]
    xshape, pshape = [1, 4, 16, 16], [1, 1, 256, 256]
    g = helper.make_graph(
        nodes, "discriminating",
        [helper.make_tensor_value_info("x", u8, xshape), helper.make_tensor_value_info("p", u8, pshape),
         helper.make_tensor_value_info("q", u8, pshape)],
        [helper.make_tensor_value_info("c", u8, None), helper.make_tensor_value_info("y", u8, None)],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid(ms, 1)])
    m.ir_version = 10
    path = tmp_path / "discriminating.onnx"
    onnx.save(m, str(path))
    x = rng.integers(0, 256, xshape).astype(np.uint8)
    x[..., :8, :] = (128 + rng.integers(-3, 4, (1, 4, 8, 16))).astype(np.uint8)  # tie-prone rows
    p, q = _all_pairs(np.uint8)
    return m, str(path), {"x": x, "p": p.reshape(pshape), "q": q.reshape(pshape)}


def _capture_and_explain(tmp_path, path, feeds):
    np.savez(tmp_path / "in.npz", **feeds)
    p = subprocess.run([sys.executable, "-m", "refinterp", "capture", path, "--runtime", "onnxruntime",
                        "--inputs", str(tmp_path / "in.npz"), "--out", str(tmp_path / "dump")],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    out = tmp_path / "r.json"
    # the diff runs under float32, so its own scheme gives no hint to the tie-break
    rc = main(["diff", path, "--scheme", "float32", "--against", str(tmp_path / "dump"), "--inputs",
               str(tmp_path / "in.npz"), "--explain", "--json", str(out), "--quiet"])
    assert rc in (0, 1)
    return json.loads(out.read_text())


def _explaining_everything(rep) -> set[str]:
    """Built-in schemes that reproduce every re-run tensor of the dump exactly."""
    ex = rep["explain"]
    per = [t["explanation"] for t in rep["tensors"]
           if t.get("explanation") and t["explanation"].get("op") != "Input"]
    assert per
    return {s["name"] for s in ex["schemes"] if s["built_in"]
            and all(s["name"] in e["schemes_exact"] for e in per)}


def test_discriminating_qoperator_dump_names_onnxruntime_cpu_alone(tmp_path):
    m, path, feeds = _discriminating_model(tmp_path, np.random.default_rng(0))
    rep = _capture_and_explain(tmp_path, path, feeds)
    ex = rep["explain"]
    assert _explaining_everything(rep) == {"onnxruntime-cpu"}, ex["schemes"]
    assert rep["best_scheme"] == "onnxruntime-cpu"
    assert ex["equally_explained_by"] == []
    # the dump is what a plain ORT session computes (the capture's extra outputs change nothing)
    from refinterp.dumps.npydir import read_npy_dump

    dev = read_npy_dump(tmp_path / "dump").tensors
    for k, v in _ort_run(m, feeds).items():
        assert np.array_equal(np.asarray(dev[k].data).reshape(v.shape), v), k


def test_ambiguous_fixture_reports_the_tie(tmp_path):
    """On the small CNN fixture with a random input, several engines reproduce every tensor: the
    report must say so, and onnxruntime-cpu must be among them.  (Engines exact on every quantized
    tensor but not on the float ReduceMean, whose ORT order only the onnxruntime-cpu family models, rank
    below the tie.)"""
    g = load(str(FIXTURE))
    shape = tuple(d if d and d > 0 else 1 for d in g.tensors[g.inputs[0]].shape)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    rep = _capture_and_explain(tmp_path, str(FIXTURE), {g.inputs[0]: x})
    ex = rep["explain"]
    tied = ex["equally_explained_by"]
    assert "onnxruntime-cpu" in {rep["best_scheme"], *tied}
    assert rep["best_scheme"] not in tied
    counts = {s["name"]: (s["exact_tensors"], s["mismatching_elements"]) for s in ex["schemes"]}
    assert all(counts[n] == counts[rep["best_scheme"]] for n in tied)
    everything = _explaining_everything(rep)
    assert "onnxruntime-cpu" in everything and {rep["best_scheme"], *tied} <= everything
    assert tied  # the fixture cannot tell them apart: the tie must be reported
    main(["diff", str(FIXTURE), "--scheme", "float32", "--against", str(tmp_path / "dump"), "--inputs",
          str(tmp_path / "in.npz"), "--explain", "--html", str(tmp_path / "r.html"), "--quiet"])
    assert "equally explained by: " + ", ".join(tied) in (tmp_path / "r.html").read_text()
