"""LiteRT dynamic-range ("hybrid": float activations, int8 constant weights) kernels, bit-exact.

Single-op FULLY_CONNECTED (symmetric / ``asymmetric_quantize_inputs``, per-tensor / per-channel,
bias or none, fused activations, keep_num_dims), CONV_2D (one scale -> symmetric ``EvalHybrid``,
several scales -> asymmetric ``EvalHybridPerChannel``), DEPTHWISE_CONV_2D (channel counts around
the 4-wide vector blocks, depth multipliers) and BATCH_MATMUL (adj_x / adj_y, symmetric /
asymmetric, per-tensor / per-channel) models, with input distributions that hit the run-time input
quantizer's corners (tests/conformance/_hybrid_cases.py), are compared with LiteRT BUILTIN_REF and
BUILTIN_WITHOUT_DEFAULT_DELEGATES, and with BUILTIN (XNNPACK delegate, QD8 kernels): every tensor,
bit for bit (float32 bit patterns, not ``==``).
The converter fixture's hybrid nodes are compared node by node on LiteRT's own input tensors.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from refinterp.errors import RefinterpError  # noqa: E402
from refinterp.schemes.loader import load_scheme  # noqa: E402
from tests.conformance import _hybrid_cases as hc  # noqa: E402
from tests.conformance._int_oracle import Aborted, run_batch  # noqa: E402

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "tflite"
SCHEMES = {"ref": "tflite-reference", "opt": "tflite-optimized", "xnnpack": "tflite-xnnpack"}
# the kernel variant each resolver's scheme must pick for a hybrid node (XNNPACK has no dynamic-range
# depthwise conv: DEPTHWISE_CONV_2D stays on the built-in optimized hybrid kernel)
WANT = {("ref", g): "tflite_hybrid_ref" for g in ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D", "BATCH_MATMUL")}
WANT.update({("opt", g): "tflite_hybrid_opt" for g in ("FULLY_CONNECTED", "CONV_2D", "DEPTHWISE_CONV_2D",
                                                       "BATCH_MATMUL")})
WANT.update({("xnnpack", g): "xnn_hybrid" for g in ("FULLY_CONNECTED", "CONV_2D", "BATCH_MATMUL")})
WANT[("xnnpack", "DEPTHWISE_CONV_2D")] = "tflite_hybrid_opt"
ACTS = ("NONE", "RELU", "RELU6", "RELU_N1_TO_1")


def _fc_cases():
    rng = np.random.default_rng(11)
    out, i = [], 0
    for dist in hc.DISTS:
        for k in (5, 8, 13, 37, 64):
            for pc in (False, True):
                for asym in (False, True):
                    i += 1
                    out.append(hc.fc_case(rng, i, k=k, o=16 if k == 64 else 7, per_channel=pc, asym=asym,
                                          dist=dist, act=ACTS[i % 4], bias=i % 3 != 0, keep_num_dims=i % 5 == 0))
    return out


def _conv_cases():
    rng = np.random.default_rng(12)
    geoms = [((3, 3), (1, 1), (1, 1), "SAME", 8), ((1, 1), (1, 1), (1, 1), "VALID", 7),
             ((3, 3), (2, 2), (1, 1), "VALID", 4), ((3, 2), (1, 1), (2, 2), "SAME", 12)]
    out, i = [], 0
    for dist in hc.DISTS:
        for pc in (False, True):
            for k, s, d, pad, co in geoms:
                i += 1
                out.append(hc.conv_case(rng, i, k=k, stride=s, dil=d, pad=pad, cout=co, per_channel=pc,
                                        dist=dist, act=ACTS[i % 3]))
    for k in ((3, 3), (1, 1)):  # grouped: LiteRT's per-channel path, reference kernel in both resolvers
        i += 1
        out.append(hc.conv_case(rng, i, cin=4, cout=6, groups=2, k=k, per_channel=True, dist="normal"))
    return out


def _dw_cases():
    rng = np.random.default_rng(13)
    out, i = [], 0
    for dist in hc.DISTS:
        for c, m in ((7, 1), (8, 1), (13, 1), (3, 2), (4, 3)):
            i += 1
            out.append(hc.dw_case(rng, i, cin=c, mult=m, dist=dist, stride=(1 + i % 2,) * 2,
                                  dil=(1 + (i % 3 == 0),) * 2, pad=("SAME", "VALID")[i % 2 * (i % 3 != 0)],
                                  act=ACTS[i % 4]))
    return out


def _bmm_cases():
    rng = np.random.default_rng(14)
    out, i = [], 0
    for dist in hc.DISTS:
        for asym in (False, True):
            for ax, ay in ((False, False), (True, False), (False, True)):
                for pc in (False, True):
                    i += 1
                    out.append(hc.bmm_case(rng, i, adj_x=ax, adj_y=ay, asym=asym, per_channel=pc, dist=dist,
                                           k=(5, 13, 16)[i % 3], lead=((2,), (2, 3))[i % 2]))
    for lead, ax in (((2, 3), False), ((4,), False), ((2, 3), True)):  # RHS [1, K, N]: LiteRT folds
        i += 1                                                          # LHS batch into rows
        out.append(hc.bmm_case(rng, i, lead=lead, adj_x=ax, asym=True, rhs_lead=(1,), dist="normal"))
    return out


GROUPS = {"FULLY_CONNECTED": _fc_cases, "CONV_2D": _conv_cases, "DEPTHWISE_CONV_2D": _dw_cases,
          "BATCH_MATMUL": _bmm_cases}


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.uint32) if a.dtype == np.float32 else a


def _ulp(a: np.ndarray, b: np.ndarray) -> int:
    def ordered(v):
        i = v.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)
    return int(np.abs(ordered(a) - ordered(b)).max())


def _run(cases, backend: str, scheme: str):
    oracle = run_batch([(c.model, c.feeds) for c in cases], backend)
    elements, failures, variants = 0, [], set()
    with tempfile.TemporaryDirectory(prefix="hybrid_") as tmp:
        for j, (c, res) in enumerate(zip(cases, oracle)):
            if isinstance(res, Aborted):
                failures.append(f"{c.id}: oracle aborted: {res.message[-200:]}")
                continue
            p = Path(tmp) / f"c{j}.tflite"
            p.write_bytes(c.model)
            sess = refinterp.Session(refinterp.load(p), scheme)
            variants.update(st.kernel.variant for st in sess.steps)
            ours = sess.run(c.feeds, capture="all")
            for name, v in ours.items():
                o = res.get(name)
                if o is None or o.shape != v.shape or o.dtype != v.dtype:
                    failures.append(f"{c.id}: {name}: oracle {None if o is None else (o.dtype, o.shape)} "
                                    f"vs ours {(v.dtype, v.shape)}")
                    continue
                elements += v.size
                n = int(np.count_nonzero(_bits(o) != _bits(v)))
                if n:
                    failures.append(f"{c.id}: {name}: {n}/{v.size} differ, max {_ulp(o, v)} ulp")
    return elements, failures, variants


@pytest.mark.parametrize("backend", sorted(SCHEMES))
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_single_op_bit_exact(group, backend):
    cases = GROUPS[group]()
    elements, failures, variants = _run(cases, backend, SCHEMES[backend])
    print(f"\n{group} vs LiteRT {backend}: {len(cases)} cases, {elements} elements, "
          f"{len(failures)} failing tensors")
    assert not failures, " || ".join(failures[:5])
    assert variants == {WANT[backend, group]}, variants
    assert elements > 0


def test_scheme_selection():
    """Hybrid nodes take the hybrid variant in the tflite-* schemes; float nodes keep ``float``."""
    g = refinterp.load(FIXTURES / "small_cnn_dynamic_range.tflite")
    for scheme, want in (("tflite-reference", "tflite_hybrid_ref"), ("tflite-optimized", "tflite_hybrid_opt"),
                         ("tflite-xnnpack", "xnn_hybrid")):
        sc = load_scheme(scheme)
        got = {n.name: sc.for_node(n, g).variants[0] for n in g.nodes}
        hybrid = [n.name for n in g.nodes if n.op in ("Conv", "DepthwiseConv", "FullyConnected")
                  and any(g.tensors[i].const is not None and g.tensors[i].dtype == "int8" for i in n.inputs if i)]
        assert len(hybrid) == 3
        assert all(got[n] == want for n in hybrid), got
        assert all(v == "float" for n, v in got.items() if n not in hybrid), got
    gf = refinterp.load(FIXTURES / "small_cnn_float32.tflite")
    sc = load_scheme("tflite-reference")
    assert {sc.for_node(n, gf).variants[0] for n in gf.nodes} == {"float"}


@pytest.mark.parametrize("backend", sorted(SCHEMES))
def test_converter_fixture_nodes(backend):
    """Each hybrid node of the converter-made model, run on LiteRT's own input, matches bit for bit."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from litert_oracle import run_litert, run_litert_subprocess

    path = FIXTURES / "small_cnn_dynamic_range.tflite"
    g = refinterp.load(path)
    sess = refinterp.Session(g, SCHEMES[backend])
    x = np.random.default_rng(5).standard_normal(tuple(g.tensors[g.inputs[0]].shape)).astype(np.float32)
    run = run_litert_subprocess if backend == "ref" else run_litert
    oracle = run(path.read_bytes(), {g.inputs[0]: x}, resolver=backend)
    checked = 0
    for i, n in enumerate(g.nodes):
        st = sess.step_of(i)
        if "hybrid" not in st.kernel.variant:
            continue
        ins = [oracle[t] if t and g.tensors[t].const is None else None for t in n.inputs]
        ours = sess.run_node(i, ins)[0]
        want = oracle[n.outputs[0]]
        assert ours.shape == want.shape and np.array_equal(_bits(ours), _bits(want)), \
            f"{n.name}: {np.count_nonzero(_bits(ours) != _bits(want))}/{want.size} differ"
        checked += 1
    assert checked == 3


def test_grouped_conv_with_one_scale_is_refused_like_litert():
    """LiteRT's Prepare requires per-channel scales for a grouped hybrid conv; refinterp refuses it too."""
    case = hc.conv_case(np.random.default_rng(15), 0, cin=4, cout=6, groups=2, per_channel=False)
    res = run_batch([(case.model, case.feeds)], "ref")[0]
    assert isinstance(res, Aborted) and "scale->size" in res.message
    with tempfile.TemporaryDirectory(prefix="hybrid_") as tmp:
        p = Path(tmp) / "g.tflite"
        p.write_bytes(case.model)
        with pytest.raises(RefinterpError, match="grouped dynamic-range conv"):
            refinterp.Session(refinterp.load(p), "tflite-reference")
