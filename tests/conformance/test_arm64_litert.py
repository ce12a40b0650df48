"""tflite-optimized-arm64 and tflite-xnnpack-arm64 against LiteRT 2.3.0's own aarch64 build, run
under qemu user-mode emulation (refinterp/dumps/arm64_env.py; tools/setup_arm64_env.py builds the
environment, `make test` runs it when the machine allows): 0 differing elements on every tensor.

Oracles: ``opt-arm64`` (BUILTIN_WITHOUT_DEFAULT_DELEGATES) and ``xnnpack-arm64`` (BUILTIN, XNNPACK
delegate, experimental_preserve_all_tensors), each on three emulated cores that select different
GEMM kernels: Cortex-A76 (dot-product; every family), Cortex-A53 (no dot-product) and an i8mm core
(SMMLA; qemu ``max`` with SME off), the last two on the GEMM families and the models.  Families: every
single-op sweep of the x86 tflite-optimized / tflite-xnnpack tests, ARM-specific sweeps
(``_arm64_cases.arm_extra_cases``), and 17 integer models.  For XNNPACK the delegation decision is
also compared node by node.  The x86 schemes differ from these oracles on named families, so the
tests can fail.

tflite-runtime 2.14 (the old package): its aarch64 wheel against the ``-arm64-2.14`` schemes (OPT on
A76 and A53, REF on A76), and its x86-64 wheel, run on this host, against tflite-optimized /
tflite-reference / tflite-xnnpack (on x86 it computes what LiteRT 2.3 does, delegation included).
What a runtime refuses or crashes on is asserted as a finding (``ABORTS_214``).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ai_edge_litert")

import refinterp  # noqa: E402
from tests.conformance._arm64_cases import families, model_feeds  # noqa: E402
from tests.conformance._int_oracle import DELEGATED_KEY, Aborted, arm64_skip_reason, compare, run_batch  # noqa: E402

_WHY = arm64_skip_reason("opt-arm64")
pytestmark = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")

GEMM = ("CONV_2D", "DEPTHWISE_CONV_2D", "TRANSPOSE_CONV", "CONV_BLOCKS", "DEPTHWISE_BLOCKS", "TRANSPOSE_CONV_BLOCKS",
        "CONV_16x8", "FULLY_CONNECTED", "FULLY_CONNECTED_16x8", "FC_GEMV", "BATCH_MATMUL", "BATCH_MATMUL_16",
        "BATCH_MATMUL_16x8", "MODELS", "UINT8")
FAMILY_NAMES = ("AVERAGE_POOL_2D", "MAX_POOL_2D", "MEAN", "MEAN_HW_FAST_PATH", "SUM", "SUM_INT16", "REDUCE_MAX",
                "ELEMENTWISE", "ACTIVATION", "MISC", "ARM_EXTRA") + GEMM
PARAMS = [(f, f"{kind}-arm64{core}") for kind in ("opt", "xnnpack") for core in ("", "@a53", "@i8mm")
          for f in FAMILY_NAMES if not core or f in GEMM]
PARAMS += [(f, f"opt-arm64-2.14{core}") for core in ("", "@a53") for f in FAMILY_NAMES if not core or f in GEMM]
# (int16 SUM under a reference resolver: LiteRT's REF reads it as bytes; tflite-reference refuses the node)
PARAMS += [(f, be) for be in ("ref-arm64-2.14", "xnnpack-arm64-2.14", "opt-2.14", "xnnpack-2.14", "ref-2.14")
           for f in FAMILY_NAMES
           if not (be == "ref-2.14" and f == "SUM_INT16")]


def scheme_of(backend: str) -> str:
    """The scheme each oracle is verified against.  tflite-runtime 2.14 on x86-64 ("opt-2.14",
    "ref-2.14") computes what LiteRT 2.3 does there: the x86 schemes describe it too."""
    base = backend.partition("@")[0]
    return {"opt-arm64": "tflite-optimized-arm64", "xnnpack-arm64": "tflite-xnnpack-arm64",
            "opt-arm64-2.14": "tflite-optimized-arm64-2.14", "ref-arm64-2.14": "tflite-reference-arm64-2.14",
            # the aarch64 2.14 wheel's XNNPACK takes no quantized node: its default resolver = its built-ins
            "xnnpack-arm64-2.14": "tflite-optimized-arm64-2.14",
            "opt-2.14": "tflite-optimized", "ref-2.14": "tflite-reference", "xnnpack-2.14": "tflite-xnnpack"}[base]


# What each tflite-runtime 2.14 build refuses or crashes on: each must still fail there (a finding);
# refinterp runs the node unless the scheme refuses it too.  The aarch64 wheel is an older build than
# the x86-64 one: it lacks more kernels and operator versions.
_ARM = {
    "BMM#": "int16 x int8 BATCH_MATMUL: 'lhs_data->type == rhs_data->type was not true'",
    "SUM#": "int16 SUM with different input / output scales: 'input->params.scale != output scale'",
    "gelu-int16": "no int16 GELU (refinterp refuses it too)",
    "rsqrt-int16": "no int16 RSQRT (refinterp refuses it too)",
    "requantize-int8-int16": "no int8 -> int16 QUANTIZE",
}
_D2S = {"depth_to_space-int8": "DEPTH_TO_SPACE v2: 'Didn't find op for builtin opcode'",
        "depth_space_int8.tflite": "DEPTH_TO_SPACE v2: 'Didn't find op for builtin opcode'"}
_ARM_REF = {"BMM#": "BATCH_MATMUL v4: 'Didn't find op for builtin opcode'",
            "TRANSPOSE_CONV#": "TRANSPOSE_CONV v4: 'Didn't find op for builtin opcode'",
            "dequantize-int8-perchannel": "DEQUANTIZE v5: 'Didn't find op for builtin opcode'", **_D2S}
ABORTS_214 = {
    "opt-arm64-2.14": {**_ARM, "attention_block_int8.tflite": "SIGSEGV on this converter-made attention block"},
    "ref-arm64-2.14": {**_ARM_REF, **_ARM},
    "xnnpack-arm64-2.14": {**_ARM, "attention_block_int8.tflite": "SIGSEGV on this converter-made attention block"},
    "ref-2.14": _D2S,
    "opt-2.14": {},
    "xnnpack-2.14": {},
}
# ... and what refinterp does not model: {backend (with or without @core): {case id: (family, reason)}},
# each a strict xfail in test_known_differences (the difference must still be there)
_U8_ARM = {"DEPTHWISE_CONV_2D:u8,zw128,NONE": ("UINT8", "the ARM NEON uint8 depthwise kernel (filter zero point "
                                                         "128) rounds 6 of 2304 codes differently; not modelled"),
           "RESIZE_BILINEAR:u8,8x8->33x33x8,align0,half1": ("UINT8", "the ARM uint8 bilinear resize with half-pixel "
                                                                     "centres; not modelled")}
_QU8_A53 = "XNNPACK's QU8 convolution kernels for cores without dot-product compute differently; not modelled"
KNOWN = {
    "opt-arm64": _U8_ARM,
    "opt-arm64-2.14": _U8_ARM,
    "xnnpack-arm64-2.14": _U8_ARM,
    "ref-arm64-2.14": {"RESIZE_BILINEAR:u8,8x8->33x33x8,align0,half1": _U8_ARM["RESIZE_BILINEAR:u8,8x8->33x33x8,align0,half1"],
                       "attention_block_int8.tflite": ("MODELS", "2.14's aarch64 reference kernels return different values "
                                                                 "for the same input on every run (the 3-D "
                                                                 "FULLY_CONNECTED feeding a RESHAPE): a runtime fault")},
    "xnnpack-arm64@a53": {c: ("UINT8", _QU8_A53) for c in (
        "CONV_2D:u8,zw100,RELU6", "CONV_2D:u8,zw127,NONE", "CONV_2D:u8,zw128,NONE", "FULLY_CONNECTED:u8,zw127,NONE",
        "FULLY_CONNECTED:u8,zw128,NONE", "mobilenet-like-u8")},
}


def _skip_reason(backend: str) -> str | None:
    return arm64_skip_reason(backend.partition("@")[0] if "arm64" in backend else backend)


def _abort_reason_214(backend: str, family: str, cid: str) -> str | None:
    for prefix, why in ABORTS_214.get(backend.partition("@")[0], {}).items():
        if cid.startswith(prefix) and (prefix != "BMM#" or family == "BATCH_MATMUL_16x8" or "ref-" in backend) \
                and (prefix != "SUM#" or family == "SUM_INT16"):
            return why
    return None


def _known(backend: str) -> dict[str, tuple[str, str]]:
    return {**KNOWN.get(backend.partition("@")[0], {}), **KNOWN.get(backend, {})}


class _State:
    """Cases built once; one oracle child per backend for every family; refinterp per (scheme, case)."""

    def __init__(self) -> None:
        self._fam: dict | None = None
        self._oracle: dict[str, dict] = {}
        self._ours: dict[tuple[str, str, str], tuple] = {}

    def families(self) -> dict[str, list]:
        if self._fam is None:
            fam = families()
            fam["MODELS"] = [(i, m, model_feeds(i, m)) for i, m, _ in fam["MODELS"]]
            self._fam = fam
        return self._fam

    def oracle(self, backend: str, family: str) -> list:
        if backend not in self._oracle:
            core = backend.partition("@")[2]
            todo = [f for f in FAMILY_NAMES if not core or f in GEMM]
            flat = [(m, f) for fam in todo for _, m, f in self.families()[fam]]
            res = iter(run_batch(flat, backend, timeout=900.0))
            self._oracle[backend] = {fam: [next(res) for _ in self.families()[fam]] for fam in todo}
        return self._oracle[backend][family]

    def ours(self, scheme: str, family: str, cid: str, model: bytes, feeds) -> tuple[dict, list]:
        key = (scheme, family, cid)
        if key not in self._ours:
            with tempfile.TemporaryDirectory(prefix="arm64_conf_") as tmp:
                p = Path(tmp) / "m.tflite"
                p.write_bytes(model)
                sess = refinterp.Session(refinterp.load(p), scheme)
                flags = [getattr(st.plan, "executed_by", "") for st in sess.steps]
                self._ours[key] = (sess.run(feeds, capture="all"), flags)
        return self._ours[key]


STATE = _State()


def _outcome(family: str, backend: str, scheme: str, only: str | None = None):
    """(cases, tensors, differing elements, notes, aborts), delegation mismatches counted as differences.
    Expected runtime failures (``ABORTS_214``) must fail (else they count as an abort note) and are not
    compared; ``KNOWN`` cases are compared only when ``only`` names them."""
    tensors = diff = compared = 0
    notes, aborts = [], []
    cases = STATE.families()[family]
    for (cid, model, feeds), res in zip(cases, STATE.oracle(backend, family)):
        if only is not None and cid != only:
            continue
        expected = _abort_reason_214(backend, family, cid)
        if expected is not None:
            if not isinstance(res, Aborted):
                aborts.append(f"{cid}: expected the runtime to fail ({expected}) but it ran")
            continue
        if only is None and cid in _known(backend):
            continue
        if isinstance(res, Aborted):
            aborts.append(f"{cid}: {res.message}")
            continue
        ours, executed_by = STATE.ours(scheme, family, cid, model, feeds)
        compared += 1
        t, d, n = compare(res, ours)
        tensors += t
        diff += d
        if d:
            notes.append(f"{cid}: " + "; ".join(n))
        if DELEGATED_KEY in res:
            for j, (flag, eb) in enumerate(zip(np.asarray(res[DELEGATED_KEY]), executed_by)):
                if eb and bool(flag) != (eb == "xnnpack"):
                    diff += 1
                    notes.append(f"{cid}: node {j} XNNPACK delegated={bool(flag)}, refinterp {eb!r}")
    return compared, tensors, diff, notes, aborts


@pytest.mark.parametrize("family,backend", PARAMS, ids=[f"{f}[{b}]" for f, b in PARAMS])
def test_bit_exact(family, backend):
    if _skip_reason(backend):
        pytest.skip(_skip_reason(backend))
    scheme = scheme_of(backend)
    n, tensors, diff, notes, aborts = _outcome(family, backend, scheme)
    print(f"\n{family} [{scheme}] vs {backend}: {n} cases compared, {tensors} tensors, {diff} differing, "
          f"{len(aborts)} unexpected aborts")
    assert not aborts, "oracle aborted (finding): " + " || ".join(aborts[:3])
    assert diff == 0, " || ".join(notes[:5])
    assert tensors >= 2 * n


@pytest.mark.parametrize("family,backend,scheme", [
    ("CONV_2D", "opt-arm64", "tflite-optimized"),           # ruy ARM: single rounding, x86: upward
    ("FULLY_CONNECTED", "opt-arm64", "tflite-optimized"),
    ("FULLY_CONNECTED_16x8", "xnnpack-arm64", "tflite-xnnpack"),  # built-in 16x8 FC on ARM (ruy)
    ("ARM_EXTRA", "xnnpack-arm64", "tflite-xnnpack"),        # NEON fixed-point MUL, FMA-built int16 tables
    ("MISC", "xnnpack-arm64", "tflite-xnnpack"),             # built-in SOFTMAX / QUANTIZE ARM paths
    ("ARM_EXTRA", "opt-arm64", "tflite-optimized"),
])
def test_x86_schemes_differ(family, backend, scheme):
    """The ARM oracles discriminate: the x86 scheme of the same runtime differs on these families."""
    _, tensors, diff, _, _ = _outcome(family, backend, scheme)
    print(f"\n{family} [{scheme}] vs {backend}: {tensors} tensors, {diff} differing")
    assert diff > 0


def test_fma_tables_matter(tmp_path):
    """Without ``float_contract: fma`` the int16 GELU / RSQRT tables differ from the aarch64 build."""
    f = tmp_path / "no-fma.yaml"
    f.write_text("name: no-fma\nextends: tflite-optimized-arm64\nops:\n  Gelu: {float_contract: none}\n"
                 "  Rsqrt: {float_contract: none}\n")
    _, _, diff, notes, _ = _outcome("ARM_EXTRA", "opt-arm64", str(f))
    print(f"\nARM_EXTRA [float_contract none] vs opt-arm64: {diff} differing")
    assert diff > 0 and all(n.startswith(("gelu", "rsqrt")) for n in notes), notes[:3]


def test_mul_rndnu_matters(tmp_path):
    """XNNPACK's MUL on ARM is the fixed-point NEON kernel: its fp32 (x86) form differs."""
    f = tmp_path / "fp32-mul.yaml"
    f.write_text("name: fp32-mul\nextends: tflite-xnnpack-arm64\nops:\n  Mul: {delegate: {impl: fp32}}\n")
    _, _, diff, notes, _ = _outcome("ARM_EXTRA", "xnnpack-arm64", str(f))
    print(f"\nARM_EXTRA [Mul fp32] vs xnnpack-arm64: {diff} differing")
    assert diff > 0 and all(n.startswith("mul") for n in notes), notes[:3]


_KNOWN_PARAMS = sorted({(cid, fam, be) for be, cases in KNOWN.items() for cid, (fam, _) in cases.items()
                        for be in ([be] if "@" in be or be.endswith("2.14") else [be, be + "@a53", be + "@i8mm"])})


@pytest.mark.parametrize("cid,family,backend", _KNOWN_PARAMS)
def test_known_differences(cid, family, backend):
    """Strict: the difference is still there (when it goes away, the scheme can claim the case)."""
    if _skip_reason(backend):
        pytest.skip(_skip_reason(backend))
    _, tensors, diff, _, aborts = _outcome(family, backend, scheme_of(backend), only=cid)
    assert not aborts and tensors > 0
    assert diff > 0, f"{cid} now equals {backend}: drop it from KNOWN"
    pytest.xfail(_known(backend)[cid][1])


def test_214_differs_from_23():
    """tflite-runtime 2.14 on ARM64 is not LiteRT 2.3 on ARM64: the 2.3 scheme differs on its conv sweeps."""
    if _skip_reason("opt-arm64-2.14"):
        pytest.skip(_skip_reason("opt-arm64-2.14"))
    _, _, diff, _, _ = _outcome("CONV_2D", "opt-arm64-2.14", "tflite-optimized-arm64")
    assert diff > 0


def test_214_arm_xnnpack_takes_no_quantized_node():
    """The aarch64 tflite-runtime 2.14 wheel's XNNPACK delegate leaves every quantized node to the
    built-in kernels (its default resolver computes what tflite-optimized-arm64-2.14 does)."""
    if _skip_reason("xnnpack-arm64-2.14"):
        pytest.skip(_skip_reason("xnnpack-arm64-2.14"))
    delegated = checked = 0
    for family in ("CONV_2D", "FULLY_CONNECTED", "ELEMENTWISE", "MODELS"):
        for res in STATE.oracle("xnnpack-arm64-2.14", family):
            if isinstance(res, Aborted) or DELEGATED_KEY not in res:
                continue
            checked += 1
            delegated += int(np.asarray(res[DELEGATED_KEY]).sum())
    assert checked > 100 and delegated == 0


def test_214_signed_leaky_matters(tmp_path):
    """2.14 on aarch64 multiplies LEAKY_RELU's negative branch by the signed multiplier: 2.3's form differs."""
    if _skip_reason("opt-arm64-2.14"):
        pytest.skip(_skip_reason("opt-arm64-2.14"))
    f = tmp_path / "abs.yaml"
    f.write_text("name: abs\nextends: tflite-optimized-arm64-2.14\nops:\n  LeakyRelu: {impl: abs_negate}\n")
    _, _, diff, notes, _ = _outcome("ACTIVATION", "opt-arm64-2.14", str(f))
    assert diff > 0 and all(n.startswith("leakyrelu-int8-negalpha") for n in notes), notes[:3]


def test_refused_int16_gelu_under_214(tmp_path):
    """refinterp refuses what 2.14 cannot run, naming the node and the runtime."""
    from refinterp.errors import UnsupportedOpError

    cid, model, _ = next(c for c in STATE.families()["ACTIVATION"] if c[0].startswith("gelu-int16"))
    p = tmp_path / "m.tflite"
    p.write_bytes(model)
    with pytest.raises(UnsupportedOpError, match="tflite-runtime 2.14 has no int16 GELU"):
        refinterp.Session(refinterp.load(p), "tflite-optimized-arm64-2.14")


def test_gemv_rounding_matters(tmp_path):
    """One-row FULLY_CONNECTED and one-pixel CONV_2D run LiteRT's custom NEON GEMV on ARM: ruy's single
    rounding (the rest of the GEMMs) differs on the FC_GEMV family."""
    f = tmp_path / "no-gemv.yaml"
    f.write_text("name: no-gemv\nextends: tflite-optimized-arm64\nops:\n  Conv: {requant: {gemv_rounding: single}}\n"
                 "  FullyConnected: {requant: {gemv_rounding: single}}\n")
    _, _, diff, notes, _ = _outcome("FC_GEMV", "opt-arm64", str(f))
    assert diff > 0 and any(n.startswith("CONV") for n in notes) and any(n.startswith("FC") for n in notes), notes
