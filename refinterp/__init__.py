"""refinterp: a bit-exact reference interpreter for quantized ONNX and TFLite models.

    import refinterp
    model = refinterp.load("model.tflite")
    session = refinterp.Session(model, scheme="float32")
    outputs = session.run({"input": x})
    tensors = session.run({"input": x}, capture="all")
"""
from .errors import RefinterpError
from .loaders import load
from .runtime import Session
from .schemes import Scheme, load_scheme

__version__ = "0.1.0"
__all__ = ["load", "Session", "Scheme", "load_scheme", "RefinterpError", "__version__"]
