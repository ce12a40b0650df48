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


@dataclass
class PrepareContext:
    node: Node
    inputs: list[TensorInfo | None]
    outputs: list[TensorInfo]
    settings: dict[str, Any] = field(default_factory=dict)

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


_REGISTRY: dict[tuple[str, str], Kernel] = {}


def kernel(op: str | tuple[str, ...], variant: str | tuple[str, ...] = "float", *, prepare=None,
           raw_inputs: bool = False, impls: tuple[str, ...] | dict[str, tuple[str, ...]] = ()):
    """Decorator registering ``run`` for one or several canonical ops under one or several variants.

    Variant names in use: ``float`` (float32 compute; quantized inputs arrive dequantized),
    ``int`` (generic integer kernels exact for every backend: data movement, max pool...), and
    backend-specific integer variants named by the schemes (``tflite_ref``, ``xnn``, ...).
    ``impls``: the ``impl`` values the kernel's prepare accepts (a dict gives them per op).
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
                _REGISTRY[key] = Kernel(o, v, fn, prepare or _default_prepare, raw_inputs, own)
        return fn

    return deco


@dataclass(frozen=True)
class Delegate:
    """What a ``prepare`` returns to hand its node to another registered kernel (with that kernel's
    plan): the session then runs, reports and describes the node as that kernel's.  E.g. a
    variant that only changes float nodes passes quantized ones on to the usual kernel."""

    kernel: "Kernel"
    plan: Any


def resolve_delegate(k: "Kernel", plan: Any) -> tuple["Kernel", Any]:
    """Follow ``Delegate`` results to the kernel that actually runs the node."""
    while isinstance(plan, Delegate):
        k, plan = plan.kernel, plan.plan
    return k, plan


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
