"""Backend-independent integer kernels (variant ``int``): data movement that copies stored codes."""
from . import shape, shape_pad, shape_slice, space_batch  # noqa: F401
