"""The scheme file schema: every key at every level is declared here; anything else is an error.

Top level::

    name: tflite-reference          # must match the file name when found by name
    extends: _base-tflite-int        # optional parent scheme (files starting with "_" are not listed)
    describes: text                  # the real backend this scheme mimics
    backend_version: text            # the version of that backend it was checked against / describes
    status: verified | documented    # verified = compared against the real runtime at 0 differences;
                                     # documented = follows the cited source, not run
    source: [text, ...]              # citations (file paths @ commit, issue numbers)
    verified_against: text | [text]  # runtimes / test files used for ``status: verified``
    notes: text
    variants: [name, ...]            # kernel variants in order of preference
    requant: REQUANT                 # defaults for every op
    accumulator: ACCUMULATOR         # defaults for every op
    ops: {CanonicalOp: OP}           # per-op settings (canonical names, refinterp/kernels/OPS.md)
    nodes: {name-or-glob: OP}        # per-node overrides (see ``Scheme.for_node`` for precedence)
    graph_passes: [name, ...]        # graph rewrites applied before kernel resolution, in order
                                     # (names: refinterp/passes/__init__.py PASSES, e.g. fuse_qdq)

REQUANT::

    rounding: double | upward | single | mbqm64 | pot | float64_half_away | float32_half_even
              (definitions: refinterp/quant/requant.py)
    rounding64: the form for int64 accumulators (16x8 conv/FC with int64 bias; TFLite: mbqm64;
              LiteRT optimized FC: float64_half_away); ignored when ``rounding`` is a float form
    channel_block: N                 # vectorised channel blocks (LiteRT OPT DepthwiseConv / TransposeConv
                                     # 8, MEAN spatial fast path 16): channels c < N*floor(C/N) use
    block_rounding: an integer form  # ``block_rounding``, the C mod N tail channels ``rounding``
                                     # (int32 accumulators only; both keys must be given together)
    multiplier: double_product | f32_product   # the real multiplier of conv-family ops:
                                     # double(s_in) * double(s_w) / double(s_out) (default) or
                                     # double(float32(s_in * s_w)) / double(s_out)

ACCUMULATOR::

    bits: 32 | 64                    # width of the integer accumulator
    overflow: wrap | saturate        # what happens when the exact sum leaves that width

OP (also the value of a ``nodes:`` entry)::

    variants: [name, ...]            # overrides the scheme's list for this op / node
    compute: int | float             # float = dequantize inputs, float32 kernel, quantize the output
                                     # to the output tensor's params (a CPU float fallback)
    float_output: true | int16       # with compute: float, leave the outputs in float32 (not
                                     # quantized): the node's output activation is not quantized, as
                                     # when a Q/DQ pair is removed; ``int16``: rounded to a symmetric
                                     # 16-bit grid over the tensor's range (16-bit activations,
                                     # estimated); every consumer must then compute in float too
                                     # (refinterp sensitivity writes both)
    requant: REQUANT
    accumulator: ACCUMULATOR
    impl: name                       # per-op implementation choice, validated by the kernel
                                     # (e.g. AveragePool raw_q_average, Sigmoid lut | fixed_point)
    requires_equal_params: bool      # data-movement ops and pools: the backend refuses (ModelError at
                                     # Session build) a node whose quantized input and output params
                                     # differ, instead of copying codes (kernels/int/shape_quant.py; pools:
                                     # kernels/tflite/ref/pool.py, scales within 1e-6)
    refuse_dtypes: {dtype: reason}   # the backend has no kernel for this op when its first input
                                     # has that dtype: refused when the Session is built
                                     # (UnsupportedOpError naming node, op, dtype and the reason)
    delegate: OP                     # settings used when a delegate variant (``xnn``) accepts the
                                     # node; the op's other settings apply when it falls back to
                                     # the built-in kernels (e.g. XNNPACK fp32 requantization)
    hybrid: OP                       # merged over the op's settings for a dynamic-range ("hybrid")
                                     # node: float activations, a constant quantized integer input
                                     # (int8 weights); e.g. ``hybrid: {variants: [tflite_hybrid_ref]}``
    uint8: OP                        # merged over the op's settings for a node whose first input is
                                     # uint8 (legacy asymmetric QUANTIZED_UINT8 models), e.g. LiteRT's
                                     # optimized uint8 DepthwiseConv (its own kernel, not the int8 one)
"""
from __future__ import annotations

from typing import Any, Callable

from ..errors import SchemeError
from ..quant.requant import Rounding

Check = Callable[[str, Any, str], None]


def _fail(path: str, expected: str, got: Any, where: str) -> None:
    raise SchemeError(f"key '{path}': expected {expected}, got {got!r}", where)


def _str(path: str, v: Any, where: str) -> None:
    if not isinstance(v, str):
        _fail(path, "a string", v, where)


def _str_list(path: str, v: Any, where: str) -> None:
    if not (isinstance(v, list) and v and all(isinstance(x, str) for x in v)):
        _fail(path, "a non-empty list of strings", v, where)


def _str_or_list(path: str, v: Any, where: str) -> None:
    if isinstance(v, str):
        return
    if not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        _fail(path, "a string or a list of strings", v, where)


def _enum(*values: Any) -> Check:
    def check(path: str, v: Any, where: str) -> None:
        if isinstance(v, bool) or v not in values:  # True == 1 must not pass as an int choice
            _fail(path, "one of " + ", ".join(str(x) for x in values), v, where)
    return check


def _mapping(spec: dict[str, Check]) -> Check:
    def check(path: str, v: Any, where: str) -> None:
        if not isinstance(v, dict):
            _fail(path, "a mapping", v, where)
        for k, sub in v.items():
            p = f"{path}.{k}" if path else str(k)
            if k not in spec:
                raise SchemeError(f"unknown key '{p}' (expected one of: {', '.join(sorted(spec))})", where)
            spec[k](p, sub, where)
    return check


def _float_output(path: str, v: Any, where: str) -> None:
    if not (isinstance(v, bool) or v == "int16"):
        _fail(path, "true, false or int16", v, where)


def _bool(path: str, v: Any, where: str) -> None:
    if not isinstance(v, bool):
        _fail(path, "true or false", v, where)


def _pos_int(path: str, v: Any, where: str) -> None:
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        _fail(path, "a positive integer", v, where)


REQUANT: dict[str, Check] = {"rounding": _enum(*(r.value for r in Rounding)),
                             "rounding64": _enum(*(r.value for r in Rounding)),
                             # 8-bit FULLY_CONNECTED / CONV_2D run as a GEMV (one input row or one output
                             # pixel, >= 8 inputs, >= 4 outputs): LiteRT's custom GEMV kernel on ARM
                             # (vqrdmulh + vrshl = upward)
                             "gemv_rounding": _enum(*(r.value for r in Rounding if not r.is_float)),
                             "channel_block": _pos_int,
                             "block_rounding": _enum(*(r.value for r in Rounding if not r.is_float)),
                             "multiplier": _enum("double_product", "f32_product")}
ACCUMULATOR: dict[str, Check] = {"bits": _enum(32, 64), "overflow": _enum("wrap", "saturate")}
OP: dict[str, Check] = {
    "variants": _str_list,
    "compute": _enum("int", "float"),
    "float_output": _float_output,
    "requant": _mapping(REQUANT),
    "accumulator": _mapping(ACCUMULATOR),
    "impl": _str,
    "requires_equal_params": _bool,
    # How the backend's compiler evaluates ``a * b + c`` in the float code a kernel runs at prepare
    # (lookup-table builders): "none" rounds the product first (x86 without -mfma), "fma" fuses it
    # (clang's -ffp-contract=on on aarch64).
    "float_contract": _enum("none", "fma"),
    "refuse_dtypes": _mapping({d: _str for d in ("int8", "uint8", "int16", "uint16", "int32", "float32",
                                                  "float16")}),
}
OP["delegate"] = _mapping(dict(OP))  # the delegate's own settings (no nested delegate)
OP["hybrid"] = _mapping(dict(OP))  # settings for dynamic-range nodes (no nested hybrid)
OP["uint8"] = _mapping({k: v for k, v in OP.items() if k != "hybrid"})  # uint8-activation nodes


def _op_map(path: str, v: Any, where: str) -> None:
    """Per-op settings.  Whether each key names a registered op is checked against the kernels by
    refinterp/scheme_check.py (schemes/ does not import kernels/)."""
    if not isinstance(v, dict):
        _fail(path, "a mapping of canonical op names", v, where)
    op_check = _mapping(OP)
    for k, sub in v.items():
        op_check(f"{path}.{k}", {} if sub is None else sub, where)


def _node_map(path: str, v: Any, where: str) -> None:
    if not isinstance(v, dict):
        _fail(path, "a mapping of node names or glob patterns", v, where)
    op_check = _mapping(OP)
    for k, sub in v.items():
        op_check(f"{path}.{k}", {} if sub is None else sub, where)


def _graph_passes(path: str, v: Any, where: str) -> None:
    from ..passes import PASSES  # lazy: the passes import the IR only

    if not (isinstance(v, list) and all(isinstance(x, str) for x in v)):
        _fail(path, "a list of graph pass names", v, where)
    for name in v:
        if name not in PASSES:
            raise SchemeError(f"key '{path}': unknown graph pass '{name}' (known: {', '.join(sorted(PASSES))})",
                              where)


def top_level() -> dict[str, Check]:
    return {
        "name": _str, "extends": _str, "describes": _str, "backend_version": _str,
        "status": _enum("verified", "documented"), "source": _str_or_list,
        "verified_against": _str_or_list, "notes": _str, "variants": _str_list,
        "requant": _mapping(REQUANT), "accumulator": _mapping(ACCUMULATOR),
        "ops": _op_map, "nodes": _node_map, "graph_passes": _graph_passes,
    }


def validate(data: Any, where: str) -> None:
    """Raise SchemeError naming ``where`` and the dotted key path of the first syntax problem (the
    names the kernels must know -- ops, variants, impls -- are checked by refinterp/scheme_check.py)."""
    if not isinstance(data, dict):
        raise SchemeError("a scheme file must be a mapping at the top level", where)
    _mapping(top_level())("", data, where)
