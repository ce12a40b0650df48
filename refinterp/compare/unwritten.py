"""Elements a runtime leaves unwritten in an output tensor: whatever its arena held is in the device
dump there, so a diff must not count them.  Known case: TFLite Micro's SignalEnergy writes only bins
start_index .. end_index - 1 of its output; element-wise Casts, Identities and Reshapes of such a
tensor carry the same holes."""
from __future__ import annotations

import numpy as np

from ..ir import Graph

_PASS_THROUGH = ("Cast", "Identity", "Reshape")


def unwritten_masks(graph: Graph) -> dict[str, np.ndarray]:
    """Tensor name -> flat boolean mask of its unwritten elements (True: not written)."""
    masks: dict[str, np.ndarray] = {}
    for n in graph.nodes:
        if n.op == "SignalEnergy" and n.outputs and n.outputs[0]:
            info = graph.tensors.get(n.outputs[0])
            if info is None or info.shape is None or None in info.shape:
                continue
            size = int(np.prod(info.shape))
            m = np.ones(size, bool)
            m[int(n.attrs.get("start_index", 0)):int(n.attrs.get("end_index", size))] = False
            masks[n.outputs[0]] = m
        elif n.op in _PASS_THROUGH and n.inputs and n.inputs[0] in masks and n.outputs:
            masks[n.outputs[0]] = masks[n.inputs[0]]
    return masks
