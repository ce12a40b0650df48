"""``refinterp run --inputs`` with many samples: per-sample results equal single runs, and the bytes
do not depend on the worker count (1 worker in-process vs 2 spawned workers)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import refinterp
from refinterp.cli.batch import detect
from refinterp.cli.common import random_inputs
from refinterp.cli.main import main
from refinterp.dumps.npydir import read_npy_dump
from refinterp.errors import InputError

ROOT = Path(__file__).resolve().parents[2]
MODEL = str(ROOT / "tests/fixtures/tflite/mobilenet_v2_tiny_int8.tflite")
SCHEME = "tflite-reference"
N = 5


@pytest.fixture(scope="module")
def graph():
    return refinterp.load(MODEL)


@pytest.fixture(scope="module")
def samples(graph):
    return [random_inputs(graph, 100 + k) for k in range(N)]


def _batch_npz(path, graph, samples):
    name = graph.inputs[0]
    np.savez(path, **{name: np.stack([s[name] for s in samples])})
    return str(path)


def _arrays(path) -> dict[str, tuple]:
    with np.load(path, allow_pickle=False) as z:
        return {k: (z[k].dtype.str, z[k].shape, z[k].tobytes()) for k in z.files}


def test_batch_npz_same_bytes_for_any_worker_count(tmp_path, graph, samples):
    src = _batch_npz(tmp_path / "batch.npz", graph, samples)
    got = {}
    for w in (1, 2):
        out = tmp_path / f"out{w}.npz"
        assert main(["run", MODEL, "--scheme", SCHEME, "--inputs", src, "--outputs", str(out),
                     "--workers", str(w), "--quiet"]) == 0
        got[w] = _arrays(out)
    assert got[1] == got[2] and len(got[1]) == len(graph.outputs)
    sess = refinterp.Session(graph, SCHEME)
    with np.load(tmp_path / "out2.npz", allow_pickle=False) as z:
        for name in graph.outputs:
            assert z[name].shape[0] == N
            for k, s in enumerate(samples):  # sample k of the batch == a single run of sample k
                assert np.array_equal(z[name][k], sess.run(s)[name])


def test_folder_inputs_dump_per_sample(tmp_path, graph, samples):
    folder = tmp_path / "inputs"
    folder.mkdir()
    for k, s in enumerate(samples[:3]):
        np.savez(folder / f"img{k}.npz", **s)
    dumps = {}
    for w in (1, 2):
        d = tmp_path / f"dump{w}"
        assert main(["run", MODEL, "--scheme", SCHEME, "--inputs", str(folder), "--dump", str(d),
                     "--workers", str(w), "--quiet"]) == 0
        dumps[w] = {str(p.relative_to(d)): p.read_bytes() for p in sorted(d.rglob("*.npy"))}
        assert sorted(p.name for p in d.iterdir()) == ["sample_0", "sample_1", "sample_2"]
    assert dumps[1] == dumps[2] and len(dumps[1]) > 3 * len(graph.nodes) // 2
    ref = refinterp.Session(graph, SCHEME).run(samples[1], capture="all")  # files sorted: img1 -> sample_1
    dump = read_npy_dump(tmp_path / "dump2" / "sample_1")
    assert set(dump.tensors) == set(ref)
    assert all(np.array_equal(dump.tensors[n].data, ref[n]) for n in ref)


def test_single_sample_npz_is_not_a_batch(tmp_path, graph, samples):
    p = tmp_path / "one.npz"
    np.savez(p, **samples[0])
    assert detect(str(p), graph) is None
    out = tmp_path / "out.npz"
    assert main(["run", MODEL, "--scheme", SCHEME, "--inputs", str(p), "--outputs", str(out), "--quiet"]) == 0
    with np.load(out, allow_pickle=False) as z:
        name = graph.outputs[0]
        assert np.array_equal(z[name], refinterp.Session(graph, SCHEME).run(samples[0])[name])


def test_bad_batches_are_refused(tmp_path, graph, samples, capsys):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError):
        detect(str(empty), graph)
    assert main(["run", MODEL, "--inputs", str(empty), "--quiet"]) == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    name = graph.inputs[0]
    np.savez(bad / "a.npz", **samples[0])
    np.savez(bad / "b.npz", **{name: samples[1][name][..., :1]})  # wrong channel count
    capsys.readouterr()
    assert main(["run", MODEL, "--scheme", SCHEME, "--inputs", str(bad), "--workers", "1", "--quiet"]) == 2
    assert "b.npz" in capsys.readouterr().err  # the error names the failing sample
    two = {name: np.stack([samples[0][name]] * 2)}
    np.savez(tmp_path / "mixed.npz", **two, extra=np.zeros(3))
    assert detect(str(tmp_path / "mixed.npz"), graph) is None  # not every array batched: one sample
