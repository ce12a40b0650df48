"""TFLite WHILE / IF whose subgraphs hold int8 kernels, against LiteRT BUILTIN_REF and TFLite Micro
(each child subgraph runs under the parent's scheme: 0 differing elements on the outputs), and the
loader's refusals of broken subgraph references (one line, the file named, no hang)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance._int_cases import Case, rand_q, run_cases  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

Q = (0.05, -3)


def _int8_while(cond_index=None, body_index=None) -> tuple[bytes, dict]:
    """WHILE (i < 4): i += 1, x = x (+) x (int8 ADD with saturation)."""
    b = TFLiteBuilder()
    # the counter has shape [1]: the tflite_micro Python interpreter cannot be fed a scalar
    i0, x0 = b.tensor("i0", (1,), "int32"), b.tensor("x0", (3, 4), "int8", *Q)
    i_out, x_out = b.tensor("i_out", (1,), "int32"), b.tensor("x_out", (3, 4), "int8", *Q)
    cond = b.subgraph("cond")
    ci, cx, go = cond.tensor("ci", (1,), "int32"), cond.tensor("cx", (3, 4), "int8", *Q), cond.tensor("go", (1,), "bool")
    cond.op("LESS", [ci, cond.const("four", np.array([4], np.int32))], [go])
    body = b.subgraph("body")
    bi, bx = body.tensor("bi", (1,), "int32"), body.tensor("bx", (3, 4), "int8", *Q)
    ni, nx = body.tensor("ni", (1,), "int32"), body.tensor("nx", (3, 4), "int8", *Q)
    body.op("ADD", [bi, body.const("one", np.array([1], np.int32))], [ni])
    body.op("ADD", [bx, bx], [nx])
    c_idx = b.set_io(cond, [ci, cx], [go])
    b_idx = b.set_io(body, [bi, bx], [ni, nx])
    b.op("WHILE", [i0, x0], [i_out, x_out], {"cond_subgraph_index": c_idx if cond_index is None else cond_index,
                                              "body_subgraph_index": b_idx if body_index is None else body_index})
    feeds = {"i0": np.array([0], np.int32), "x0": rand_q(np.random.default_rng(0), (3, 4), "int8")}
    return b.build([i0, x0], [i_out, x_out]), feeds


@pytest.mark.parametrize("backend", ["ref", "tflm"])
def test_int8_while_matches_oracle(backend):
    """The body's int8 ADD doubles x (with its zero point -3 and saturation) at every iteration, so
    the wrong kernel, or the right one run the wrong number of times, differs."""
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    model, feeds = _int8_while()
    out = run_cases([Case("while-int8", "WHILE", model, feeds)], backend)
    out.assert_exact(f"int8 WHILE vs {backend}")
    assert out.tensors >= 2


@pytest.mark.parametrize("cond,body,why", [(7, None, "index 7 names no subgraph"),
                                           (None, 0, "index 0 names no subgraph"),
                                           (2, 2, None)])
def test_broken_subgraph_references_are_refused(tmp_path, cond, body, why):
    import refinterp
    from refinterp.errors import RefinterpError

    model, _ = _int8_while(cond, body)
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    if why is None:  # cond = body = the body subgraph: loads (LiteRT accepts it), fails when run
        g = refinterp.load(str(p))
        assert any(n.op == "While" for n in g.nodes)
        return
    with pytest.raises(RefinterpError) as e:
        refinterp.load(str(p))
    msg = str(e.value)
    assert "\n" not in msg and str(p) in msg and why in msg


def test_self_calling_subgraph_is_refused(tmp_path):
    """A WHILE inside its own body would prepare child Sessions forever: refused at load."""
    import refinterp
    from refinterp.errors import RefinterpError

    b = TFLiteBuilder()
    x, y = b.tensor("x", (2,)), b.tensor("y", (2,))
    body = b.subgraph("loop")
    bx, by = body.tensor("bx", (2,)), body.tensor("by", (2,))
    body.op("WHILE", [bx], [by], {"cond_subgraph_index": 1, "body_subgraph_index": 1})
    idx = b.set_io(body, [bx], [by])
    b.op("WHILE", [x], [y], {"cond_subgraph_index": idx, "body_subgraph_index": idx})
    p = tmp_path / "m.tflite"
    p.write_bytes(b.build([x], [y]))
    with pytest.raises(RefinterpError, match="calls itself"):
        refinterp.load(str(p))


def _int32_arith() -> Case:
    """Plain int32 arithmetic (a shape computation or a counter) next to an int8 op: it used to be
    refused under every TFLite integer scheme (the int8 ADD kernel was picked for it)."""
    b = TFLiteBuilder()
    n, x = b.tensor("n", (3,), "int32"), b.tensor("x", (2, 3), "int8", *Q)
    s, m, d = b.tensor("s", (3,), "int32"), b.tensor("m", (3,), "int32"), b.tensor("d", (3,), "int32")
    y = b.tensor("y", (2, 3), "int8", 0.1, 4)
    b.op("ADD", [n, b.const("c", np.array([1, -2, 3], np.int32))], [s])
    b.op("MUL", [s, b.const("k", np.array([2, 3, -4], np.int32))], [m])
    b.op("SUB", [m, n], [d])
    b.op("ADD", [x, x], [y])
    return Case("int32-arith", "ADD", b.build([n, x], [d, y]),
                {"n": np.array([7, -11, 1000], np.int32), "x": rand_q(np.random.default_rng(1), (2, 3), "int8")})


@pytest.mark.parametrize("backend", ["ref", "opt", "xnnpack", "tflm"])
def test_int32_arithmetic_runs_under_integer_schemes(backend):
    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    out = run_cases([_int32_arith()], backend)
    out.assert_exact(f"int32 ADD / MUL / SUB vs {backend}")
    assert out.tensors >= 5


def _dynamic_flatten() -> tuple[bytes, dict]:
    """The Keras converters' flatten on an unknown batch: SHAPE -> STRIDED_SLICE (shrink, the same
    constant as end and strides) -> PACK with a scalar constant -> RESHAPE, on int8."""
    b = TFLiteBuilder()
    x = b.tensor("x", (1, 2, 2, 3), "int8", *Q, shape_signature=(-1, 2, 2, 3))
    sh, bs, ps = b.tensor("shape", (4,), "int32"), b.tensor("bs", (), "int32"), b.tensor("packed", (2,), "int32")
    b.op("SHAPE", [x], [sh], {"out_type": "int32"})
    one = b.const("one", np.array([1], np.int32))
    b.op("STRIDED_SLICE", [sh, b.const("zero", np.array([0], np.int32)), one, one], [bs], {"shrink_axis_mask": 1})
    b.op("PACK", [bs, b.const("minus_one", np.array(-1, np.int32))], [ps], {"axis": 0})
    y = b.tensor("y", (1, 12), "int8", *Q, shape_signature=(-1, 12))
    b.op("RESHAPE", [x, ps], [y])
    return b.build([x], [y]), {"x": rand_q(np.random.default_rng(2), (1, 2, 2, 3), "int8")}


@pytest.mark.parametrize("backend", ["ref", "xnnpack", "tflm"])
def test_dynamic_batch_flatten_matches_oracle(backend, tmp_path):
    """Batch 1 against the runtime, every tensor; then batch 3 through the same model (the batch
    comes from SHAPE at run time) equals three batch-1 runs."""
    import refinterp

    if backend == "tflm":
        pytest.importorskip("tflite_micro")
    model, feeds = _dynamic_flatten()
    out = run_cases([Case("dynamic-flatten", "RESHAPE", model, feeds)], backend)
    out.assert_exact(f"dynamic-batch flatten vs {backend}")
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    sess = refinterp.Session(refinterp.load(str(p)), "tflite-reference")
    x3 = rand_q(np.random.default_rng(3), (3, 2, 2, 3), "int8")
    y3 = sess.run({"x": x3})["y"]
    assert y3.shape == (3, 12)
    assert np.array_equal(y3, np.concatenate([sess.run({"x": x3[i:i + 1]})["y"] for i in range(3)]))
