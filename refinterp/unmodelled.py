"""Nodes a scheme does not model, kept in a Session as stubs instead of refusing the whole model.

``Session(model, scheme, unmodelled=True)`` builds every node it can; a node the scheme refuses
(UnsupportedOpError: no kernel, a refused dtype, a characterisation the scheme does not cover)
becomes a stub step.  Running a stub computes nothing: its outputs are *anchored* -- taken from
values the caller supplies (``diff`` gives the device's own tensors), so that the nodes after it
still run and compare.  Without an anchored value the stub raises the scheme's refusal.  A node whose
kernel refuses its inputs only when run (a data-dependent refusal) is anchored the same way by a run that
has anchors (``Session.refused_when_run`` names it).  A plain
``Session`` (``run``, ``golden``, ``sensitivity``) never builds stubs: there every node is modelled
or the model is refused.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np

from .errors import UnsupportedOpError
from .ir import Node
from .kernels.registry import Kernel

VARIANT = "unmodelled"


@dataclass(frozen=True)
class UnmodelledPlan:
    reason: str  # the scheme's refusal, one line


def _refuse(plan: UnmodelledPlan, *args) -> None:
    raise UnsupportedOpError(plan.reason)


def stub_kernel(node: Node) -> Kernel:
    return Kernel(node.op, VARIANT, _refuse)


def is_stub(step) -> bool:
    return step.kernel.variant == VARIANT and isinstance(step.plan, UnmodelledPlan)


def anchored(step, anchors: Mapping[str, np.ndarray], where: str | None, needed,
             reason: str | None = None) -> dict[str, np.ndarray]:
    """A stub's outputs -- or those of a node whose kernel refused its inputs when run (``reason``) -- from
    ``anchors``; every output a later node or the graph's outputs read (``needed``) must be there."""
    named = [o for o in step.node.outputs if o]
    missing = [o for o in named if o not in anchors and o in needed]
    if missing:
        why = reason or step.plan.reason
        raise UnsupportedOpError(f"{why} (the node is not modelled under this scheme, and no value of its output "
                                 f"'{missing[0]}' was given to continue from)", where)
    return {o: np.asarray(anchors[o]) for o in named if o in anchors}
