"""A scheme checked against the kernel registry: the one place that knows both.

``schemes/`` validates a file's syntax (keys, enums, graph passes) without importing kernels;
here every name a scheme gives to the kernels is checked against what is registered, before any
model is loaded or run (``refinterp schemes check``, ``run``, ``diff``, ``Session``, ``load_scheme``
alike):

* each key of ``ops:`` is a canonical op with at least one registered kernel;
* each name in a ``variants:`` list (top level, per op, per node, ``delegate:``, ``hybrid:``,
  ``uint8:``) is a registered variant;
* each ``impl:`` is declared (``@kernel(..., impls=...)``) by a kernel registered for that op under
  one of the variants that apply to it (for ``nodes:`` entries, whose op is not known here: by any
  kernel under those variants);
* each other kernel setting of an op entry (``requant``, ``accumulator``, ``requires_equal_params``,
  ``delegate``) is read by such a kernel (``declare_settings`` / ``kernel(settings=...)``): a
  setting no kernel reads would change nothing, silently.

A problem is a ``SchemeError`` naming the file that holds the key (the scheme or the parent it
extends), the dotted key path, and the registered alternatives.
"""
from __future__ import annotations

from typing import Any, Iterator

from . import kernels  # noqa: F401  (registers every kernel)
from .errors import RefinterpError, SchemeError
from .kernels import registry
from .schemes import Scheme, load_scheme, scheme_documents

_CONTEXTS = ("delegate", "hybrid", "uint8")


def load_checked(name_or_path: str) -> Scheme:
    """``load_scheme`` followed by ``check_scheme``."""
    return check_scheme(load_scheme(name_or_path))


def check_scheme(scheme: Scheme) -> Scheme:
    """Raise SchemeError on the first name the kernels do not know; return the scheme.  Checks the
    resolved data (so schemes built in memory are checked too) and names the file that wrote the
    key."""
    reg = registry.registered()
    ops = {op for op, _v in reg}
    variants_known = {v for _op, v in reg}
    data = scheme.data
    top = list(data.get("variants") or ["float"])
    for keys, names in _variant_lists(data):
        for name in names:
            if name not in variants_known:
                _fail(scheme, keys, f"unknown kernel variant '{name}' (registered: "
                      f"{', '.join(sorted(variants_known))})")
    for op in (data.get("ops") or {}):
        if op not in ops:
            _fail(scheme, ("ops", op), f"unknown op '{op}' (not a canonical op with a registered kernel; "
                  f"see refinterp/kernels/OPS.md)")
    for keys, op, _key, value in _entry_keys(data, {"impl"}):
        if not isinstance(value, str):
            continue
        variants = _variants_for(data, keys, top)
        allowed = registry.declared_impls(op, variants)
        if value not in allowed:
            who = f"op {op}" if op else "any op"
            alts = ", ".join(sorted(allowed)) or "none: no kernel there reads impl"
            _fail(scheme, keys, f"impl '{value}' is not declared by a kernel of {who} under variants "
                  f"{', '.join(variants)} (declared: {alts})")
    for keys, op, key, _value in _entry_keys(data, registry.KERNEL_SETTINGS - {"impl"}):
        variants = _variants_for(data, keys, top)
        read = registry.declared_settings(op, variants)
        if key not in read:
            who = f"op {op}" if op else "any op"
            _fail(scheme, keys, f"setting '{key}' is read by no kernel of {who} under variants "
                  f"{', '.join(variants)} (they read: {', '.join(sorted(read)) or 'no settings'})")
    return scheme


def _entry_keys(doc: dict, wanted: frozenset | set) -> Iterator[tuple[tuple[str, ...], str | None, str, Any]]:
    """(key path, op or None for a ``nodes:`` entry, key, value) of every ``wanted`` key of an op or
    node entry and of its delegate / hybrid / uint8 blocks."""
    def walk(st: dict, keys: tuple[str, ...], op: str | None):
        for k, v in st.items():
            if k in wanted:
                yield keys + (k,), op, k, v
        for ctx in _CONTEXTS:
            if isinstance(st.get(ctx), dict):
                yield from walk(st[ctx], keys + (ctx,), op)

    for section in ("ops", "nodes"):
        for name, st in (doc.get(section) or {}).items():
            yield from walk(st or {}, (section, str(name)), str(name) if section == "ops" else None)


def _fail(scheme: Scheme, keys: tuple[str, ...], what: str) -> None:
    raise SchemeError(f"key '{'.'.join(keys)}': {what}", _written_in(scheme, keys))


def _written_in(scheme: Scheme, keys: tuple[str, ...]) -> str:
    """The file (the scheme's own or a parent it extends) whose own data holds ``keys``."""
    if not scheme.path:
        return f"scheme '{scheme.name}'"
    try:
        for where, doc in scheme_documents(scheme):
            if _at(doc, keys) is not None:
                return where
    except RefinterpError:  # a parent file changed since loading: name the scheme's own file
        pass
    return scheme.path


def _at(doc: Any, keys: tuple[str, ...]) -> Any:
    for k in keys:
        if not isinstance(doc, dict) or k not in doc:
            return None
        doc = doc[k]
    return doc


def _variant_lists(data: Any, keys: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], list]]:
    """(key path, list) of every ``variants:`` list in a scheme document."""
    if not isinstance(data, dict):
        return
    for k, v in data.items():
        p = keys + (str(k),)
        if k == "variants" and isinstance(v, list):
            yield p, v
        elif isinstance(v, dict):
            yield from _variant_lists(v, p)


def _variants_for(data: dict, keys: tuple[str, ...], top: list[str]) -> list[str]:
    """The variant list in force at ``keys`` (the innermost ``variants:`` on the way there)."""
    found, node = top, data
    for k in keys[:-1]:
        node = node.get(k) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get("variants"), list):
            found = list(node["variants"])
    return found
