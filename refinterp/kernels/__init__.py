"""Kernels, one module per op family.  Importing this package registers every kernel."""
from . import (  # noqa: F401
    activation,
    conv,
    elementwise,
    matmul,
    norm,
    pool,
    quantize_ops,
    reduce,
    resize,
    shape,
)
