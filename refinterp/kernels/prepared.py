"""Run-time data a kernel derives from its plan (packed weights, lookup tables, per-shape geometry),
kept *on the plan itself*.

A Session owns its steps and their plans, so whatever is prepared here is freed with the Session:
no module-level cache, nothing keyed by ``id()`` that could outlive its object or be confused with
a later object given the same id.

The store is a private slot (``SLOT``): an attribute set beside the fields of the (frozen) dataclass
plan; it is never a dataclass field, so plan equality and ``describe`` are unchanged.  It remembers
the id of the plan that made it: a copied plan (``dataclasses.replace``, ``copy.copy``) carries its
parent's slot but gets a fresh one on first use, so a copy whose fields were changed never sees data
derived from its parent's.  Pickling a plan drops the store.

Per-input-shape data is bounded (``MAX_SHAPES`` per plan and key, least recently used dropped), so a
Session fed many different shapes does not grow without bound.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable

SLOT = "_refinterp_prepared"
MAX_SHAPES = 8


class _Store:
    __slots__ = ("owner", "data")

    def __init__(self, owner: int) -> None:
        self.owner = owner
        self.data: dict[Any, Any] = {}

    def __reduce__(self):  # pickled / deep-copied plans start empty (prepared data may hold closures)
        return (_Store, (-1,))

    def __repr__(self) -> str:
        return f"<prepared: {len(self.data)} entries>"


def _store(plan: Any) -> dict[Any, Any]:
    s = getattr(plan, "__dict__", {}).get(SLOT)
    if s is not None and s.owner == id(plan):
        return s.data
    s = _Store(id(plan))
    if hasattr(plan, "__dict__"):
        object.__setattr__(plan, SLOT, s)  # beside a frozen dataclass's fields, not one of them
    return s.data  # (other plan types: a throw-away store, i.e. nothing is kept)


def prepared(plan: Any, key: Any, build: Callable[..., Any], *args: Any) -> Any:
    """``build(plan, *args)``, computed once per plan and ``key`` (``key`` must name everything
    ``args`` the result depends on, e.g. the input dtype)."""
    d = _store(plan)
    try:
        return d[key]
    except KeyError:
        v = d[key] = build(plan, *args)
        return v


def per_shape(plan: Any, key: Any, shape: tuple, build: Callable[..., Any], *args: Any) -> Any:
    """``build(plan, *args)`` for one input ``shape`` (and ``key``), kept for the ``MAX_SHAPES`` most
    recently used shapes of this plan."""
    d = _store(plan)
    table = d.get(("shapes", key))
    if table is None:
        table = d[("shapes", key)] = OrderedDict()
    try:
        v = table[shape]
        table.move_to_end(shape)
        return v
    except KeyError:
        v = table[shape] = build(plan, *args)
        if len(table) > MAX_SHAPES:
            table.popitem(last=False)
        return v


def plan_fields(plan: Any) -> dict[str, Any]:
    """A plan's own fields (its ``describe()`` when it has one, else dataclass fields or dict items),
    without the prepared-data slot: what ``inspect`` and golden cases show."""
    import dataclasses

    if hasattr(plan, "describe"):
        d = dict(plan.describe())
    elif dataclasses.is_dataclass(plan) and not isinstance(plan, type):
        d = {f.name: getattr(plan, f.name) for f in dataclasses.fields(plan)}
    elif isinstance(plan, dict):
        d = dict(plan)
    else:
        d = {"plan": repr(plan)}
    d.pop(SLOT, None)
    return d
