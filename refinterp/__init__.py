"""refinterp: a bit-exact reference interpreter for quantized ONNX and TFLite models.

    import refinterp
    model = refinterp.load("model.tflite")
    session = refinterp.Session(model, scheme="float32")
    outputs = session.run({"input": x})
    tensors = session.run({"input": x}, capture="all")
"""
from . import settings as _settings

_settings.configure_environment()  # before NumPy / Numba load: thread and cache variables

from .errors import RefinterpError  # noqa: E402
from .loaders import load  # noqa: E402
from .runtime import Session  # noqa: E402
from .schemes import Scheme  # noqa: E402
from .scheme_check import load_checked as load_scheme  # noqa: E402  (checked against the kernels)

__version__ = "0.1.0"
__all__ = ["load", "Session", "Scheme", "load_scheme", "RefinterpError", "__version__"]
