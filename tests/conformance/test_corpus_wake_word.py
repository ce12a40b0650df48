"""Published streaming keyword-spotting models (tests/corpus/micro_wake_word: microWakeWord's int8
models as the pymicro-wakeword package ships them): every tensor equals the runtime's.

The models keep their streaming state in resource variables (VAR_HANDLE / READ_VARIABLE /
ASSIGN_VARIABLE, initialised by a CALL_ONCE subgraph) and run int8 CONV_2D, DEPTHWISE_CONV_2D,
FULLY_CONNECTED, LOGISTIC, STRIDED_SLICE, SPLIT_V, CONCATENATION.  Against LiteRT (REF, OPT, XNNPACK)
six consecutive runs are compared, every tensor of every run, so the state carried between runs is
checked too; TFLite Micro and the aarch64 builds run one step each (``run_batch``).

Found with them: reading a resource handle's "value" makes LiteRT 2.3 and TFLite Micro crash
(SIGSEGV); refinterp's capture and the oracle harnesses skip handles (they hold no values).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from tests.conformance._int_oracle import Aborted, arm64_skip_reason, compare, run_batch  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "micro_wake_word"
MODELS = sorted(p.name for p in CORPUS.glob("*.tflite"))
RUNS = 6
STREAMING = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack"}
ONE_STEP = {"tflm": "tflite-micro", "opt-arm64": "tflite-optimized-arm64", "xnnpack-arm64": "tflite-xnnpack-arm64",
            "opt-arm64-2.14": "tflite-optimized-arm64-2.14"}

CHILD = r"""
import sys
import numpy as np
from ai_edge_litert.interpreter import Interpreter, OpResolverType
path, resolver, runs, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
kind = {"ref": OpResolverType.BUILTIN_REF, "opt": OpResolverType.BUILTIN_WITHOUT_DEFAULT_DELEGATES,
        "xnnpack": OpResolverType.BUILTIN}[resolver]
it = Interpreter(model_path=path, experimental_preserve_all_tensors=True, experimental_op_resolver_type=kind,
                 num_threads=1)
it.allocate_tensors()
inp = it.get_input_details()[0]
arrays = {}
for k in range(runs):
    it.set_tensor(inp["index"], np.random.default_rng(k).integers(-128, 128, inp["shape"]).astype(np.int8))
    it.invoke()
    for d in it.get_tensor_details():
        if np.dtype(d["dtype"]).kind in "iuf":  # resource handles: reading one crashes LiteRT
            try:
                arrays[f"{k}|{d['index']}"] = np.array(it.get_tensor(d["index"]))
            except ValueError:
                pass
np.savez(out, **arrays)
"""


def _feed(g, k: int) -> dict[str, np.ndarray]:
    shape = g.tensors[g.inputs[0]].shape
    return {g.inputs[0]: np.random.default_rng(k).integers(-128, 128, shape).astype(np.int8)}


def _names(g) -> dict[int, str]:
    """LiteRT tensor index -> refinterp tensor name (the loader keeps subgraph 0's order)."""
    from tests.conformance._int_oracle import _names as names

    return dict(enumerate(names(Path(g.path).read_bytes())))


@pytest.mark.parametrize("resolver", list(STREAMING))
@pytest.mark.parametrize("name", MODELS)
def test_streaming_runs_every_tensor(name, resolver, tmp_path):
    path = CORPUS / name
    out = tmp_path / "o.npz"
    r = subprocess.run([sys.executable, "-c", CHILD, str(path), resolver, str(RUNS), str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"finding: LiteRT ({resolver}) failed or aborted on {name}: {r.stderr[-500:]}"
    g = refinterp.load(path)
    names = _names(g)
    s = refinterp.Session(g, STREAMING[resolver])
    compared = differing = 0
    with np.load(out, allow_pickle=False) as z:
        want: dict[int, dict[str, np.ndarray]] = {}
        for key in z.files:
            k, idx = key.split("|")
            if int(idx) in names:  # beyond the model's tensors: the runtime's own scratch tensors
                want.setdefault(int(k), {})[names[int(idx)]] = z[key]
    for k in range(RUNS):
        got = s.run(_feed(g, k), capture="all")
        for tname, w in want[k].items():
            if tname not in got:
                continue
            v = np.asarray(got[tname])
            assert v.shape == w.shape, f"run {k} {tname}: shape {v.shape} vs {w.shape}"
            compared += 1
            if not np.array_equal(v, w):
                differing += 1
                print(f"run {k} {tname}: {int(np.sum(v != w))} of {w.size} differ")
    print(f"\n{name} [{STREAMING[resolver]}]: {compared} tensors over {RUNS} runs, {differing} differing")
    assert compared >= RUNS * 30 and differing == 0
    assert len(s.variables) >= 6  # the streaming buffers carried between runs


_ONE: dict[str, list] = {}


@pytest.mark.parametrize("backend", list(ONE_STEP))
@pytest.mark.parametrize("name", MODELS)
def test_one_step_every_tensor(name, backend):
    if "arm64" in backend and arm64_skip_reason(backend):
        pytest.skip(arm64_skip_reason(backend))
    if backend not in _ONE:
        jobs = [((CORPUS / m).read_bytes(), _feed(refinterp.load(CORPUS / m), 0)) for m in MODELS]
        _ONE[backend] = run_batch(jobs, backend)
    res = _ONE[backend][MODELS.index(name)]
    assert not isinstance(res, Aborted), f"finding: {backend} failed on {name}: {res.message}"
    g = refinterp.load(CORPUS / name)
    ours = refinterp.Session(g, ONE_STEP[backend]).run(_feed(g, 0), capture="all")
    tensors, diff, notes = compare(res, ours)
    print(f"\n{name} [{ONE_STEP[backend]}] vs {backend}: {tensors} tensors, {diff} differing")
    assert tensors >= 30 and diff == 0, "; ".join(n for n in notes if "missing" not in n)[:600]


@pytest.mark.parametrize("runtime", ["litert-ref", "litert-xnnpack", "tflm"])
def test_capture_then_diff(runtime, tmp_path):
    """The CLI on a model with resource handles: the capture used to die (SIGSEGV) reading them, and
    diff listed them as missing tensors."""
    model = CORPUS / "okay_nabu.tflite"
    dump = tmp_path / "d.npz"
    cli = [sys.executable, "-m", "refinterp"]
    r = subprocess.run(cli + ["capture", "--runtime", runtime, "--random-inputs", "0", "--out", str(dump), str(model)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"capture exit {r.returncode}: {r.stderr[-800:]}"
    scheme = {"litert-ref": "tflite-reference", "litert-xnnpack": "tflite-xnnpack", "tflm": "tflite-micro"}[runtime]
    r = subprocess.run(cli + ["diff", str(model), "--against", str(dump), "--scheme", scheme],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-800:] + r.stderr[-800:]
    assert "52 model tensors (exact 52)" in r.stdout, r.stdout[-800:]
