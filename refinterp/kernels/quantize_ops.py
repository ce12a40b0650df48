"""quantize_ops kernels."""
from __future__ import annotations
