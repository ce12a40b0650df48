"""onnxruntime-arm64 against ONNX Runtime 1.32.0's own aarch64 build, under qemu user-mode emulation
(refinterp/dumps/arm64_env.py; `make test` builds the environment when the machine allows):
0 differing elements on every integer tensor.

* Single-op sweeps: every ORT-oracle case of test_ort_quant_ops.py (QLinearConv / MatMul / Gemm,
  QLinearAdd / Mul over every code pair, LUT ops, pools, concat, softmax, MatMulInteger,
  ConvInteger, DynamicQuantizeLinear, QuantizeLinear, exact ties), graph outputs compared.
* Whole models: quantize_static QDQ (int8) and QOperator (u8s8, s8s8) models and the converter
  fixtures, every integer node output exposed as a graph output (as in test_ort_quant_models.py),
  at ORT's default optimisation level, three inputs each.
On Cortex-A76 (dot-product) and Cortex-A53 (no dot-product: MLAS's other u8/s8 GEMM kernels).
The x86 scheme differs from these oracles on the sweeps, so the tests can fail.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime.quantization")

import refinterp  # noqa: E402
from tests.conformance import test_ort_quant_models as qm  # noqa: E402
from tests.conformance import test_ort_quant_ops as qops  # noqa: E402
from tests.conformance._int_oracle import Aborted, arm64_skip_reason  # noqa: E402
from tests.conformance._ort_arm64 import harvest, run_ort_arm64  # noqa: E402

_WHY = arm64_skip_reason("opt-arm64")
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

CORES = ("a76", "a53")
MODEL_FORMATS = ("qdq_s8s8", "qop_u8s8", "qop_s8s8")


def _mkdir(p: Path) -> Path:
    p.mkdir(parents=True)
    return p


class _State:
    def __init__(self) -> None:
        self._cases: dict[str, list] | None = None
        self._oracle: dict[str, dict] = {}
        self._ours: dict[tuple, dict] = {}

    def cases(self) -> dict[str, list]:
        """family -> [(case id, model bytes, feeds, compared names or None for all outputs)]"""
        if self._cases is None:
            ops = [(cid, m, f, None) for cid, m, f in harvest(qops)]
            models = []
            with tempfile.TemporaryDirectory(prefix="ort_arm64_models_") as tmp:
                paths = [(f"{n}_{fmt}", qm._quantize(make(), _mkdir(Path(tmp) / f"{n}_{fmt}"), fmt))
                         for n, make in qm._MODELS.items() for fmt in MODEL_FORMATS]
                paths += [(f"fixture:{p.stem}", p) for p in sorted(qm.FIXTURES.glob("*.onnx")) if "float" not in p.name]
                for name, path in paths:
                    model, names = qm._int_tensors(onnx.load(str(path)))
                    for seed in (0, 1, 2):
                        models.append((f"{name}#seed{seed}", model.SerializeToString(), qm._feeds(path, seed), names))
            self._cases = {"OPS": ops, "MODELS": models}
        return self._cases

    def oracle(self, core: str, family: str) -> list:
        if core not in self._oracle:
            flat = [(m, f) for fam in ("OPS", "MODELS") for _, m, f, _ in self.cases()[fam]]
            res = iter(run_ort_arm64(flat, core))
            self._oracle[core] = {fam: [next(res) for _ in self.cases()[fam]] for fam in ("OPS", "MODELS")}
        return self._oracle[core][family]

    def ours(self, scheme: str, cid: str, model: bytes, feeds) -> dict:
        key = (scheme, cid)
        if key not in self._ours:
            with tempfile.TemporaryDirectory(prefix="ort_arm64_ours_") as tmp:
                p = Path(tmp) / "m.onnx"
                p.write_bytes(model)
                self._ours[key] = refinterp.Session(refinterp.load(p), scheme).run(feeds, capture="all")
        return self._ours[key]


STATE = _State()


def _outcome(family: str, core: str, scheme: str) -> tuple[int, int, int, list[str], list[str]]:
    compared = diff = 0
    notes, aborts = [], []
    cases = STATE.cases()[family]
    for (cid, model, feeds, names), res in zip(cases, STATE.oracle(core, family)):
        if isinstance(res, Aborted):
            aborts.append(f"{cid}: {res.message}")
            continue
        ours = STATE.ours(scheme, cid, model, feeds)
        for name in (names if names is not None else list(res)):
            want, got = np.asarray(res[name]), np.asarray(ours[name])
            compared += 1
            d = int(np.sum(want.astype(np.float64) != got.astype(np.float64))) if want.shape == got.shape \
                else max(want.size, got.size)
            if d:
                notes.append(f"{cid} {name}: {d}/{want.size}")
            diff += d
    return len(cases), compared, diff, notes, aborts


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("family", ["OPS", "MODELS"])
def test_bit_exact(family, core):
    n, compared, diff, notes, aborts = _outcome(family, core, "onnxruntime-arm64")
    print(f"\n{family} [onnxruntime-arm64] vs onnxruntime 1.32.0 aarch64 ({core}): {n} cases, {compared} tensors, "
          f"{diff} differing, {len(aborts)} aborts")
    assert not aborts, "oracle failed (finding): " + " || ".join(aborts[:3])
    assert diff == 0, " || ".join(notes[:6])
    assert compared >= n


def test_x86_scheme_differs():
    """onnxruntime-cpu (x86: float QLinearAdd, separate multiply and add) differs from the aarch64
    build on the single-op sweeps.  (On the MODELS family both schemes give the aarch64 results: their
    QDQ units and QLinear ops never meet the inputs where the two builds differ.)"""
    _, compared, diff, _, _ = _outcome("OPS", "a76", "onnxruntime-cpu")
    print(f"\nOPS [onnxruntime-cpu] vs aarch64: {compared} tensors, {diff} differing")
    assert diff > 0


def test_mul_fma_matters(tmp_path):
    """QLinearMul's NEON kernel computes ratio * product + zero point in one FMA."""
    f = tmp_path / "mul-sse.yaml"
    f.write_text("name: mul-sse\nextends: onnxruntime-arm64\nops:\n  Mul: {impl: sse}\n")
    _, _, diff, notes, _ = _outcome("OPS", "a76", str(f))
    assert diff > 0 and all("QLinearMul" in n for n in notes), notes[:3]


def test_optimized_graph_capture_matches(tmp_path):
    """Every tensor of ORT's *optimized* aarch64 graph that maps to the model (capture at level all:
    fused QLinear units, as deployed) and every final output, for the QDQ models: 0 differences."""
    from refinterp.dumps.capture import capture_onnxruntime
    from refinterp.dumps.capture_arm64 import EmulatedOrt

    checked = 0
    with tempfile.TemporaryDirectory(prefix="ort_arm64_opt_") as tmp:
        for name, make in qm._MODELS.items():
            path = qm._quantize(make(), _mkdir(Path(tmp) / name), "qdq_s8s8")
            graph = refinterp.load(path)
            feeds = qm._feeds(path, 0)
            got = capture_onnxruntime(graph, feeds, "all", EmulatedOrt("a76"))
            ours = refinterp.Session(graph, "onnxruntime-arm64").run(feeds, capture="all")
            outs = set(graph.outputs)
            assert outs <= set(got), f"{name}: final outputs missing from the capture"
            for t, v in got.items():
                if np.asarray(v).dtype.kind in "iu" or t in outs:
                    assert np.array_equal(np.asarray(v), np.asarray(ours[t])), f"{name} {t}"
                    checked += 1
    print(f"\n{checked} tensors of the aarch64 optimized graphs equal")
    assert checked >= 30
