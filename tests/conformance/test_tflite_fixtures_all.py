"""Every converter-made integer fixture x every TFLite integer scheme vs its real runtime.

For each int8 / int16x8 model in tests/fixtures/tflite/ and each (scheme, oracle) pair
    tflite-reference  vs LiteRT BUILTIN_REF
    tflite-optimized  vs LiteRT BUILTIN_WITHOUT_DEFAULT_DELEGATES
    tflite-xnnpack    vs LiteRT BUILTIN (default XNNPACK delegate)
    tflite-micro      vs tflite-micro's Python interpreter with kPreserveAllTensors
two deterministic full-range inputs are run in ONE oracle child per oracle (LiteRT with
experimental_preserve_all_tensors=True), and every tensor the oracle exposes is compared at 0
differing elements: graph inputs and every op output against refinterp's ``capture="all"``,
constants (weights, biases) against what refinterp's loader read.  For XNNPACK the delegation
decision of every conv/FC/MEAN/... node must also match refinterp's plan.

An oracle that cannot load a model is a recorded finding, a strict xfail naming the exact
message: if the runtime starts accepting the model, the xfail turns into a failure.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")
pytest.importorskip("tflite_micro")

import refinterp  # noqa: E402
from tests.conformance._int_oracle import DELEGATED_KEY, Aborted, compare, run_batch  # noqa: E402
from tests.conformance._opt_xnn_driver import DECIDED, NEVER_DELEGATED  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
SCHEMES = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack",
           "tflm": "tflite-micro"}
SEEDS = (0, 1)

# (fixture, oracle) -> (finding, text the oracle must report).  The TFLM text is printed on its
# stderr (the Python exception only says "TFLM failed to allocate tensors").
KNOWN_GAPS = {
    ("depth_space_int8.tflite", "ref"): (
        "LiteRT BUILTIN_REF registers DEPTH_TO_SPACE only up to version 1 (no int8 v2)",
        "Didn't find op for builtin opcode 'DEPTH_TO_SPACE' version '2'"),
    ("attention_block_int8.tflite", "tflm"): (
        "tflite-micro has no GELU kernel",
        "Didn't find op for builtin opcode 'GELU'"),
}


def _integer_fixtures() -> list[str]:
    names = []
    for p in sorted(FIXTURES.glob("*.tflite")):
        g = refinterp.load(p)
        if all(g.tensors[n].dtype in ("int8", "int16") for n in g.inputs):
            names.append(p.name)
    return names


FIXTURE_NAMES = _integer_fixtures()


def _feeds(graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for n in graph.inputs:
        t = graph.tensors[n]
        info = np.iinfo(np.dtype(t.dtype))
        out[n] = rng.integers(info.min, info.max + 1, size=t.shape).astype(t.dtype)
    return out


class OracleGap(Exception):
    """The oracle refused the model with the expected message (a recorded finding)."""


_GRAPHS: dict[str, object] = {}
_ORACLE: dict[str, list] = {}


def _graph(name: str):
    if name not in _GRAPHS:
        _GRAPHS[name] = refinterp.load(FIXTURES / name)
    return _GRAPHS[name]


def _oracle(backend: str, name: str) -> list:
    """All fixtures x seeds of one oracle run in one child (cached for the module)."""
    if backend not in _ORACLE:
        cases = [((FIXTURES / f).read_bytes(), _feeds(_graph(f), s)) for f in FIXTURE_NAMES for s in SEEDS]
        _ORACLE[backend] = run_batch(cases, backend)
    k = FIXTURE_NAMES.index(name) * len(SEEDS)
    return _ORACLE[backend][k:k + len(SEEDS)]


def _tflm_stderr(name: str) -> str:
    """What tflite-micro prints while refusing a model (its exception carries no reason)."""
    code = ("import sys; from tflite_micro.python.tflite_micro import runtime as r; "
            "r.Interpreter.from_bytes(open(sys.argv[1], 'rb').read(), arena_size=1 << 22, "
            "intrepreter_config=r.InterpreterConfig.kPreserveAllTensors)")
    proc = subprocess.run([sys.executable, "-c", code, str(FIXTURES / name)], capture_output=True, text=True,
                          timeout=120)
    return proc.stdout + proc.stderr


def _check_gap(name: str, backend: str, aborted: Aborted) -> None:
    evidence = aborted.message + (_tflm_stderr(name) if backend == "tflm" else "")
    gap = KNOWN_GAPS.get((name, backend))
    if gap and gap[1] in evidence:
        raise OracleGap(f"{gap[0]}: {gap[1]}")
    pytest.fail(f"{name}: {backend} oracle failed unexpectedly: {evidence.strip()[-600:]}")


def _delegation_notes(sess, flags: np.ndarray) -> list[str]:
    notes = []
    for j, st in enumerate(sess.steps):
        node = sess.graph.nodes[j]
        if node.op in DECIDED | NEVER_DELEGATED:
            ours = getattr(st.plan, "executed_by", "") == "xnnpack"
            if bool(flags[j]) != ours:
                notes.append(f"node {j} ({node.op}) XNNPACK delegated={bool(flags[j])}, refinterp "
                             f"executed_by={getattr(st.plan, 'executed_by', '')!r}")
    return notes


def _compare_constants(graph, oracle: dict, ours: dict) -> tuple[int, list[str]]:
    """Oracle tensors refinterp does not produce must be constants read identically by the loader."""
    count, notes = 0, []
    for k, v in oracle.items():
        if k == DELEGATED_KEY or k in ours:
            continue
        t = graph.tensors.get(k)
        if t is None or t.const is None:
            notes.append(f"{k}: oracle tensor that refinterp neither produces nor holds as a constant")
            continue
        count += 1
        c = np.asarray(t.const)
        if c.shape != v.shape or c.dtype != v.dtype or not np.array_equal(c, v):
            notes.append(f"{k}: constant differs (oracle {v.dtype}{list(v.shape)}, loader {c.dtype}{list(c.shape)})")
    return count, notes


PARAMS = [pytest.param(f, b, id=f"{f.removesuffix('.tflite')}-{SCHEMES[b]}",
                       marks=[pytest.mark.xfail(strict=True, raises=OracleGap, reason=KNOWN_GAPS[(f, b)][0])]
                       if (f, b) in KNOWN_GAPS else [])
          for f in FIXTURE_NAMES for b in SCHEMES]


@pytest.mark.parametrize("name,backend", PARAMS)
def test_fixture_every_tensor_matches_oracle(name, backend):
    results = _oracle(backend, name)
    for r in results:
        if isinstance(r, Aborted):
            _check_gap(name, backend, r)
    graph = _graph(name)
    sess = refinterp.Session(graph, SCHEMES[backend])
    produced = {t for n in graph.nodes for t in n.outputs} | set(graph.inputs)
    for seed, oracle in zip(SEEDS, results):
        ours = sess.run(_feeds(graph, seed), capture="all")
        tensors, differing, notes = compare(oracle, ours)
        consts, cnotes = _compare_constants(graph, oracle, ours)
        notes = [n for n in notes if n] + cnotes
        if backend == "xnnpack":
            notes += _delegation_notes(sess, np.asarray(oracle[DELEGATED_KEY]))
        compared_ops = len(produced & set(ours) & set(oracle))
        elements = sum(v.size for k, v in ours.items() if k in oracle)
        print(f"\n{name} seed {seed} [{SCHEMES[backend]}] vs {backend}: {tensors} tensors ({compared_ops} inputs/op "
              f"outputs, {elements} elements) + {consts} constants, {differing} differing elements")
        assert differing == 0 and not notes, f"{name} seed {seed} vs {backend}: " + " || ".join(notes[:6])
        # every op output the model has must have been compared (nothing silently missing)
        assert compared_ops == len(produced), sorted(produced - set(ours) - set(oracle))[:5]


def _ok(backend: str, name: str) -> list[dict]:
    return [r for r in _oracle(backend, name) if not isinstance(r, Aborted)]


# MobileNetV1-tiny has ReLU6 fused into every conv, which hides the reference / optimized rounding
# difference (it only shows on negative ties): there BUILTIN_REF and the optimized kernels agree.
DISAGREE = [("mobilenet_v2_tiny_int8.tflite", "xnnpack"), ("mobilenet_v2_tiny_int8.tflite", "opt"),
            ("efficientnet_tiny_int8.tflite", "xnnpack"), ("efficientnet_tiny_int8.tflite", "opt"),
            ("mobilenet_v1_tiny_int8.tflite", "xnnpack"), ("mobilenet_tiny_int16x8.tflite", "opt")]


@pytest.mark.parametrize("name,backend", DISAGREE)
def test_oracles_disagree_so_the_comparison_can_fail(name, backend):
    """LiteRT's paths give different numbers on these models, so running the wrong scheme (here
    tflite-reference against XNNPACK / the optimized kernels) must show differing elements."""
    graph = _graph(name)
    ours = refinterp.Session(graph, "tflite-reference").run(_feeds(graph, SEEDS[1]), capture="all")
    _, differing, _ = compare(_ok(backend, name)[1], ours)
    assert differing > 0, f"{name}: tflite-reference equals the {backend} oracle; a wrong scheme would pass"
