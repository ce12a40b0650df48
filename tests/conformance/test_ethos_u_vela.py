"""ethos-u55 / ethos-u85 against Arm's Vela 5.2.0: for every node of the test models that Vela maps to
the NPU, the rounding the scheme selects equals the rounding mode Vela writes into the command stream
for the NPU operation that produces the node's output (tests/conformance/_vela.py parses it).

Rounding modes only: Vela is a compiler, not a simulator, so values are not compared (the schemes
say so).  The nodes where the NPU computes differently from TFLite Micro are an explicit list
(``NPU_OWN``), checked both ways: each listed op really gets an NPU rescale of its own in these
models, and no op outside the list disagrees.
"""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ethosu.vela", reason="ethos-u-vela (Arm's Vela compiler) is not installed")

import refinterp  # noqa: E402
from refinterp.quant.requant import Rounding  # noqa: E402
from tests.conformance._vela import compile_roundings  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
MODELS = [ROOT / "fixtures" / "tflite" / f"{n}.tflite" for n in (
    "ops_zoo_int8", "mobilenet_v3_tiny_int8", "efficientnet_tiny_int8", "attention_block_int8", "depth_space_int8",
    "mobilenet_tiny_int16x8", "mobilenet_v1_tiny_int8", "mobilenet_v2_tiny_int8")] + \
    [ROOT / "corpus" / "tflite_micro" / f"{n}.tflite" for n in (
        "person_detect", "micro_speech_quantized", "keyword_scrambled", "hello_world_int8")] + \
    [ROOT.parent / "refinterp" / "models" / "demo_int8.tflite"]
ACCELERATORS = {"ethos-u55": "ethos-u55-128", "ethos-u85": "ethos-u85-256"}
# Ops whose NPU arithmetic is not TFLite Micro's (the schemes' notes): refinterp keeps TFLM's result.
NPU_OWN = {"Softmax", "AveragePool", "Sigmoid", "Tanh", "LeakyRelu"}
# refinterp rounding forms -> Vela's vocabulary (tests/conformance/_vela.py CANONICAL)
AS_VELA = {"double": "double", "mbqm64": "natural", "single": "natural"}


def scheme_rounding(plan) -> str | None:
    """The rounding of the node's output rescale in refinterp's plan (None: no rescale)."""
    rq = getattr(plan, "requant", None)
    r = getattr(rq, "rounding", None) if rq is not None else getattr(plan, "rounding", None)
    return AS_VELA.get(Rounding.parse(r).value, Rounding.parse(r).value) if r else None


@pytest.fixture(scope="module")
def compiled(tmp_path_factory):
    cache: dict = {}

    def get(model: Path, scheme: str):
        if (model, scheme) not in cache:
            out = tmp_path_factory.mktemp(f"vela_{model.stem}_{scheme}")
            cache[(model, scheme)] = compile_roundings(model, ACCELERATORS[scheme], out)
        return cache[(model, scheme)]
    return get


@pytest.mark.parametrize("scheme", sorted(ACCELERATORS))
def test_rounding_matches_vela(compiled, scheme):
    checked, own_seen, wrong = 0, set(), []
    for model in MODELS:
        sess = refinterp.Session(refinterp.load(model), scheme)
        vela = compiled(model, scheme)
        for i, step in enumerate(sess.steps):
            npu = vela.get(i)
            if not npu:
                continue  # left on the CPU (TFLite Micro): the scheme's kernel is TFLM's
            ours, theirs = scheme_rounding(step.plan), npu[-1][1]
            if step.node.op in NPU_OWN:
                own_seen.add(step.node.op)
                continue
            if ours is None:
                continue  # no rescale in refinterp's kernel (data movement at scale 1)
            checked += 1
            if ours != theirs:
                wrong.append(f"{model.name} node {i} ({step.node.op}): scheme {ours}, Vela {theirs} {npu}")
    print(f"\n{scheme}: {checked} rescaling nodes on the NPU agree with Vela 5.2.0; NPU-own ops seen: {sorted(own_seen)}")
    assert not wrong, "\n".join(wrong[:8])
    assert checked >= 200
    assert own_seen == NPU_OWN, f"listed ops not seen on the NPU: {sorted(NPU_OWN - own_seen)}"


def test_the_check_can_fail(compiled, tmp_path):
    """A scheme with single rounding on 8-bit convolutions disagrees with Vela's command stream."""
    f = tmp_path / "u55-single.yaml"
    f.write_text("name: u55-single\nextends: ethos-u55\nops:\n  Conv: {requant: {rounding: single}}\n")
    model = MODELS[-1]
    sess = refinterp.Session(refinterp.load(model), str(f))
    vela = compiled(model, "ethos-u55")
    bad = [i for i, st in enumerate(sess.steps) if st.node.op == "Conv" and vela.get(i)
           and scheme_rounding(st.plan) != vela[i][-1][1]]
    assert bad
