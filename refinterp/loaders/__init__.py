"""Model loaders.  ``load(path)`` detects the format from the file's bytes."""
from __future__ import annotations

from pathlib import Path

from ..errors import ModelError
from ..ir import Graph


def detect_format(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except IsADirectoryError:
        raise ModelError("is a folder, not a model file", str(path)) from None
    except FileNotFoundError:
        raise ModelError("no such file", str(path)) from None
    except OSError as e:
        raise ModelError(f"cannot read ({e.strerror})", str(path)) from None
    if len(head) >= 8 and head[4:8] == b"TFL3":
        return "tflite"
    if path.suffix.lower() == ".tflite":
        raise ModelError("not a TFLite model (no 'TFL3' file identifier)", str(path))
    if path.suffix.lower() in (".onnx", ".pb") or (head[:1] in (b"\x08", b"\x12", b"\x1a", b"\x22", b"\x3a")):
        return "onnx"
    raise ModelError("not an ONNX or TFLite model", str(path))


def load(path: str | Path) -> Graph:
    p = Path(path)
    fmt = detect_format(p)
    if fmt == "tflite":
        from .tflite import load_tflite

        return load_tflite(p)
    from .onnx import load_onnx

    return load_onnx(p)
