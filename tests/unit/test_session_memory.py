"""A dropped Session frees what it built: plans and everything kernels derived from them.

Two checks per integer family: every plan object of a dropped Session is garbage (nothing outside
the Session keeps one alive), and the process RSS after 20 build/run/drop cycles stays within a
small bound of the RSS after the first.  Before plans owned their prepared data, module-level
caches keyed by ``id(plan)`` kept every plan (and its packed weights) for ever.
"""
from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import subprocess
import sys
import weakref
from pathlib import Path

import numpy as np
import pytest

import refinterp
from refinterp.ir import storage_dtype
from refinterp.kernels.prepared import MAX_SHAPES, SLOT, per_shape, plan_fields, prepared

ROOT = Path(__file__).resolve().parents[2]
TFLITE = ROOT / "refinterp/models/demo_int8.tflite"
ONNX_QDQ = ROOT / "tests/fixtures/onnx/small_cnn_qdq_s8s8.onnx"
FAMILIES = [("tflite-reference", TFLITE), ("tflite-optimized", TFLITE), ("tflite-xnnpack", TFLITE),
            ("onnxruntime-cpu", ONNX_QDQ), ("fbgemm", ONNX_QDQ)]
# glibc keeps some freed memory in its arenas; a leak of the old kind was ~0.9 MiB per Session of the
# demo model (17 MiB over 20) and ~43 MiB per Session of MobileNetV2-224
RSS_BOUND_MIB = 6.0


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2 ** 20


def _feeds(graph) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    out = {}
    for name in graph.inputs:
        info = graph.tensors[name]
        dt = storage_dtype(info.dtype)
        shape = [d if d is not None and d > 0 else 1 for d in info.shape]
        if dt.kind in "iu":
            ii = np.iinfo(dt)
            out[name] = rng.integers(ii.min, int(ii.max) + 1, shape).astype(dt)
        else:
            out[name] = rng.standard_normal(shape).astype(dt)
    return out


def _plan_refs(sess) -> list[weakref.ref]:
    return [weakref.ref(st.plan) for st in sess.steps]  # every plan is a dataclass instance


@pytest.mark.parametrize("scheme,model", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_dropped_session_frees_its_plans(scheme, model):
    g = refinterp.load(str(model))
    feeds = _feeds(g)
    sess = refinterp.Session(g, scheme)
    sess.run(feeds)
    sess.run(feeds)
    refs = _plan_refs(sess)
    assert refs, "no weak-referenceable plan: the check would be empty"
    if scheme != "fbgemm":  # (the torch-engine kernels derive nothing at run time)
        assert any(SLOT in getattr(r(), "__dict__", {}) for r in refs), "no plan holds prepared data"
    del sess
    gc.collect()
    alive = [r() for r in refs if r() is not None]
    assert not alive, f"{len(alive)} plans of a dropped Session still alive, e.g. {type(alive[0]).__name__}"


def _grown_over_dropped_sessions(scheme: str, model: str) -> float:
    """RSS growth (MiB) over 20 build / run / drop cycles after two warm-up cycles, in this process."""
    g = refinterp.load(model)
    feeds = _feeds(g)

    def cycle():
        s = refinterp.Session(g, scheme)
        s.run(feeds)
        del s
        gc.collect()

    cycle()
    cycle()
    first = _rss_mib()
    for _ in range(20):
        cycle()
    return _rss_mib() - first


def _grown_over_runs(scheme: str, model: str) -> float:
    """RSS growth (MiB) over 200 runs of one Session after 5 warm-up runs, in this process."""
    g = refinterp.load(model)
    feeds = _feeds(g)
    s = refinterp.Session(g, scheme)
    for _ in range(5):
        s.run(feeds)
    first = _rss_mib()
    for _ in range(200):
        s.run(feeds)
    return _rss_mib() - first


def _in_fresh_process(fn: str, scheme: str, model: Path) -> float:
    """``fn(scheme, model)`` in a new interpreter: the RSS is then this check's alone, and gc.collect() walks a
    small heap (in a test worker's heap each collection took about 1 s)."""
    code = f"import sys; from tests.unit.test_session_memory import {fn}; print({fn}(sys.argv[1], sys.argv[2]))"
    r = subprocess.run([sys.executable, "-c", code, scheme, str(model)], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    return float(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("scheme,model", FAMILIES, ids=[f[0] for f in FAMILIES])
def test_rss_flat_over_dropped_sessions(scheme, model):
    grown = _in_fresh_process("_grown_over_dropped_sessions", scheme, model)
    assert grown < RSS_BOUND_MIB, f"{scheme}: RSS grew {grown:.1f} MiB over 20 dropped Sessions"


@pytest.mark.parametrize("scheme,model", [FAMILIES[0], FAMILIES[3]], ids=["tflite-reference", "onnxruntime-cpu"])
def test_rss_flat_over_runs_of_one_session(scheme, model):
    grown = _in_fresh_process("_grown_over_runs", scheme, model)
    assert grown < RSS_BOUND_MIB, f"{scheme}: RSS grew {grown:.1f} MiB over 200 runs of one Session"


class _Plan:
    def __init__(self, v):
        self.v = v


@dataclasses.dataclass(frozen=True)
class _Frozen:
    v: int


def test_prepared_is_built_once_per_key_and_owned_by_the_plan():
    calls = []
    p = _Plan(3)

    def build(plan, k):
        calls.append(k)
        return plan.v * k

    assert prepared(p, ("a", 2), build, 2) == 6
    assert prepared(p, ("a", 2), build, 2) == 6
    assert prepared(p, ("a", 5), build, 5) == 15
    assert calls == [2, 5]
    d = _Frozen(1)
    assert prepared(d, "k", lambda plan: plan.v + 1) == 2
    assert SLOT in vars(d) and plan_fields(d) == {"v": 1}


def test_copied_plan_never_sees_its_parents_prepared_data():
    d = _Frozen(1)
    assert prepared(d, "k", lambda plan: plan.v) == 1
    child = dataclasses.replace(d, v=7)
    assert prepared(child, "k", lambda plan: plan.v) == 7
    clone = copy.copy(d)  # carries the parent's slot
    assert prepared(clone, "k", lambda plan: -1) == -1
    p = _Plan(1)
    prepared(p, "k", lambda plan: plan.v)
    q = copy.copy(p)
    q.v = 9
    assert prepared(q, "k", lambda plan: plan.v) == 9
    assert prepared(p, "k", lambda plan: plan.v) == 1


def test_pickled_plan_drops_prepared_data():
    d = _Frozen(1)
    prepared(d, "k", lambda plan: (lambda: 0))  # a closure: not picklable
    back = pickle.loads(pickle.dumps(d))
    assert back.v == 1
    assert prepared(back, "k", lambda plan: "fresh") == "fresh"


def test_per_shape_data_is_bounded():
    p = _Plan(0)
    built = []
    for n in range(100):
        per_shape(p, "geo", (n, 4), lambda plan, n=n: built.append(n) or n)
    table = p.__dict__[SLOT].data[("shapes", "geo")]
    assert len(table) == MAX_SHAPES and list(table) == [(n, 4) for n in range(100 - MAX_SHAPES, 100)]
    assert per_shape(p, "geo", (99, 4), lambda plan: -1) == 99  # kept: not rebuilt
    assert len(built) == 100
