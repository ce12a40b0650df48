"""Scheme files: validation (key paths in messages), extends, per-op / per-node settings,
compute: float, the `refinterp schemes` CLI."""
from __future__ import annotations

import numpy as np
import pytest
import yaml

import refinterp
from refinterp.cli.main import main
from refinterp.errors import SchemeError
from refinterp.ir import Graph, Node, QuantParams, TensorInfo
from refinterp import load_scheme  # checked against the kernel registry
from refinterp.schemes import list_schemes


@pytest.fixture
def sdir(tmp_path, monkeypatch):
    monkeypatch.setenv("REFINTERP_SCHEMES_PATH", str(tmp_path))
    return tmp_path


def write(d, name, text):
    p = d / f"{name}.yaml"
    p.write_text(text)
    return p


def test_builtin_schemes_load_and_list():
    names = [n for n, _ in list_schemes()]
    assert {"float32", "tflite-reference", "tflite-micro"} <= set(names)
    assert not any(n.startswith("_") for n in names)
    ref = load_scheme("tflite-reference")
    assert ref.parents == ["_base-tflite-int"]
    assert ref.data["status"] == "verified" and "BUILTIN_REF" in ref.describes
    assert ref.op_settings("FullyConnected")["requant"]["rounding"] == "float64_half_away"
    assert ref.op_settings("Conv")["requant"]["rounding"] == "double"  # inherited default
    assert ref.op_settings("Conv")["requant"]["rounding64"] == "mbqm64"
    micro = load_scheme("tflite-micro")
    assert micro.op_settings("FullyConnected")["requant"]["rounding"] == "double"
    assert load_scheme("float32").variants == ["float"]


@pytest.mark.parametrize("text,path,expect", [
    ("name: s\nops:\n  Conv: {requant: {rounding: dobule}}\n", "ops.Conv.requant.rounding",
     "expected one of double, upward, single"),
    ("name: s\nfoo: 1\n", "foo", "unknown key"),
    ("name: s\nops:\n  Conv: {rounding: double}\n", "ops.Conv.rounding", "unknown key"),
    ("name: s\nnodes:\n  'conv*': {requant: {mode: x}}\n", "nodes.conv*.requant.mode", "unknown key"),
    ("name: s\nops:\n  Conv2D: {}\n", "ops.Conv2D", "unknown op"),
    ("name: s\nstatus: maybe\n", "status", "expected one of verified, documented"),
    ("name: s\nvariants: float\n", "variants", "non-empty list"),
    ("name: s\naccumulator: {bits: 16}\n", "accumulator.bits", "expected one of 32, 64"),
    ("name: s\nnodes:\n  x: {compute: fp16}\n", "nodes.x.compute", "expected one of int, float"),
    ("name: s\naccumulator: {bits: true}\n", "accumulator.bits", "expected one of 32, 64"),
    # a misspelt variant would be skipped and another kernel's arithmetic used: refused instead
    ("name: s\nvariants: [tflite_ref, int, float]\nops:\n  Conv: {delegate: {variants: [xnm, int]}}\n",
     "ops.Conv.delegate.variants", "unknown kernel variant 'xnm'"),
    ("name: s\nvariants: [tflite_rfe, int]\n", "variants", "unknown kernel variant 'tflite_rfe'"),
    ("name: s\nnodes:\n  'conv*': {hybrid: {variants: [xnn_hybird]}}\n", "nodes.conv*.hybrid.variants",
     "unknown kernel variant"),
])
def test_malformed_one_line_with_key_path(sdir, text, path, expect):
    p = write(sdir, "s", text)
    with pytest.raises(SchemeError) as e:
        load_scheme("s")
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and f"'{path}'" in msg and expect in msg


def test_extends_merges_and_cycles(sdir):
    write(sdir, "child", "name: child\nextends: tflite-reference\nops:\n  Conv: {requant: {rounding: single}}\n")
    s = load_scheme("child")
    assert s.parents == ["tflite-reference", "_base-tflite-int"]
    assert s.op_settings("Conv")["requant"] == {"rounding": "single", "rounding64": "mbqm64"}
    assert s.op_settings("FullyConnected")["requant"]["rounding"] == "float64_half_away"
    assert "status" not in s.data  # not inherited
    write(sdir, "a", "name: a\nextends: b\n")
    write(sdir, "b", "name: b\nextends: a\n")
    with pytest.raises(SchemeError, match="cycle"):
        load_scheme("a")
    write(sdir, "bad-parent", "name: bad-parent\nextends: c\n")
    write(sdir, "c", "name: c\nops: {Conv: {impl: 3}}\n")
    with pytest.raises(SchemeError, match="'ops.Conv.impl'"):
        load_scheme("bad-parent")


def _graph(out_quant: bool) -> tuple[Graph, Node]:
    q = QuantParams(np.float32(0.1), 0)
    t = {"x": TensorInfo("x", (1, 4), "int8", q),
         "y": TensorInfo("y", (1, 4), "int8" if out_quant else "float32", q if out_quant else None)}
    n = Node("block1/conv_a", "Relu", ["x"], ["y"])
    return Graph("g", "tflite", t, [n], ["x"], ["y"]), n


def test_node_overrides_precedence(sdir):
    write(sdir, "n", "name: n\nextends: tflite-reference\nnodes:\n"
          "  block1/conv_a: {requant: {rounding: upward}}\n"
          "  'block1/*': {requant: {rounding: single}, impl: lut}\n"
          "  '*': {requant: {rounding: pot}}\n")
    g, n = _graph(True)
    choice = load_scheme("n").for_node(n, g)
    assert choice.settings["requant"]["rounding"] == "upward"  # exact name beats every glob
    assert choice.settings["impl"] == "lut"
    assert "float" not in choice.variants  # quantized integer output: no silent float fallback
    n2 = Node("other", "Relu", ["x"], ["y"])
    assert load_scheme("n").for_node(n2, g).settings["requant"]["rounding"] == "pot"


def test_float_variant_kept_for_float_nodes_and_compute_float(sdir):
    g, n = _graph(False)
    assert "float" in load_scheme("tflite-reference").for_node(n, g).variants
    write(sdir, "cf", "name: cf\nextends: tflite-reference\nnodes:\n  'block1/*': {compute: float}\n")
    g, n = _graph(True)
    assert load_scheme("cf").for_node(n, g).variants == ["float"]


def test_compute_float_runs_float_kernel_and_quantizes(sdir, tmp_path):
    """A 1x1 conv with power-of-two scales: every float32 product/sum is exact, so the expected
    output is clamp(round_half_away(float32(acc_real / so)) + zo) computed here independently."""
    pytest.importorskip("ai_edge_litert")
    from tests.tflite_builder import TFLiteBuilder

    rng = np.random.default_rng(0)
    b = TFLiteBuilder()
    x = b.tensor("x", [1, 3, 3, 2], "int8", scale=0.5, zero_point=3)
    wv = rng.integers(-8, 9, (3, 1, 1, 2)).astype(np.int8)
    w = b.const("w", wv, scale=0.25, zero_point=0)
    bv = np.array([5, -7, 0], np.int32)
    bias = b.const("bias", bv, scale=0.125, zero_point=0)
    y = b.tensor("y", [1, 3, 3, 3], "int8", scale=0.375, zero_point=-10)
    b.op("CONV_2D", [x, w, bias], [y], options=dict(padding="VALID", fused_activation="NONE"), version=3)
    p = tmp_path / "c.tflite"
    p.write_bytes(b.build([x], [y]))
    xv = rng.integers(-128, 128, (1, 3, 3, 2)).astype(np.int8)
    write(sdir, "cf", "name: cf\nextends: tflite-reference\nnodes:\n  '*': {compute: float}\n")
    got = refinterp.Session(refinterp.load(p), "cf").run({"x": xv})["y"]
    real = (xv.astype(np.float64) - 3) * 0.5 @ (wv[:, 0, 0, :].astype(np.float64) * 0.25).T + bv * 0.125
    t = real / 0.375
    want = np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5) - 10, -128, 127).astype(np.int8)
    assert got.dtype == np.int8 and np.array_equal(got, want)
    integer = refinterp.Session(refinterp.load(p), "tflite-reference").run({"x": xv})["y"]
    assert integer.dtype == np.int8


def test_cli_list_show_check(sdir, capsys):
    assert main(["schemes"]) == 0
    out = capsys.readouterr().out
    assert "tflite-reference" in out and "_base" not in out
    assert main(["schemes", "show", "tflite-micro"]) == 0
    text = capsys.readouterr().out
    data = yaml.safe_load(text)
    assert data["name"] == "tflite-micro" and data["requant"]["rounding"] == "double"
    assert "extends" not in data and "extends _base-tflite-int" in text.splitlines()[0]
    p = write(sdir, "roundtrip", text.replace("name: tflite-micro", "name: roundtrip"))
    assert main(["schemes", "check", str(p)]) == 0
    write(sdir, "broken", "name: broken\nops: {Conv: {requant: {rounding: dobule}}}\n")
    assert main(["schemes", "show", "broken"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "ops.Conv.requant.rounding" in err
    assert main(["schemes", "show"]) == 2
    capsys.readouterr()
    p = write(sdir, "typo", "name: typo\nvariants: [tflite_ref, int]\nops: {Sigmoid: {variants: [tflite_opt, tflite_rfe]}}\n")
    assert main(["schemes", "check", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "ops.Sigmoid.variants" in err and "tflite_rfe" in err


def test_misspelt_delegate_impl_is_refused_not_ignored(sdir):
    """A delegate ``impl:`` the XNNPACK MEAN kernel does not declare used to fall back to the built-in
    kernel silently (exit 0, other arithmetic); it is refused before the model is touched, naming
    the file, the key and what the kernels declare."""
    from pathlib import Path

    p = write(sdir, "typo", "name: typo\nextends: tflite-xnnpack\nops:\n  ReduceMean: {delegate: {impl: xnn_flaot}}\n")
    model = Path(__file__).resolve().parents[1] / "fixtures" / "tflite" / "mobilenet_v2_tiny_int8.tflite"
    with pytest.raises(SchemeError) as e:
        refinterp.Session(refinterp.load(model), "typo")
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and "'ops.ReduceMean.delegate.impl'" in msg
    assert "xnn_flaot" in msg and "xnn_float" in msg
    write(sdir, "fine", "name: fine\nextends: tflite-xnnpack\nops:\n  ReduceMean: {delegate: {impl: xnn_float}}\n")
    refinterp.Session(refinterp.load(model), "fine")


@pytest.mark.parametrize("text,path,expect", [
    # an impl no kernel of the op declares under the scheme's variants
    ("name: s\nvariants: [tflite_ref, int, float]\nops:\n  Sigmoid: {impl: lutt}\n", "ops.Sigmoid.impl",
     "declared: fixed_point, lut"),
    # a real impl of another op / another backend is refused too
    ("name: s\nvariants: [tflite_ref, int, float]\nops:\n  Conv: {impl: mlas_f32}\n", "ops.Conv.impl",
     "none: no kernel there reads impl"),
    ("name: s\nvariants: [ort, int, float]\nops:\n  Gemm: {impl: mlas_f33}\n", "ops.Gemm.impl", "mlas_f32"),
    ("name: s\nvariants: [tflite_ref, int, float]\nnodes:\n  'conv.1': {impl: lutt}\n", "nodes.conv.1.impl",
     "any op"),
    ("name: s\nvariants: [tflite_ref, int, float]\nops:\n  Add: {uint8: {impl: general_int1}}\n",
     "ops.Add.uint8.impl", "general_int16"),
])
def test_unknown_impl_refused_before_anything_runs(sdir, capsys, text, path, expect):
    p = write(sdir, "s", text)
    with pytest.raises(SchemeError) as e:
        load_scheme("s")
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and f"'{path}'" in msg and expect in msg
    assert main(["schemes", "check", str(p)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and path in err


def test_every_builtin_impl_is_declared_and_errors_name_the_parent_file(sdir):
    """Each shipped scheme passes the registry check; a bad key inherited from a parent is reported
    in the parent's file, and a scheme built in memory is checked when a Session takes it."""
    from refinterp.scheme_check import check_scheme
    from refinterp.schemes import Scheme

    for name, _ in list_schemes():
        load_scheme(name)
    parent = write(sdir, "parent", "name: parent\nvariants: [tflite_ref, int, float]\nops:\n  Tanh: {impl: lutt}\n")
    write(sdir, "child", "name: child\nextends: parent\nops:\n  Conv: {requant: {rounding: single}}\n")
    with pytest.raises(SchemeError) as e:
        load_scheme("child")
    assert str(e.value).startswith(f"{parent}: key 'ops.Tanh.impl'")
    mem = Scheme("mem", {"variants": ["tflite_ref", "int", "float"], "ops": {"Mul": {"impl": "f32"}}})
    with pytest.raises(SchemeError, match="scheme 'mem': key 'ops.Mul.impl'"):
        check_scheme(mem)
    t = {n: TensorInfo(n, "float32", [1]) for n in ("x", "y")}
    g = Graph("g", "onnx", t, [Node("n", "Relu", ["x"], ["y"])], ["x"], ["y"])
    with pytest.raises(SchemeError):
        refinterp.Session(g, mem)


@pytest.mark.parametrize("text,path,expect", [
    # a rounding for an op whose kernels never requantize: it would change nothing, silently
    ("name: s\nvariants: [tflite_ref, int, float]\nops:\n  MaxPool: {requant: {rounding: single}}\n",
     "ops.MaxPool.requant", "they read: requires_equal_params"),
    ("name: s\nvariants: [ort, int, float]\nops:\n  Add: {accumulator: {bits: 64}}\n", "ops.Add.accumulator",
     "they read: impl"),
    ("name: s\nvariants: [tflite_ref, int, float]\nops:\n  Conv: {delegate: {requant: {rounding: single}}}\n",
     "ops.Conv.delegate", "they read: accumulator, requant"),
    ("name: s\nvariants: [tflite_ref, int, float]\nnodes:\n  'n.*': {requires_equal_params: true}\n",
     None, None),  # a nodes: entry: read by some kernel under these variants (pools): accepted
])
def test_setting_no_kernel_reads_is_refused(sdir, capsys, text, path, expect):
    p = write(sdir, "s", text)
    if path is None:
        load_scheme("s")
        return
    with pytest.raises(SchemeError) as e:
        load_scheme("s")
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and f"'{path}'" in msg and expect in msg, msg
    assert main(["schemes", "check", str(p)]) == 2
    assert path in capsys.readouterr().err


def test_kernel_reading_an_undeclared_setting_is_a_kernel_author_error():
    """The Session holds every prepare's reads against what its kernel declares."""
    from refinterp.kernels.registry import AttrPlan, kernel
    from refinterp.schemes import Scheme

    def prepare(node, ctx):
        ctx.settings.get("requant")  # read, never declared
        return AttrPlan({})

    kernel("_TestUndeclaredRead", "_test_undeclared", prepare=prepare)(lambda plan, x: x)
    t = {n: TensorInfo(n, (1,), "float32") for n in ("x", "y")}
    g = Graph("g", "onnx", t, [Node("n", "_TestUndeclaredRead", ["x"], ["y"])], ["x"], ["y"])
    sch = Scheme("mem", {"variants": ["_test_undeclared"]})
    with pytest.raises(RuntimeError, match=r"_TestUndeclaredRead.*requant.*does not declare"):
        refinterp.Session(g, sch)


def test_duplicate_key_is_refused(tmp_path):
    """YAML keeps the last of two equal keys silently; a scheme file with a second ``Conv:`` entry is
    refused with the file and line instead of losing the first entry's settings."""
    import pytest

    from refinterp.errors import SchemeError
    from refinterp.schemes.loader import load_scheme

    f = tmp_path / "dup.yaml"
    f.write_text("name: dup\nextends: tflite-reference\nops:\n  Conv: {requant: {rounding: single}}\n"
                 "  Conv: {impl: x}\n")
    with pytest.raises(SchemeError, match=r"dup.yaml:5: not valid YAML \(duplicate key 'Conv'\)"):
        load_scheme(str(f))
