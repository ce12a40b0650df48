"""Elements a runtime leaves unwritten in its outputs (their values are whatever the arena held):
not compared by the oracle tests."""
from __future__ import annotations

import numpy as np


def unwritten(g) -> dict[str, np.ndarray]:
    """Tensor -> mask of the elements TFLite Micro does not write (SignalEnergy outside its bins,
    and element-wise Casts of them)."""
    masks: dict[str, np.ndarray] = {}
    for n in g.nodes:
        if n.op == "SignalEnergy":
            size = int(np.prod(g.tensors[n.outputs[0]].shape))
            m = np.ones(size, bool)
            m[int(n.attrs.get("start_index", 0)):int(n.attrs.get("end_index", size))] = False
            masks[n.outputs[0]] = m
        elif n.op == "Cast" and n.inputs[0] in masks:
            masks[n.outputs[0]] = masks[n.inputs[0]]
    return masks
