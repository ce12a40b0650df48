"""Kernel registry: ``(canonical op, variant) -> Kernel``.

A kernel is maths only.  ``prepare(node, ctx)`` runs once per node when a Session is built and
returns the node's *plan*, a frozen dataclass (attributes with defaults resolved, multipliers,
tables...; ``AttrPlan`` when the attributes are all a kernel reads);
``run(plan, *inputs)`` runs per inference and returns one ndarray or a tuple of them.
Missing optional inputs arrive as ``None``.

``ctx`` is a ``PrepareContext``: the node's input/output ``TensorInfo``s, constant input values,
and ``settings`` (the op's resolved numeric settings from the scheme, a plain dict; kernels never
see the scheme itself).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

import numpy as np

from ..errors import UnsupportedOpError
from ..ir import Node, TensorInfo


class SettingsView(Mapping):
    """An op's resolved settings as its kernel's ``prepare`` sees them (read-only), recording which
    top-level keys the kernel reads so the Session can hold them against what the kernel declared
    (``declare_settings`` / ``kernel(settings=...)``)."""

    def __init__(self, data: Mapping[str, Any], read: set[str] | None = None) -> None:
        self._data = dict(data)
        self.read: set[str] = set() if read is None else read

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return self._data[key]

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self.read.add(key)
        return key in self._data

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def derived(self, data: Mapping[str, Any]) -> "SettingsView":
        """Other settings for a kernel this one hands the node to (reads recorded in the same set)."""
        return SettingsView(data, self.read)

    def raw(self) -> dict[str, Any]:
        """The settings without recording a read (to derive settings for another kernel)."""
        return dict(self._data)


@dataclass
class PrepareContext:
    node: Node
    inputs: list[TensorInfo | None]
    outputs: list[TensorInfo]
    settings: Mapping[str, Any] = field(default_factory=dict)

    def const(self, i: int) -> np.ndarray | None:
        """Constant value of input ``i`` (None when absent or computed at run time)."""
        if i >= len(self.inputs) or self.inputs[i] is None:
            return None
        return self.inputs[i].const


@dataclass(frozen=True)
class AttrPlan:
    """The plan of a kernel that needs nothing but its node's attributes (read-only) and where it
    sits: the default for kernels registered without a ``prepare``."""

    attrs: Mapping[str, Any]
    where: str = ""
    out_dtype: Any = None
    out_dtypes: tuple = ()

    def attr(self, name: str, default: Any = None) -> Any:
        v = self.attrs.get(name)
        return default if v is None else v

    def describe(self) -> dict[str, Any]:
        return dict(self.attrs)


def attr_plan(node: Node, ctx: PrepareContext) -> AttrPlan:
    outs = tuple(o.dtype if o is not None else None for o in ctx.outputs)
    return AttrPlan(MappingProxyType(dict(node.attrs)), f"node '{node.name}' ({node.source_op or node.op})",
                    outs[0] if outs else None, outs)


def is_plan(plan: Any) -> bool:
    """A plan is a frozen dataclass (or a ``Delegate``); anything else is a kernel-author error."""
    return dataclasses.is_dataclass(plan) and not isinstance(plan, type) and plan.__dataclass_params__.frozen


_default_prepare = attr_plan


@dataclass(frozen=True)
class Kernel:
    op: str
    variant: str
    run: Callable[..., Any]
    prepare: Callable[[Node, PrepareContext], Any] = _default_prepare
    # Inputs given to the kernel as stored integers even under a float variant (e.g. Dequantize).
    raw_inputs: bool = False
    # The values this kernel accepts for the scheme's ``impl`` setting (empty: it reads no ``impl``).
    # refinterp/scheme_check.py refuses a scheme naming any other before anything runs.
    impls: tuple[str, ...] = ()
    # The scheme settings (top-level keys of an op entry: requant, accumulator, impl, ...) its prepare
    # reads; a scheme setting one for an op whose kernels read none of it is refused, and a kernel
    # reading an undeclared one is a kernel-author error the Session reports.
    settings: frozenset[str] = frozenset()


_REGISTRY: dict[tuple[str, str], Kernel] = {}
_MODULE_SETTINGS: dict[str, frozenset[str]] = {}

# Settings the Session itself reads (kernels never do): variants, compute, float_output, refuse_dtypes;
# hybrid / uint8 / delegate blocks are merged before a kernel sees them (delegate: by the xnn kernels,
# which declare it).
SESSION_SETTINGS = frozenset({"variants", "compute", "float_output", "refuse_dtypes", "hybrid", "uint8"})
# The op-entry keys a kernel may read.
KERNEL_SETTINGS = frozenset({"requant", "accumulator", "impl", "requires_equal_params", "delegate", "float_contract"})


def module_settings(*modules: str) -> frozenset[str]:
    """What ``declare_settings`` recorded for these modules (registration helpers pass it on)."""
    return frozenset().union(*(_MODULE_SETTINGS.get(m, frozenset()) for m in modules))


def declare_settings(module: str, *keys: str) -> None:
    """The settings every kernel registered from ``module`` reads (call before its registrations)."""
    unknown = set(keys) - KERNEL_SETTINGS
    if unknown:
        raise RuntimeError(f"{module}: unknown kernel settings {sorted(unknown)}")
    _MODULE_SETTINGS[module] = frozenset(keys)


def kernel(op: str | tuple[str, ...], variant: str | tuple[str, ...] = "float", *, prepare=None,
           raw_inputs: bool = False, impls: tuple[str, ...] | dict[str, tuple[str, ...]] = (),
           settings: tuple[str, ...] = ()):
    """Decorator registering ``run`` for one or several canonical ops under one or several variants.

    Variant names in use: ``float`` (float32 compute; quantized inputs arrive dequantized),
    ``int`` (generic integer kernels exact for every backend: data movement, max pool...), and
    backend-specific integer variants named by the schemes (``tflite_ref``, ``xnn``, ...).
    ``impls``: the ``impl`` values the kernel's prepare accepts (a dict gives them per op).
    ``settings``: scheme settings read besides those its module declares (``declare_settings``);
    ``impl`` is implied by ``impls``.
    """
    ops = (op,) if isinstance(op, str) else tuple(op)
    variants = (variant,) if isinstance(variant, str) else tuple(variant)

    def deco(fn):
        for o in ops:
            for v in variants:
                key = (o, v)
                if key in _REGISTRY:
                    raise RuntimeError(f"kernel {key} registered twice")
                own = tuple(impls.get(o, ())) if isinstance(impls, dict) else tuple(impls)
                reads = set(settings) | _MODULE_SETTINGS.get(fn.__module__, frozenset()) | \
                    _MODULE_SETTINGS.get(getattr(prepare, "__module__", ""), frozenset())
                if own:
                    reads.add("impl")
                if reads - KERNEL_SETTINGS:
                    raise RuntimeError(f"kernel {key}: unknown settings {sorted(reads - KERNEL_SETTINGS)}")
                _REGISTRY[key] = Kernel(o, v, fn, prepare or _default_prepare, raw_inputs, own, frozenset(reads))
        return fn

    return deco


@dataclass(frozen=True)
class Delegate:
    """What a ``prepare`` returns to hand its node to another registered kernel (with that kernel's
    plan): the session then runs, reports and describes the node as that kernel's.  E.g. a
    variant that only changes float nodes passes quantized ones on to the usual kernel."""

    kernel: "Kernel"
    plan: Any


def check_settings_read(read: set[str], kernels: list["Kernel"]) -> None:
    """A kernel-author error when a prepare read a setting no kernel in its delegation chain declares."""
    extra = set(read) - set().union(*(k.settings for k in kernels)) - SESSION_SETTINGS
    if extra:
        names = ", ".join(f"({k.op}, {k.variant})" for k in kernels)
        raise RuntimeError(f"kernel {names} read the scheme setting(s) {', '.join(sorted(extra))} "
                           f"it does not declare")


def resolve_delegate(k: "Kernel", plan: Any) -> tuple[list["Kernel"], Any]:
    """Follow ``Delegate`` results: the kernels on the way (the last one runs the node) and its plan."""
    chain = [k]
    while isinstance(plan, Delegate):
        chain.append(plan.kernel)
        plan = plan.plan
    return chain, plan


def lookup(op: str, variants: list[str], *, node: Node | None = None, fmt: str = "") -> Kernel:
    """First registered kernel among ``variants`` (in order of preference)."""
    for v in variants:
        k = get(op, v)
        if k is not None:
            return k
    where = f"node '{node.name}' ({node.source_op or op}" + (f", {fmt}" if fmt else "") + ")" if node else op
    have = sorted(v for (o, v) in _REGISTRY if o == op)
    hint = f"; registered variants: {', '.join(have)}" if have else ""
    raise UnsupportedOpError(f"unsupported op {op} (variants tried: {', '.join(variants)}) at {where}{hint}")


def registered() -> dict[tuple[str, str], Kernel]:
    return dict(_REGISTRY)


def ops_with_variant(variant: str) -> list[str]:
    return sorted(o for (o, v) in _REGISTRY if v == variant)


def declared_settings(op: str | None, variants: list[str]) -> set[str]:
    """Scheme settings read by the kernels registered for ``op`` (any op when None) under ``variants``."""
    return {k for (o, v), kk in _REGISTRY.items() if v in variants and (op is None or o == op)
            for k in kk.settings}


def declared_impls(op: str | None, variants: list[str]) -> set[str]:
    """``impl`` values declared by the kernels registered for ``op`` (any op when None) under
    ``variants``."""
    return {i for (o, v), k in _REGISTRY.items() if v in variants and (op is None or o == op)
            for i in k.impls}


def get(op: str, variant: str) -> Kernel | None:
    """The kernel registered for ``(op, variant)``, or None."""
    return _REGISTRY.get((op, variant))


def require(op: str, variant: str) -> Kernel:
    """The kernel registered for ``(op, variant)`` (a registration-time invariant: KeyError if not)."""
    return _REGISTRY[(op, variant)]
