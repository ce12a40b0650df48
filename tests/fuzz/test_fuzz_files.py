"""Fuzz targets over the other files refinterp reads: dumps (.npz, refinterp .npy folder, Polygraphy JSON,
raw + manifest), scheme YAML and golden cases.  Each example mutates one file of a valid seed (bytes, or
the parsed JSON / YAML tree) and calls the public reader; only RefinterpError subclasses may escape."""
from __future__ import annotations

import base64
import json
import shutil
import atexit
import tempfile
from pathlib import Path

import numpy as np
import yaml
from fuzz_harness import FIXTURES, ROOT, TOTAL_WEIGHT, expect_clean, mutate, mutations, run_target, target_seconds
from hypothesis import strategies as st
from tree_mutator import mutate_tree, tree_mutations

import refinterp
from refinterp.dumps import read_dump, write_npy_dump

WEIGHTS = {"dump_npz": 8, "dump_npy": 10, "dump_polygraphy": 8, "dump_raw": 10, "scheme": 10, "golden": 8}
SMALL_MODEL = FIXTURES / "tflite" / "depth_space_int8.tflite"
_TMP = Path(tempfile.mkdtemp(prefix="refinterp-fuzz-files-"))
atexit.register(shutil.rmtree, _TMP, True)

# one example: (which file of the seed, tree mutation?, tree mutations, byte mutations, inner index)
example = st.tuples(st.integers(0, 63), st.booleans(), tree_mutations, mutations, st.integers(0, 63))


def _arrays() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"conv/out": rng.integers(-128, 127, (1, 4, 4, 3), dtype=np.int8),
            "f": rng.standard_normal((2, 3)).astype(np.float32),
            "h": rng.standard_normal(5).astype(np.float16), "b": np.array([True, False]),
            "i32": np.arange(6, dtype=np.int32).reshape(2, 3), "scalar": np.float64(1.5)}


def touch(dump) -> None:
    """What a comparison reads of every tensor."""
    for t in dump.tensors.values():
        for s in t.samples:
            np.asarray(s).shape
        t.effective_quant()
        _ = t.dtype, t.shape


def _fresh(name: str) -> Path:
    d = _TMP / name
    if d.exists():
        shutil.rmtree(d)
    return d


def _mutate_file(f: Path, ex) -> None:
    """Mutate ``f`` in place: its parsed JSON/YAML tree when asked and parseable, else its bytes."""
    _, use_tree, tmuts, bmuts, _ = ex
    data = f.read_bytes()
    if use_tree and f.suffix in (".json", ".yaml", ".yml"):
        try:
            doc = json.loads(data) if f.suffix == ".json" else yaml.safe_load(data)
            out = mutate_tree(doc, tmuts)
            f.write_text(json.dumps(out) if f.suffix == ".json" else yaml.safe_dump(out))
            return
        except (ValueError, yaml.YAMLError, RecursionError):
            pass
    f.write_bytes(mutate(data, bmuts))


def _folder_files(d: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(d.rglob("*")) if p.is_file()}


def _folder_target(name: str, build, read) -> None:
    def check(ex):
        d = _fresh(name)
        build(d)
        files = sorted(p for p in d.rglob("*") if p.is_file())
        _mutate_file(files[ex[0] % len(files)], ex)
        expect_clean(name, _folder_files(d), lambda: read(d))

    run_target(name, example, check, target_seconds(WEIGHTS[name], TOTAL_WEIGHT))


def test_fuzz_dump_npz():
    seeds = [FIXTURES / "dumps" / "polygraphy_runresults_expected.npz"]
    gen = _TMP / "gen.npz"
    np.savez(gen, **_arrays())
    obj = _TMP / "obj.npz"
    np.savez(obj, a=np.array([{"x": 1}], dtype=object))  # needs pickle: must be refused
    seeds += [gen, obj]

    def check(ex):
        src = seeds[ex[0] % len(seeds)]
        path = _TMP / "m.npz"
        path.write_bytes(mutate(src.read_bytes(), ex[3]))
        expect_clean("dump_npz", {path.name: path.read_bytes()}, lambda: touch(read_dump(path)))

    run_target("dump_npz", example, check, target_seconds(WEIGHTS["dump_npz"], TOTAL_WEIGHT))


def test_fuzz_dump_npy_folder():
    graph = refinterp.load(SMALL_MODEL)
    trace = refinterp.Session(graph, "tflite-reference").run(
        {graph.inputs[0]: np.zeros([d or 1 for d in graph.tensors[graph.inputs[0]].shape], np.int8)}, capture="all")
    seed = _TMP / "npy_seed"
    write_npy_dump(seed, trace, graph, "tflite-reference")
    _folder_target("dump_npy", lambda d: shutil.copytree(seed, d), lambda d: touch(read_dump(d)))


def test_fuzz_dump_polygraphy():
    src = FIXTURES / "dumps" / "polygraphy_runresults.json"

    def check(ex):
        k, use_tree, tmuts, bmuts, inner = ex
        path = _TMP / "runresults.json"
        text = src.read_text()
        if k % 3 == 0:  # mutate the bytes of one embedded base64 .npy
            doc = json.loads(text)
            arrays = [n for n in _walk(doc) if isinstance(n, dict) and isinstance(n.get("array"), str)]
            a = arrays[inner % len(arrays)]
            a["array"] = base64.b64encode(mutate(base64.b64decode(a["array"]), bmuts)).decode()
            path.write_text(json.dumps(doc))
        else:
            path.write_text(text)
            _mutate_file(path, ex)
        expect_clean("dump_polygraphy", {path.name: path.read_bytes()}, lambda: touch(read_dump(path)))

    run_target("dump_polygraphy", example, check, target_seconds(WEIGHTS["dump_polygraphy"], TOTAL_WEIGHT))


def _walk(doc):
    yield doc
    if isinstance(doc, dict):
        for v in doc.values():
            yield from _walk(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _walk(v)


def test_fuzz_dump_raw():
    seed = _TMP / "raw_seed"
    seed.mkdir()
    arrays = _arrays()
    entries = []
    for k, (name, a) in enumerate(arrays.items()):
        (seed / f"t{k}.raw").write_bytes(np.ascontiguousarray(a).tobytes())
        e = {"name": name, "file": f"t{k}.raw", "dtype": str(a.dtype), "shape": list(a.shape)}
        if a.dtype == np.int8:
            e.update(scale=0.05, zero_point=-3)
        entries.append(e)
    (seed / "manifest.json").write_text(json.dumps({"dtype": "float32", "tensors": entries}))
    _folder_target("dump_raw", lambda d: shutil.copytree(seed, d), lambda d: touch(read_dump(d)))


def test_fuzz_scheme():
    from refinterp.schemes import load_scheme

    seeds = sorted((ROOT / "schemes").glob("*.yaml"))
    graph = refinterp.load(SMALL_MODEL)
    x = {graph.inputs[0]: np.zeros([d or 1 for d in graph.tensors[graph.inputs[0]].shape], np.int8)}

    def use(path: Path) -> None:
        scheme = load_scheme(str(path))
        refinterp.Session(graph, scheme).run(x)

    def check(ex):
        src = seeds[ex[0] % len(seeds)]
        d = _fresh("scheme")
        d.mkdir()
        path = d / src.name
        path.write_bytes(src.read_bytes())
        _mutate_file(path, ex)
        expect_clean("scheme", {path.name: path.read_bytes()}, lambda: use(path))

    run_target("scheme", example, check, target_seconds(WEIGHTS["scheme"], TOTAL_WEIGHT))


def test_fuzz_golden_case():
    from refinterp.golden.case import read_case
    from refinterp.golden.check import check_case
    from refinterp.golden.make import make_cases, write_cases

    graph = refinterp.load(SMALL_MODEL)
    x = {graph.inputs[0]: np.random.default_rng(0).integers(-128, 127, [d or 1 for d in
                                                                     graph.tensors[graph.inputs[0]].shape], np.int8)}
    root = write_cases(_TMP / "golden_seed", make_cases(graph, "tflite-reference", x))
    cases = sorted(p for p in root.iterdir() if (p / "case.json").is_file())

    def read(d: Path) -> None:
        check_case(read_case(d))

    def check(ex):
        src = cases[ex[4] % len(cases)]
        d = _fresh("golden")
        shutil.copytree(src, d)
        files = sorted(p for p in d.iterdir() if p.is_file())
        _mutate_file(files[ex[0] % len(files)], ex)
        expect_clean("golden", _folder_files(d), lambda: read(d))

    run_target("golden", example, check, target_seconds(WEIGHTS["golden"], TOTAL_WEIGHT))
