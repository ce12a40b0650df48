"""Fuzz targets over real models: mutated TFLite / ONNX bytes (and ONNX protobuf fields) through
``refinterp.load``, ``Session(...)`` and ``session.run`` with random inputs (some with NaN / Inf).
Only RefinterpError subclasses may escape; see fuzz_harness.py for budgets and reproducibility."""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from fuzz_harness import TOTAL_WEIGHT, FIXTURES, expect_clean, mutate, mutations, run_target, target_seconds
from hypothesis import strategies as st

import refinterp
from refinterp.ir import storage_dtype

TFLITE = sorted((FIXTURES / "tflite").glob("*.tflite"))
ONNX = sorted((FIXTURES / "onnx").glob("*.onnx"))
TFLITE_SCHEMES = ("float32", "tflite-reference", "tflite-micro")
ONNX_SCHEMES = ("float32", "onnxruntime-cpu", "onnx-reference")
MAX_FEED_ELEMENTS = 1 << 18
WEIGHTS = {"tflite_bytes": 14, "tflite_fields": 26, "onnx_bytes": 8, "onnx_fields": 18}

_TMP = Path(tempfile.mkdtemp(prefix="refinterp-fuzz-models-"))
atexit.register(shutil.rmtree, _TMP, True)


def random_feeds(graph, seed: int, specials: bool) -> dict[str, np.ndarray] | None:
    """Feeds matching the declared inputs (unknown dims -> 1); None when no sensible feed exists."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for name in graph.inputs:
        info = graph.tensors[name]
        shape = tuple(1 if d is None or d < 0 else int(d) for d in (info.shape or ()))
        if int(np.prod([max(d, 1) for d in shape], dtype=np.float64)) > MAX_FEED_ELEMENTS:
            return None
        try:
            dt = storage_dtype(info.dtype)
        except TypeError:
            return None
        if dt.kind in "iu":
            info_ = np.iinfo(dt)
            x = rng.integers(info_.min, info_.max, size=shape, endpoint=True, dtype=dt)
        elif dt.kind == "f":
            x = rng.uniform(-2.0, 2.0, size=shape).astype(dt)
            if specials and x.size:
                flat = x.reshape(-1)
                idx = rng.integers(0, flat.size, size=min(flat.size, 3))
                flat[idx] = np.array([np.nan, np.inf, -np.inf], dt)[: idx.size]
        elif dt.kind == "b":
            x = rng.integers(0, 2, size=shape).astype(bool)
        else:
            return None
        feeds[name] = x
    return feeds


def load_and_run(path: Path, scheme: str, seed: int, specials: bool) -> None:
    graph = refinterp.load(path)
    session = refinterp.Session(graph, scheme=scheme)
    feeds = random_feeds(graph, seed, specials)
    if feeds is not None:
        session.run(feeds, capture="all")


def _model_check(target: str, seeds: list[Path], schemes: tuple[str, ...], suffix: str):
    def check(ex):
        k, muts, scheme_k, seed, specials = ex
        src = seeds[k % len(seeds)]
        data = mutate(src.read_bytes(), muts)
        path = _TMP / f"m{suffix}"
        path.write_bytes(data)
        scheme = schemes[scheme_k % len(schemes)]
        expect_clean(target, {f"{src.stem}.mutated{suffix}": data, "scheme.txt": scheme.encode()},
                     lambda: load_and_run(path, scheme, seed, specials))
    return check


def _example(muts):
    return st.tuples(st.integers(0, 63), muts, st.integers(0, 2), st.integers(0, 1000), st.booleans())


def _warm_up(seeds: list[Path], schemes: tuple[str, ...]) -> None:
    """Unmutated models first: numba compiles outside the per-example time limit.  A scheme may refuse
    a seed model outright (tflite-micro: no dynamic-range kernels), as its runtime does."""
    from refinterp.errors import UnsupportedOpError

    for p in seeds:
        for s in schemes:
            try:
                load_and_run(p, s, 0, True)
            except UnsupportedOpError:
                continue


def test_fuzz_tflite_bytes():
    _warm_up(TFLITE, TFLITE_SCHEMES)
    run_target("tflite_bytes", _example(mutations), _model_check("tflite_bytes", TFLITE, TFLITE_SCHEMES, ".tflite"),
               target_seconds(WEIGHTS["tflite_bytes"], TOTAL_WEIGHT))


def test_fuzz_tflite_fields():
    pytest.importorskip("ai_edge_litert")
    from tflite_mutator import mutate_tflite, tflite_mutations

    _warm_up(TFLITE, TFLITE_SCHEMES)

    def check(ex):
        k, muts, scheme_k, seed, specials = ex
        src = TFLITE[k % len(TFLITE)]
        data = mutate_tflite(src.read_bytes(), muts)
        path = _TMP / "f.tflite"
        path.write_bytes(data)
        scheme = TFLITE_SCHEMES[scheme_k % len(TFLITE_SCHEMES)]
        expect_clean("tflite_fields", {f"{src.stem}.mutated.tflite": data, "scheme.txt": scheme.encode()},
                     lambda: load_and_run(path, scheme, seed, specials))

    run_target("tflite_fields", _example(tflite_mutations), check,
               target_seconds(WEIGHTS["tflite_fields"], TOTAL_WEIGHT))


def test_fuzz_onnx_bytes():
    pytest.importorskip("onnx")
    _warm_up(ONNX, ONNX_SCHEMES)
    run_target("onnx_bytes", _example(mutations), _model_check("onnx_bytes", ONNX, ONNX_SCHEMES, ".onnx"),
               target_seconds(WEIGHTS["onnx_bytes"], TOTAL_WEIGHT))


def test_fuzz_onnx_fields():
    pytest.importorskip("onnx")
    from onnx_mutator import field_mutations, mutate_onnx

    _warm_up(ONNX, ONNX_SCHEMES)

    def check(ex):
        k, muts, scheme_k, seed, specials = ex
        src = ONNX[k % len(ONNX)]
        data = mutate_onnx(src.read_bytes(), muts)
        folder = _TMP / "fields"
        folder.mkdir(exist_ok=True)
        path = folder / "m.onnx"
        path.write_bytes(data)
        scheme = ONNX_SCHEMES[scheme_k % len(ONNX_SCHEMES)]
        expect_clean("onnx_fields", {f"{src.stem}.mutated.onnx": data, "scheme.txt": scheme.encode()},
                     lambda: load_and_run(path, scheme, seed, specials))

    run_target("onnx_fields", _example(field_mutations), check, target_seconds(WEIGHTS["onnx_fields"], TOTAL_WEIGHT))
