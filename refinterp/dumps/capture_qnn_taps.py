"""Which QuantizeLinear outputs ``capture --runtime qnn-htp`` may expose without changing what the HTP computes.

Exposing a tensor as a graph output keeps the HTP from fusing its consumer into its producer (measured: v73 runs a
HardSwish after a Conv on the Conv's own result unless the Conv's output is needed), so the exposed run's values
downstream are not the deployed device's.  The perturbation is visible in the tensors next downstream of the
exposed one (its *witnesses*: the QuantizeLinear outputs of the units reading it) -- not always in the graph
outputs (a MobileNetV3 at v73: 2 of 5 such tensors leave the output unchanged on a sample while moving 250-770
codes of the HardSwish after them).

Search: the taps are split into groups none of which holds a tap and one of its witnesses (greedy colouring), so
a perturbing tap's witnesses stay exposed while its group is hidden; a group whose hiding changes any exposed
tensor is halved until the perturbing taps are found (about 2 log2(group size) sessions each, one per group when
none perturbs).  A probe the QNN EP refuses (it leaves some ops unassigned under some exposure patterns) is
halved too; a tap whose own probe is refused stays (the capture's check of the model's outputs still applies).
Each probe builds the model on the emulator (1-10 s): a budget of probes bounds the search, the taps it leaves
unresolved are left out (a MobileNetV3-Small at uint16 on v73: 114 taps, 9 s a probe, the unbounded search ran
over 17 minutes)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import Graph


def witnesses(graph: Graph, taps: tuple[str, ...]) -> dict[str, set[str]]:
    """Each tap's witnesses: the taps reached from it through nodes other than QuantizeLinear."""
    readers: dict[str, list] = {}
    for n in graph.nodes:
        for i in set(n.inputs):
            readers.setdefault(i, []).append(n)
    tapset = set(taps)
    out: dict[str, set[str]] = {}
    for t in taps:
        found: set[str] = set()
        seen, stack = {t}, [t]
        while stack:
            for n in readers.get(stack.pop(), ()):
                for o in n.outputs:
                    if not o or o in seen:
                        continue
                    seen.add(o)
                    if n.op == "QuantizeLinear" and o in tapset:
                        found.add(o)
                    else:
                        stack.append(o)
        out[t] = found
    return out


def _groups(taps: tuple[str, ...], wit: dict[str, set[str]]) -> list[list[str]]:
    """Taps with witnesses, coloured so that no group holds a tap and one of its witnesses."""
    near: dict[str, set[str]] = {t: set() for t in taps}
    for t, ws in wit.items():
        for w in ws:
            near[t].add(w)
            near[w].add(t)
    colour: dict[str, int] = {}
    for t in taps:
        used = {colour[u] for u in near[t] if u in colour}
        colour[t] = next(c for c in range(len(taps) + 1) if c not in used)
    groups: dict[int, list[str]] = {}
    for t in taps:
        if wit[t]:
            groups.setdefault(colour[t], []).append(t)
    return [groups[c] for c in sorted(groups)]


def perturbing_taps(graph: Graph, taps: tuple[str, ...], run: Callable[[tuple[str, ...]], dict],
                    full: dict[str, np.ndarray], budget: int | None = None) -> tuple[list[str], list[str]]:
    """(the taps whose exposure changes another exposed tensor, the taps left unresolved when ``budget`` probes
    ran out -- to be left out too: a faithful capture with fewer tensors).  ``run(exposed)`` gives the values of a
    session exposing those taps (and the graph outputs), ``full`` those of the session exposing every tap.  The
    groups are probed breadth first, so a budget resolves whole groups before it halves any."""
    found: list[str] = []
    unresolved: list[str] = []
    left = -1 if budget is None else budget  # probes still allowed (-1: no bound)

    def changes(hidden: list[str]) -> bool | None:
        gone = set(hidden)
        try:
            got = run(tuple(t for t in taps if t not in gone))
        except Exception:  # noqa: BLE001 -- the QNN EP refuses some exposure patterns (a MatMul left unassigned)
            return None
        return any(k in full and not np.array_equal(np.asarray(v), np.asarray(full[k]), equal_nan=True)
                   for k, v in got.items())

    queue = _groups(taps, witnesses(graph, taps))
    while queue:
        group = queue.pop(0)
        if left == 0:
            unresolved.extend(group)
            continue
        left -= 1
        moved = changes(group)
        if moved is False or (moved is None and len(group) == 1):  # a refused probe of one tap: it stays
            continue
        if len(group) == 1:
            found.append(group[0])
            continue
        half = len(group) // 2
        queue += [group[:half], group[half:]]
    return found, unresolved
