"""Conv / matmul family under tflite-optimized / tflite-xnnpack vs LiteRT 2.3.0
BUILTIN_WITHOUT_DEFAULT_DELEGATES ("opt") and the default resolver with XNNPACK ("xnnpack",
experimental_preserve_all_tensors): 0 differing elements on every tensor, and (xnnpack) the same
delegation decision as XNNPACK on every node.

Sweeps: the reference-suite generators (zero points incl. -128/127, scale regimes typical /
saturating / huge / multiplier flushed to 0, exact power-of-two ties, channel counts 1/7/8/9/16/17,
per-tensor and per-channel weights, strides, dilations, SAME/VALID, fused activations, 16x8 with
int64 and int32 bias), plus channel counts 15/24 around the 8-channel blocks of the optimized
depthwise / transpose conv, depth multipliers, and nodes XNNPACK refuses (16x8 activations,
BATCH_MATMUL with a non-zero RHS zero point, FULLY_CONNECTED with a non-zero filter zero point)
which must run the optimized kernels.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

from tests.conformance import test_tflite_int_conv as base  # noqa: E402
from tests.conformance._int_cases import Case, rand_q  # noqa: E402
from tests.conformance._opt_xnn_driver import OracleCache, check  # noqa: E402
from tests.tflite_builder import TFLiteBuilder  # noqa: E402

BLOCK_CHANNELS = (15, 24, 8, 16, 17, 1, 7, 9)


def block_cases(op: str, seed: int) -> list[Case]:
    rng = np.random.default_rng(seed)
    cases = []
    for i, c in enumerate(BLOCK_CHANNELS):
        mult = 1 + (i % 3 == 2) if op == "DEPTHWISE_CONV_2D" else 1
        cin = c if op == "DEPTHWISE_CONV_2D" else int(rng.choice((3, 8, 9)))
        cout = c * mult
        cases.append(base._conv_case(rng, op, 100 + i, cin=cin, cout=cout, k=(3, 3), hw=(6, 5),
                                     stride=(1 + i % 2, 1), pad=("SAME", "VALID")[i % 2],
                                     act=base.ACTS[i % 4], per_channel=i % 4 != 3,
                                     regime=("typical", "typical", "sat", "big")[i % 4]))
    for j, c in enumerate((15, 24, 9)):  # eff = 1/4 exactly: many exact ties, block vs tail rounding
        cin = c if op == "DEPTHWISE_CONV_2D" else 4
        cases.append(base._conv_case(rng, op, 120 + j, cin=cin, cout=c, tie=True, per_channel=False, zx=0, zo=0,
                                     stride=(1 + j % 2, 1)))
    return cases


def fc_extra_cases(seed: int) -> list[Case]:
    """n_out 15/24 (ruy blocks), and per-tensor filters with a non-zero zero point (XNNPACK refuses)."""
    rng = np.random.default_rng(seed)
    cases = [base._fc_case(rng, 200 + j, n_in=int(rng.integers(5, 40)), n_out=n, batch=int(rng.integers(1, 6)),
                           per_channel=j % 2 == 0, act=base.ACTS[j % 4]) for j, n in enumerate((15, 24, 33, 8))]
    for j in range(3):
        b = TFLiteBuilder()
        n_in, n_out, batch = 11, 6, 3
        zx, zo, zw = int(rng.integers(-128, 128)), int(rng.integers(-128, 128)), (5, -3, 127)[j]
        sx, sw = float(np.float32(0.05)), float(np.float32(0.01))
        so = float(np.float32(sx * sw * 200.0))
        x = b.tensor("x", (batch, n_in), "int8", scale=sx, zero_point=zx)
        wt = b.const("w", rand_q(rng, (n_out, n_in), "int8", -127, 127), scale=sw, zero_point=zw)
        bt = b.const("bias", rng.integers(-3000, 3000, n_out).astype(np.int32), scale=float(np.float32(sx * sw)),
                     zero_point=0)
        y = b.tensor("y", (batch, n_out), "int8", scale=so, zero_point=zo)
        b.op("FULLY_CONNECTED", [x, wt, bt], [y], options=dict(fused_activation="NONE"), version=4)
        cases.append(Case(f"FC#zw{zw}:pt,{n_in}->{n_out}", "FULLY_CONNECTED", b.build([x], [y]),
                          {"x": rand_q(rng, (batch, n_in), "int8")}))
    return cases


def fc16_cases(seed: int) -> list[Case]:
    """16x8 FULLY_CONNECTED without bias, with an int32 bias (quantized_bias_type INT32) and with an
    int64 bias: LiteRT's optimized kernel picks ruy (int32) for the first two, the reference for the last."""
    rng = np.random.default_rng(seed)
    cases = []
    for i in range(12):
        b = TFLiteBuilder()
        n_in, n_out, batch = int(rng.integers(8, 64)), int(rng.choice((3, 8, 17))), 16
        pc, kind = i % 2 == 0, ("none", "int32", "int64")[i % 3]
        sx = float(np.float32(rng.uniform(1e-4, 1e-3)))
        sw = (0.01 * rng.uniform(0.2, 2, n_out)).astype(np.float32)
        if not pc:
            sw[:] = sw[0]
        xv = rand_q(rng, (batch, n_in), "int16", -30000, 30000)
        w = rand_q(rng, (n_out, n_in), "int8", -127, 127)
        so = float(np.float32(sx * sw.mean() * np.std(xv.astype(np.int64) @ w.T.astype(np.int64)) / 8000))
        x = b.tensor("x", (batch, n_in), "int16", scale=sx, zero_point=0)
        wq = dict(scale=list(map(float, sw)), zero_point=[0] * n_out, axis=0) if pc else dict(scale=float(sw[0]),
                                                                                          zero_point=0)
        ins, opts = [x, b.const("w", w, **wq)], dict(fused_activation=base.ACTS[i % 4])
        if kind != "none":
            bias = rng.integers(-2_000_000, 2_000_000, n_out).astype(np.int32 if kind == "int32" else np.int64)
            ins.append(b.const("bias", bias, **base._bias_quant(sx, sw, pc)))
            if kind == "int32":
                opts["quantized_bias_type"] = 2  # TensorType.INT32
        y = b.tensor("y", (batch, n_out), "int16", scale=so, zero_point=0)
        b.op("FULLY_CONNECTED", ins, [y], options=opts, version=7)
        cases.append(Case(f"FC16#{i}:bias-{kind},{'pc' if pc else 'pt'},{n_in}->{n_out}", "FULLY_CONNECTED",
                          b.build([x], [y]), {"x": xv}))
    return cases


GROUPS = {
    "CONV_2D": lambda: base.conv_cases("CONV_2D", 14, 31),
    "DEPTHWISE_CONV_2D": lambda: base.conv_cases("DEPTHWISE_CONV_2D", 14, 32),
    "TRANSPOSE_CONV": lambda: base.conv_cases("TRANSPOSE_CONV", 10, 33),
    "CONV_BLOCKS": lambda: block_cases("CONV_2D", 34),
    "DEPTHWISE_BLOCKS": lambda: block_cases("DEPTHWISE_CONV_2D", 35),
    "TRANSPOSE_CONV_BLOCKS": lambda: block_cases("TRANSPOSE_CONV", 36),
    "CONV_16x8": lambda: base.conv16_cases(37),
    "FULLY_CONNECTED": lambda: base.fc_cases(14, 38) + fc_extra_cases(39),
    "FULLY_CONNECTED_16x8": lambda: fc16_cases(43),
    "BATCH_MATMUL": lambda: base.bmm_cases(12, 40),
    "BATCH_MATMUL_16": lambda: base.bmm_cases(6, 41, "int16"),
    "BATCH_MATMUL_16x8": lambda: base.bmm_cases(6, 42, "int16", "int8"),
}
CACHE = OracleCache(GROUPS)


@pytest.mark.parametrize("backend", ["opt", "xnnpack"])
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_bit_exact(group, backend):
    check(CACHE, group, backend)


@pytest.mark.parametrize("group,backend,scheme", [
    ("CONV_2D", "opt", "tflite-reference"),            # double vs ruy upward rounding
    ("DEPTHWISE_BLOCKS", "opt", "tflite-reference"),   # 8-channel blocks upward
    ("TRANSPOSE_CONV_BLOCKS", "opt", "tflite-reference"),
    ("FULLY_CONNECTED", "opt", "tflite-reference"),    # float64 REF vs upward
    ("CONV_2D", "xnnpack", "tflite-optimized"),        # fp32 RNE vs upward
    ("DEPTHWISE_BLOCKS", "xnnpack", "tflite-optimized"),
    ("FULLY_CONNECTED", "xnnpack", "tflite-optimized"),
    ("BATCH_MATMUL", "xnnpack", "tflite-optimized"),
    ("FULLY_CONNECTED_16x8", "opt", "tflite-reference"),  # ruy int32 path without an int64 bias
])
def test_other_schemes_differ(group, backend, scheme):
    """The oracles discriminate: the neighbouring scheme differs on the same cases."""
    out = CACHE.outcome(group, backend, scheme)
    print("\n" + out.line(f"{group} [{scheme}] vs {backend}"))
    assert out.differing > 0


def test_inspect_shows_xnnpack_decision(tmp_path):
    import refinterp

    cases = {c.id: c for c in base.conv16_cases(37)[:1] + base.conv_cases("CONV_2D", 0, 31)[:1]}
    seen = []
    for i, c in enumerate(cases.values()):
        p = tmp_path / f"m{i}.tflite"
        p.write_bytes(c.model)
        plan = refinterp.Session(refinterp.load(p), "tflite-xnnpack").steps[0].plan.describe()
        seen.append(plan["executed_by"])
    assert seen[0].startswith("built-in kernel (XNNPACK refuses: types int16")
    assert seen[1] == "xnnpack"


@pytest.mark.parametrize("group,op", [("DEPTHWISE_BLOCKS", "DepthwiseConv"), ("TRANSPOSE_CONV_BLOCKS", "ConvTranspose")])
def test_block_tail_matters(group, op, tmp_path):
    """The 8-channel-block hybrid is needed: upward rounding on every channel differs from OPT."""
    f = tmp_path / "all-upward.yaml"
    f.write_text(f"name: all-upward\nextends: tflite-optimized\nops:\n  {op}: {{requant: {{rounding: upward}}}}\n")
    out = CACHE.outcome(group, "opt", str(f))
    print("\n" + out.line(f"{group} [{op} upward on all channels] vs opt"))
    assert out.differing > 0


def test_requant_channel_blocks_hand_table():
    """acc = -4, M = 2^30, shift = -2 (exactly -0.5): SRDHM gives -2, then a tie at the 2-bit shift:
    upward -> 0 (block channels), gemmlowp RDBP half-away -> -1 (tail channels)."""
    from refinterp.quant.params import Requant
    from refinterp.quant.requant import Rounding

    eff = np.full(10, 0.125)  # QuantizeMultiplier(0.125) = (2^30, -2)
    rq = Requant.build(eff, Rounding.DOUBLE, 0, -128, 127, "int8", 8, Rounding.UPWARD)
    assert rq.M.tolist() == [1 << 30] * 10 and rq.shift.tolist() == [-2] * 10
    y = rq(np.full((2, 10), -4, np.int64))
    assert y.tolist() == [[0] * 8 + [-1] * 2] * 2


def test_arm64_scheme_resolves_single_rounding(tmp_path):
    """(Verified against the aarch64 build in test_arm64_litert.py.)"""
    import refinterp
    case = base.conv_cases("CONV_2D", 0, 31)[0]
    p = tmp_path / "c.tflite"
    p.write_bytes(case.model)
    plan = refinterp.Session(refinterp.load(p), "tflite-optimized-arm64").steps[0].plan
    assert plan.requant.rounding.value == "single"


def _scale_case(op: str, eff: float) -> Case:
    rng = np.random.default_rng(7)
    b = TFLiteBuilder()
    sx = sw = 0.5
    so = float(np.float32(sx * sw / eff))
    if op == "CONV_2D":
        x = b.tensor("x", (1, 4, 4, 2), "int8", scale=sx, zero_point=0)
        w = b.const("w", rand_q(rng, (3, 1, 1, 2), "int8", -1, 1), scale=sw, zero_point=0)
        y = b.tensor("y", (1, 4, 4, 3), "int8", scale=so, zero_point=0)
        opts = dict(padding="VALID", stride_h=1, stride_w=1)
    else:
        x = b.tensor("x", (2, 4), "int8", scale=sx, zero_point=0)
        w = b.const("w", rand_q(rng, (3, 4), "int8", -1, 1), scale=sw, zero_point=0)
        y = b.tensor("y", (2, 3), "int8", scale=so, zero_point=0)
        opts = dict(fused_activation="NONE")
    bt = b.const("bias", np.zeros(3, np.int32), scale=sx * sw, zero_point=0)
    b.op(op, [x, w, bt], [y], options=opts, version=4)
    xshape = (1, 4, 4, 2) if op == "CONV_2D" else (2, 4)
    return Case(f"{op}:eff{eff}", op, b.build([x], [y]), {"x": rand_q(rng, xshape, "int8", -1, 1)})


def test_xnnpack_requant_scale_limit(tmp_path):
    """Requantization scale 255 is delegated; >= 256 makes LiteRT fail, and refinterp refuses too."""
    import refinterp
    from refinterp.errors import ModelError
    from tests.conformance._int_oracle import Aborted, run_batch

    cases = [_scale_case(op, eff) for op in ("CONV_2D", "FULLY_CONNECTED") for eff in (255.0, 256.0)]
    res = run_batch([(c.model, c.feeds) for c in cases], "xnnpack")
    for i, (c, r) in enumerate(zip(cases, res)):
        p = tmp_path / f"m{i}.tflite"
        p.write_bytes(c.model)
        if c.id.endswith("eff255.0"):
            assert not isinstance(r, Aborted), c.id
            ours = refinterp.Session(refinterp.load(p), "tflite-xnnpack").run(c.feeds, capture="all")
            assert np.array_equal(ours["y"], r["y"]), c.id
        else:
            assert isinstance(r, Aborted) and "XNNPACK" in r.message, c.id
            with pytest.raises(ModelError, match="XNNPACK requantization scale"):
                refinterp.Session(refinterp.load(p), "tflite-xnnpack")


FAMILY = {"Conv", "DepthwiseConv", "ConvTranspose", "FullyConnected", "BatchMatMul", "AveragePool", "MaxPool",
          "ReduceMean", "ReduceSum", "ReduceMax"}
FIXTURES = ("mobilenet_v2_tiny_int8.tflite", "mobilenet_tiny_int16x8.tflite")


@pytest.mark.parametrize("backend", ["opt", "xnnpack"])
def test_converter_fixtures(backend):
    """Converter-made MobileNetV2-style models (int8 and 16x8): every op output of this family
    matches the runtime; other ops' differences are printed (owned by the element-wise kernels)."""
    from pathlib import Path

    import refinterp
    from tests.conformance._int_oracle import Aborted, run_batch

    root = Path(__file__).resolve().parents[1] / "fixtures" / "tflite"
    jobs = []
    for name in FIXTURES:
        g = refinterp.load(root / name)
        rng = np.random.default_rng(3)
        feeds = {n: rand_q(rng, g.tensors[n].shape, g.tensors[n].dtype) for n in g.inputs}
        jobs.append((g, (root / name).read_bytes(), feeds))
    res = run_batch([(m, f) for _, m, f in jobs], backend)
    for name, (g, _, feeds), r in zip(FIXTURES, jobs, res):
        assert not isinstance(r, Aborted), f"{name}: {r.message}"
        ours = refinterp.Session(g, {"opt": "tflite-optimized", "xnnpack": "tflite-xnnpack"}[backend]).run(
            feeds, capture="all")
        family_bad, other_bad, checked = [], [], 0
        for node in g.nodes:
            for o in node.outputs:
                if o not in r or o not in ours:
                    continue
                checked += 1
                n = int(np.count_nonzero(r[o] != ours[o])) if r[o].shape == ours[o].shape else r[o].size
                if n:
                    (family_bad if node.op in FAMILY else other_bad).append(f"{node.op} {o}: {n}/{r[o].size}")
        print(f"\n{name} vs {backend}: {checked} op outputs, {len(family_bad)} family + {len(other_bad)} other differ",
              *other_bad, sep="\n  ")
        assert checked >= len(g.nodes) and not family_bad, family_bad[:5]
