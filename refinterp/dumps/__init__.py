"""Device dumps: readers for the common per-layer dump formats and refinterp's own ``.npy`` folder.

``read_dump(path, fmt=None)`` detects the format (see ``detect.py``); ``write_npy_dump`` writes
refinterp's format.  Nothing here imports onnx: the ``*.tensorproto`` parser and the
"every tensor an output" helper live in ``refinterp/loaders/onnx_dump_io.py``.
"""
from .model import Dump, DumpTensor
from .npydir import read_npy_dump, write_npy_dump

__all__ = ["Dump", "DumpTensor", "read_npy_dump", "write_npy_dump", "read_dump", "FORMATS"]


def __getattr__(name):  # lazy: detect imports every reader
    if name in ("read_dump", "FORMATS"):
        from . import detect

        return getattr(detect, name)
    raise AttributeError(name)
