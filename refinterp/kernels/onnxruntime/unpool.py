"""MaxUnpool variant ``ort_float``: ONNX Runtime scatters into output_shape itself when it is given
(kernels/float/unpool.py has both readings; tests/conformance/test_onnx_gridsample.py)."""
from __future__ import annotations

import numpy as np

from ..float.unpool import inferred_shape, scatter_into
from ..registry import attr_plan, kernel


@kernel("MaxUnpool", "ort_float", prepare=attr_plan)
def ort_max_unpool(plan, x, indices, output_shape=None):
    shape = inferred_shape(plan, x) if output_shape is None else \
        tuple(int(v) for v in np.asarray(output_shape).ravel())
    return scatter_into(plan, x, indices, shape)
