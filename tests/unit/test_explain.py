"""``refinterp diff --explain`` / ``--write-scheme`` on dumps made by refinterp itself under a known,
modified arithmetic (the oracle is the modification: the run that made the dump)."""
import json
from pathlib import Path

import numpy as np
import pytest

from refinterp import Session, load
from refinterp.cli.main import main
from refinterp.compare.explain_candidates import knob_candidates, with_op_override
from refinterp.quant.requant import Rounding
from refinterp.schemes import list_schemes, load_scheme, schema

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
MOBILENET = str(FIX / "mobilenet_v2_tiny_int8.tflite")
ZOO = str(FIX / "ops_zoo_int8.tflite")


def _input(g, seed=1, n=None):
    shape = tuple(g.tensors[g.inputs[0]].shape)
    return np.random.default_rng(seed).integers(-128, 128, size=((n,) + shape) if n else shape, dtype=np.int8)


def _make_dump(path, model, scheme, x, hook=None):
    g = load(model)
    vals = Session(g, scheme).run({g.inputs[0]: x}, capture="all", hook=hook)
    np.savez(path, **vals)
    return g, vals


def _diff(tmp_path, model, dump, scheme="tflite-reference", *extra, inputs=None):
    out = tmp_path / f"r{len(list(tmp_path.iterdir()))}.json"
    args = ["diff", model, "--scheme", scheme, "--against", str(dump), "--json", str(out), "--quiet", *extra]
    if inputs:
        args += ["--inputs", str(inputs)]
    rc = main(args)
    return rc, json.loads(out.read_text())


@pytest.mark.parametrize("model,op,rounding", [(MOBILENET, "DepthwiseConv", "single"), (ZOO, "Mul", "upward")],
                         ids=["mobilenet_v2-DepthwiseConv-single", "ops_zoo-Mul-upward"])
def test_one_op_rounding_changed_suggested_scheme_reproduces_dump(tmp_path, model, op, rounding):
    modified = with_op_override(load_scheme("tflite-reference"), op, {"requant": {"rounding": rounding}})
    g = load(model)
    x = _input(g)
    _, dumped = _make_dump(tmp_path / "dump.npz", model, modified, x)
    plain = Session(g, "tflite-reference").run({g.inputs[0]: x}, capture="all")
    changed = [n for n in dumped if not np.array_equal(dumped[n], plain[n])]
    assert changed, "the modified rounding must change something, else the test proves nothing"

    sug = tmp_path / "suggested.yaml"
    rc, rep = _diff(tmp_path, model, tmp_path / "dump.npz", "tflite-reference", "--write-scheme", str(sug))
    assert rc == 1  # the dump differs from tflite-reference
    assert rep["best_scheme"] == "tflite-reference"
    ex = rep["explain"]
    assert ex["unexplained"] == [] and ex["explained"] == ex["re_run_tensors"] > 0
    by = {t["name"]: t for t in rep["tensors"]}
    diverged_ops = {by[n]["op"] for n in changed if by[n]["local_status"] == "diverged"}
    assert diverged_ops == {op}
    for n in changed:
        e = by[n]["explanation"]
        assert e["explained"], n
        if by[n]["local_status"] == "diverged":  # the changed op's own nodes: best scheme + a knob
            assert not e["exact_under_best"] and e["variants_exact"], n
    s = ex["suggested_scheme"]
    assert s["verified"] and s["ops"] == [op] and s["nodes"] == []  # every node of the op agrees
    scheme = load_scheme(str(sug))  # validates
    assert scheme.parents[0] == "tflite-reference"
    rc2, rep2 = _diff(tmp_path, model, tmp_path / "dump.npz", str(sug))
    assert rc2 == 0 and all(t["status"] == "exact" for t in rep2["tensors"] if t["status"] != "missing")


def test_corrupted_kernel_output_is_the_only_unexplained_node_ranked_first(tmp_path):
    g = load(MOBILENET)
    victim = [n for n in g.nodes if n.op == "Conv"][5]

    def corrupt(node, produced):  # in place: later nodes consume the corrupted tensor, as on a device
        if node.name == victim.name:
            y = produced[victim.outputs[0]]
            flat = y.reshape(-1)
            flat[::7] = np.clip(flat[::7].astype(np.int16) + 9, -128, 127).astype(flat.dtype)

    _make_dump(tmp_path / "bad.npz", MOBILENET, "tflite-reference", _input(g), hook=corrupt)
    rc, rep = _diff(tmp_path, MOBILENET, tmp_path / "bad.npz", "tflite-reference", "--explain")
    assert rc == 1 and rep["best_scheme"] == "tflite-reference"
    un = rep["explain"]["unexplained"]
    assert [u["tensor"] for u in un] == [victim.outputs[0]]
    assert un[0]["rank"] == 1 and un[0]["local_residual"] >= 8
    assert rep["first_local_divergence"] == victim.outputs[0]


def test_ranking_by_local_error(tmp_path):
    g = load(ZOO)
    convs = [n for n in g.nodes if n.op == "Conv"]
    assert len(convs) >= 2
    small, big = convs[0], convs[-1]

    def corrupt(node, produced):
        for nd, d in ((small, 2), (big, 40)):
            if node.name == nd.name:
                flat = produced[nd.outputs[0]].reshape(-1)
                flat[::5] = np.clip(flat[::5].astype(np.int16) + d, -128, 127).astype(flat.dtype)

    _make_dump(tmp_path / "bad.npz", ZOO, "tflite-reference", _input(g), hook=corrupt)
    _, rep = _diff(tmp_path, ZOO, tmp_path / "bad.npz", "float32", "--explain")
    un = rep["explain"]["unexplained"]
    assert [u["tensor"] for u in un] == [big.outputs[0], small.outputs[0]]
    assert un[0]["local_residual"] > un[1]["local_residual"]


def test_input_preprocessing_hypothesis_in_explanation(tmp_path):
    g = load(MOBILENET)
    x = _input(g)
    _make_dump(tmp_path / "bgr.npz", MOBILENET, "tflite-reference", np.ascontiguousarray(x[..., ::-1]))
    np.savez(tmp_path / "in.npz", **{g.inputs[0]: x})
    _, rep = _diff(tmp_path, MOBILENET, tmp_path / "bgr.npz", "tflite-reference", "--explain",
                   inputs=tmp_path / "in.npz")
    by = {t["name"]: t for t in rep["tensors"]}
    e = by[g.inputs[0]]["explanation"]
    assert e["op"] == "Input" and "channel order reversed" in e["explained_by"]
    assert rep["explain"]["inputs"][0]["explained_by"] == e["explained_by"]
    # every node re-run on the device's (BGR) tensors is still tflite-reference arithmetic
    assert rep["best_scheme"] == "tflite-reference" and rep["explain"]["unexplained"] == []


def test_knob_candidates_come_from_the_schema_and_the_kernels():
    g = load(ZOO)
    sess = Session(g, "tflite-reference")
    schemes = [load_scheme(n) for n, _ in list_schemes()]
    idx = next(i for i, st in enumerate(sess.steps) if st.node.op == "Sigmoid")
    labels = [lbl for lbl, _ in knob_candidates(sess, idx, sess.scheme, schemes)]
    assert "impl=fixed_point" in labels  # from the kernel's own allowed list (scheme has lut)
    assert "impl=lut" not in labels  # the current setting is not a candidate
    assert "compute=float" in labels
    cur = sess.scheme.for_node(sess.steps[idx].node, g).settings["requant"]["rounding"]
    assert {f"requant.rounding={r.value}" for r in Rounding if r.value != cur} <= set(labels)
    assert len(labels) == len(set(labels))
    # every candidate is a valid OP mapping of the scheme schema (per node and per op)
    for _, over in knob_candidates(sess, idx, sess.scheme, schemes):
        schema.validate({"nodes": {"n": over}, "ops": {"Sigmoid": over}}, "candidate")


def test_reports_show_the_explanation(tmp_path, capsys):
    modified = with_op_override(load_scheme("tflite-reference"), "Mul", {"requant": {"rounding": "upward"}})
    g = load(ZOO)
    _make_dump(tmp_path / "d.npz", ZOO, modified, _input(g))
    html = tmp_path / "r.html"
    rc = main(["diff", ZOO, "--scheme", "tflite-reference", "--against", str(tmp_path / "d.npz"), "--explain",
               "--html", str(html)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "best_scheme: tflite-reference" in out and "requant.rounding=" in out
    text = html.read_text()
    assert "best_scheme: tflite-reference" in text and "explained by (--explain)" in text
    assert "tflite-reference + requant.rounding=" in text


def test_explain_costs_one_session_per_scheme(tmp_path, monkeypatch):
    import refinterp.compare.explain as ex

    built = []
    real = ex.Session

    def counting(graph, scheme, **kw):
        built.append(getattr(scheme, "name", scheme))
        return real(graph, scheme, **kw)

    monkeypatch.setattr(ex, "Session", counting)
    g = load(ZOO)
    _make_dump(tmp_path / "d.npz", ZOO, "tflite-reference", _input(g))
    _diff(tmp_path, ZOO, tmp_path / "d.npz", "tflite-reference", "--explain")
    assert len(built) == len(set(built)) <= len(list_schemes())


def test_one_node_changed_gets_a_per_node_override(tmp_path):
    from refinterp.compare.explain_candidates import with_node_override

    g = load(MOBILENET)
    dws = [n for n in g.nodes if n.op == "DepthwiseConv"]
    target = dws[len(dws) // 2]
    modified = with_node_override(load_scheme("tflite-reference"), target.name, {"requant": {"rounding": "single"}})
    x = _input(g, seed=2)
    _, dumped = _make_dump(tmp_path / "dump.npz", MOBILENET, modified, x)
    plain = Session(g, "tflite-reference").run({g.inputs[0]: x}, capture="all")
    assert not np.array_equal(dumped[target.outputs[0]], plain[target.outputs[0]])
    sug = tmp_path / "one.yaml"
    rc, rep = _diff(tmp_path, MOBILENET, tmp_path / "dump.npz", "float32", "--write-scheme", str(sug))
    s = rep["explain"]["suggested_scheme"]
    assert rep["best_scheme"] == "tflite-reference"
    assert s["verified"] and s["ops"] == [] and s["nodes"] == [target.name]
    rc2, rep2 = _diff(tmp_path, MOBILENET, tmp_path / "dump.npz", str(sug))
    assert rc2 == 0 and rep2["first_divergence"] is None
