"""A transformer block (tests/onnx_models.py ``transformer_block``: embedding Gather, LayerNormalization,
two-head attention, Gelu MLP, residuals) quantized the way ONNX Runtime recommends for the QNN EP, on
Qualcomm's HTP emulation (onnxruntime-qnn 2.7.0).  refinterp does not model the HTP's Softmax, nor at 16 bits
LayerNormalization, Gelu and the attention MatMuls (kernels/qnn_htp/MEASURED.md), so ``diff`` anchors those
nodes on the device's own values: every other quantized tensor the emulator produces must equal refinterp's
code for code, and ``--explain`` must name the HTP scheme."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.onnx_models import transformer_block

try:
    import onnxruntime_qnn  # noqa: F401
except ImportError:  # the wheel exists for linux x86-64 only
    pytestmark = pytest.mark.skip(reason="onnxruntime-qnn (Qualcomm's HTP emulation) is not installed")

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "refinterp", *args], capture_output=True, text=True,
                          timeout=600, cwd=ROOT)


def capture_and_diff(tmp_path, model: Path, feeds: Path, arch: str, before_diff=None) -> tuple[dict, list[str]]:
    """``capture --runtime qnn-htp`` then ``diff`` under qnn-htp-v<arch> (exit 0 required): the report's tensors
    by name and the model's QuantizeLinear outputs.  ``before_diff(dump)``: more checks between the two."""
    dump = tmp_path / "dump"
    r = _cli("capture", str(model), "--runtime", "qnn-htp", "--htp-arch", arch, "--inputs", str(feeds),
             "--out", str(dump))
    assert r.returncode == 0, r.stderr[-2000:]
    if before_diff is not None:
        before_diff(dump)
    r = _cli("diff", str(model), "--scheme", f"qnn-htp-v{arch}", "--against", str(dump), "--json",
             str(tmp_path / "d.json"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    by = {t["name"]: t for t in json.loads((tmp_path / "d.json").read_text())["tensors"]}
    return by, [n.output[0] for n in onnx.load(str(model)).graph.node if n.op_type == "QuantizeLinear"]


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    from onnxruntime.quantization import CalibrationDataReader, QuantType, quantize
    from onnxruntime.quantization.execution_providers.qnn import get_qnn_qdq_config

    d = tmp_path_factory.mktemp("htp_transformer")
    src = d / "f32.onnx"
    onnx.save(transformer_block("op"), str(src))

    def reader():
        class Reader(CalibrationDataReader):
            def __init__(self):
                self.it = iter([{"tokens": np.random.default_rng(i).integers(0, 20, (1, 8)).astype(np.int64)}
                                for i in range(8)])

            def get_next(self):
                return next(self.it, None)
        return Reader()

    made = {}
    for act, qt in (("uint8", QuantType.QUInt8), ("uint16", QuantType.QUInt16)):
        made[act] = d / f"qnn_{act}.onnx"
        quantize(str(src), str(made[act]), get_qnn_qdq_config(str(src), reader(), activation_type=qt))
    feeds = d / "in.npz"
    np.savez(feeds, tokens=np.random.default_rng(42).integers(0, 20, (1, 8)).astype(np.int64))
    return made, feeds


@pytest.mark.parametrize("arch,act", [("68", "uint8"), ("73", "uint8"), ("73", "uint16")])
def test_every_modelled_tensor_equals_the_emulator(tmp_path, quantized, arch, act):
    made, feeds = quantized
    model = made[act]

    def run_refuses(_):  # run: all or nothing, the first refusal named
        r = _cli("run", str(model), "--scheme", f"qnn-htp-v{arch}", "--inputs", str(feeds))
        first = "Softmax_19" if act == "uint8" else "LayerNormalization_3"
        assert r.returncode != 0 and first in r.stderr and "characterised" in r.stderr, r.stderr

    by, q_outputs = capture_and_diff(tmp_path, model, feeds, arch, run_refuses)
    dump = tmp_path / "dump"
    unmodelled = {n for n in q_outputs if by[n]["status"] == "unmodelled"}
    exact = {n for n in q_outputs if by[n]["status"] == "exact"}
    assert "softmax_19_QuantizeLinear_Output" in unmodelled
    assert unmodelled | exact == set(q_outputs), {n: by[n]["status"] for n in set(q_outputs) - unmodelled - exact}
    if act == "uint8":  # 8-bit: the Softmax; the attention MatMuls, LayerNormalization, Gelu, the rest exact
        assert unmodelled == {"softmax_19_QuantizeLinear_Output"} and len(exact) >= 30, (unmodelled, len(exact))
    else:
        assert len(exact) >= 20, (unmodelled, len(exact))
    r = _cli("diff", str(model), "--scheme", "onnxruntime-cpu", "--against", str(dump), "--explain", "--json",
             str(tmp_path / "x.json"), "--write-scheme", str(tmp_path / "fit.yaml"))
    assert r.returncode in (0, 1), r.stderr
    ex = json.loads((tmp_path / "x.json").read_text())["explain"]
    assert ex["best_scheme"] == f"qnn-htp-v{arch}"
    fit = ex["suggested_scheme"]  # verified on every node the scheme models; the stubs listed
    assert fit["extends"] == f"qnn-htp-v{arch}" and "Softmax_19" in fit["unmodelled"], fit
    if act == "uint8":
        assert fit["verified"] and fit["unmodelled"] == ["Softmax_19"], fit
