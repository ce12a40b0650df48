"""Nodes a scheme does not model, kept in a Session as stubs instead of refusing the whole model.

``Session(model, scheme, unmodelled=True)`` builds every node it can; a node the scheme refuses
(UnsupportedOpError: no kernel, a refused dtype, a characterisation the scheme does not cover)
becomes a stub step.  Running a stub computes nothing: its outputs are *anchored* -- taken from
values the caller supplies (``diff`` gives the device's own tensors), so that the nodes after it
still run and compare.  A node whose kernel refuses its inputs only when run (a data-dependent refusal) is
anchored the same way (``Session.refused_when_run``).  Where no anchored value is given, the stub and the
nodes that read what it would have made are not computed (``Session.not_computed``) -- such a node's outputs are
anchored in turn where the caller has them; a run without anchors
raises the scheme's refusal as a plain Session does.  A plain
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


def step_with_anchors(session, step, run, anchors: Mapping[str, np.ndarray], lost: set) -> dict[str, np.ndarray]:
    """One step of a run with anchors: a stub takes its outputs from them; a node whose kernel refuses its inputs
    when run too (``session.refused_when_run``); a stub without them, or a node reading a tensor left without a
    value, computes nothing and leaves its outputs without values (``lost``, ``session.not_computed``) -- the
    caller compares the rest."""
    named = [o for o in step.node.outputs if o]
    gone = next((i for i in step.node.inputs if i in lost), None)
    if gone is not None:
        got = {o: np.asarray(anchors[o]) for o in named if o in anchors}
        if len(got) == len(named):  # the device's values of its outputs: the nodes after it go on from them
            session.not_computed[step.node.name] = (f"its input '{gone}' has no value (after a node not modelled); "
                                                    "the nodes after it ran on the device's values")
            return got
        session.not_computed[step.node.name] = f"its input '{gone}' has no value (after a node not modelled)"
        lost.update(named)
        return {}
    if not is_stub(step):
        try:
            return run()
        except UnsupportedOpError as e:
            reason = e.message
            session.refused_when_run[step.node.name] = reason
    else:
        reason = step.plan.reason
    got = {o: np.asarray(anchors[o]) for o in named if o in anchors}
    missing = [o for o in named if o not in got]
    if missing:
        session.not_computed[step.node.name] = f"{reason}; no device value of '{missing[0]}' to continue from"
        lost.update(missing)
    return got
