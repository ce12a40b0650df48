"""Scheme files: YAML, ``yaml.safe_load`` only, unknown keys are errors, ``extends:`` inherits.

The schema (every key, its type and allowed values) is documented and checked in ``schema.py``.
Inheritance: the child's mappings are merged recursively over the parent's; lists and scalars are
replaced; ``name``/``describes``/``status``/``source``/``backend_version``/``verified_against``
are never inherited.  ``load_scheme`` validates every file of the chain and the resolved result.
"""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import SchemeError

from . import schema

TOP_KEYS = set(schema.top_level())
_NOT_INHERITED = ("name", "describes", "status", "source", "backend_version", "verified_against", "notes")
_PKG_DIR = Path(__file__).resolve().parent.parent


def scheme_dirs() -> list[Path]:
    """Where scheme names are looked up, first match wins: ``REFINTERP_SCHEMES_PATH`` (users' own
    folders), the top-level ``schemes/`` of a source checkout, then the schemes shipped in the wheel
    (``refinterp/schemes_data/``, built from that same folder)."""
    dirs = [Path(p) for p in os.environ.get("REFINTERP_SCHEMES_PATH", "").split(os.pathsep) if p]
    if (_PKG_DIR.parent / "pyproject.toml").is_file():  # a source checkout (never site-packages/schemes)
        dirs.append(_PKG_DIR.parent / "schemes")
    dirs.append(_PKG_DIR / "schemes_data")
    return [d for d in dirs if d.is_dir()]


def find_scheme_file(name: str) -> Path:
    if not name or "\x00" in name or len(Path(name).name) > 255:  # OSError/ValueError from the file system
        raise SchemeError(f"not a scheme name or path: {name[:60]!r}")
    p = Path(name)
    if p.suffix in (".yaml", ".yml") or os.sep in name:
        if not p.is_file():
            raise SchemeError("scheme file not found", str(p))
        return p
    for d in scheme_dirs():
        f = d / f"{name}.yaml"
        if f.is_file():
            return f
    known = ", ".join(n for n, _ in list_schemes()) or "none"
    raise SchemeError(f"unknown scheme '{name}' (known: {known})")


def list_schemes() -> list[tuple[str, str]]:
    seen: dict[str, str] = {}
    for d in scheme_dirs():
        for f in sorted(d.glob("*.yaml")):
            if f.stem in seen or f.stem.startswith("_"):
                continue
            try:
                data = yaml.safe_load(f.read_text()) or {}
                seen[f.stem] = str(data.get("describes", "")) if isinstance(data, dict) else ""
            except yaml.YAMLError:
                seen[f.stem] = "(unreadable)"
    return sorted(seen.items())


class _UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.safe_load`` that refuses a mapping with the same key twice (YAML keeps the last silently,
    so a second ``Conv:`` entry would drop the first one's settings)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key '{key}'", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.load(path.read_text(), Loader=_UniqueKeyLoader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SchemeError(f"not valid YAML ({getattr(e, 'problem', e)})", where) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SchemeError(f"cannot read scheme file ({e})", str(path)) from None
    schema.validate(data, str(path))
    return data


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into a copy of ``base``: mappings key by key (recursively), other values replaced."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _resolve_file(path: Path, chain: tuple[str, ...] = ()) -> dict[str, Any]:
    data = _read(path)
    parent = data.get("extends")
    if parent is None:
        return data
    if not isinstance(parent, str):
        raise SchemeError("key 'extends': expected a scheme name", str(path))
    if parent in chain:
        raise SchemeError(f"key 'extends': cycle {' -> '.join(chain + (parent,))}", str(path))
    base = _resolve_file(find_scheme_file(parent), chain + (data.get("name", path.stem),))
    base = {k: v for k, v in base.items() if k not in _NOT_INHERITED}
    return deep_merge(base, data)


_SETTING_KEYS = ("requant", "accumulator")  # merged key by key; other settings are replaced


def _merge_settings(into: dict[str, Any], over: dict[str, Any] | None) -> None:
    for k, v in (over or {}).items():
        if k in _SETTING_KEYS and isinstance(v, dict):
            into[k] = {**into.get(k, {}), **v}
        else:
            into[k] = list(v) if isinstance(v, list) else v


def _is_int(t) -> bool:
    return t.dtype.startswith(("int", "uint"))


def _is_quant_int(t) -> bool:
    return t is not None and t.quant is not None and _is_int(t)


def _has_quantized_int_output(node, graph) -> bool:
    return graph is not None and any(_is_quant_int(graph.tensors.get(o)) for o in node.outputs if o)


def _is_float_node(node, graph) -> bool:
    """No quantized integer activation in or out: a float op inside a quantized model (e.g. the
    DEQUANTIZE -> NEG -> QUANTIZE islands converters leave, or a whole float model).  Quantized
    constant inputs (hybrid weights) do not count."""
    if graph is None:
        return False
    def live(names):
        return [t for t in (graph.tensors.get(n) for n in names if n) if t is not None and t.const is None]

    ins, outs = live(node.inputs), live(node.outputs)
    if any(_is_quant_int(t) for t in ins + outs):
        return False
    # ONNX integer in, integer out with no quantization (MatMulInteger, ConvInteger...): the backend's
    # integer kernels.  TFLite has no such ops: its non-quantized int32 / int64 arithmetic (shape
    # computations, counters) is plain integer arithmetic, which the generic kernels compute.
    if graph.format == "tflite":
        return True
    return not (any(_is_int(t) for t in ins) and any(_is_int(t) for t in outs))


def _is_hybrid_node(node, graph) -> bool:
    """Dynamic-range node: float activations only (``_is_float_node``) and at least one constant
    quantized integer input (int8 weights with scales)."""
    if graph is None or not _is_float_node(node, graph):
        return False
    if node.attrs.get("blockwise"):  # a blockwise int4 filter (its scales are a separate tensor)
        return True
    consts = [t for t in (graph.tensors.get(n) for n in node.inputs if n) if t is not None and t.const is not None]
    return any(_is_quant_int(t) for t in consts)


def _is_uint8_node(node, graph) -> bool:
    t = graph.tensors.get(node.inputs[0]) if graph is not None and node.inputs and node.inputs[0] else None
    return t is not None and t.dtype == "uint8" and t.quant is not None


def _take_uint8(settings: dict[str, Any], uint8_node: bool) -> None:
    """Pop ``uint8`` from ``settings``; merge it in for a node with uint8 activations."""
    over = settings.pop("uint8", None)
    if over and uint8_node:
        _merge_settings(settings, over)


def _take_hybrid(settings: dict[str, Any], hybrid_node: bool) -> bool:
    """Pop ``hybrid`` from ``settings``; merge it in for a dynamic-range node.  True if merged."""
    hybrid = settings.pop("hybrid", None)
    if hybrid and hybrid_node:
        _merge_settings(settings, hybrid)
        return True
    return False


@dataclass
class NodeChoice:
    variants: list[str]
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scheme:
    name: str
    data: dict[str, Any]
    path: str | None = None
    parents: list[str] = field(default_factory=list)  # the ``extends`` chain, nearest first

    @property
    def describes(self) -> str:
        return str(self.data.get("describes", ""))

    @property
    def variants(self) -> list[str]:
        return list(self.data.get("variants") or ["float"])

    def op_settings(self, op: str) -> dict[str, Any]:
        """Scheme-wide ``requant``/``accumulator`` defaults merged with ``ops.<op>``."""
        settings: dict[str, Any] = {}
        _merge_settings(settings, {k: self.data[k] for k in _SETTING_KEYS if k in self.data})
        _merge_settings(settings, (self.data.get("ops") or {}).get(op))
        return settings

    def for_node(self, node, graph=None) -> NodeChoice:
        """Variants and settings for one node.

        Precedence (later wins): scheme defaults < ``ops.<node.op>`` < every ``nodes:`` glob
        matching the node name, in file order < a ``nodes:`` key equal to the node name.
        A dynamic-range node (float activations, constant quantized weights) merges each level's
        ``hybrid:`` settings right after that level and keeps the resulting variant order; a node
        with uint8 activations merges each level's ``uint8:`` settings likewise.
        ``compute: float`` selects the float kernel (the runtime dequantizes the inputs and
        quantizes the outputs).  Otherwise, in a scheme with integer variants, the ``float``
        variant is never chosen for a node with quantized integer outputs (it would silently
        change the arithmetic); such a node needs an integer kernel.
        """
        hybrid_node = _is_hybrid_node(node, graph)
        uint8_node = _is_uint8_node(node, graph)
        settings = self.op_settings(node.op)
        is_hybrid = _take_hybrid(settings, hybrid_node)
        _take_uint8(settings, uint8_node)
        nodes = self.data.get("nodes") or {}
        for pattern, over in nodes.items():
            if pattern != node.name and fnmatch.fnmatchcase(node.name, pattern):
                _merge_settings(settings, over)
                is_hybrid |= _take_hybrid(settings, hybrid_node)
                _take_uint8(settings, uint8_node)
        if node.name in nodes:
            _merge_settings(settings, nodes[node.name])
            is_hybrid |= _take_hybrid(settings, hybrid_node)
            _take_uint8(settings, uint8_node)
        variants = list(settings.pop("variants", None) or self.variants)
        if settings.get("compute") == "float":
            variants = ["float"]
        elif is_hybrid:
            pass  # the ``hybrid`` settings' variants, in their order
        elif variants != ["float"] and _has_quantized_int_output(node, graph):
            variants = [v for v in variants if v != "float"]
        elif "float" in variants and _is_float_node(node, graph):
            variants = ["float"] + [v for v in variants if v != "float"]
        return NodeChoice(variants, settings)

    def resolved(self) -> dict[str, Any]:
        """The fully resolved scheme (after ``extends``), as plain YAML-able data."""
        return dict(self.data)


def load_scheme(name_or_path: str) -> Scheme:
    path = find_scheme_file(name_or_path)
    data = _resolve_file(path)
    chain = data.pop("extends", None)
    schema.validate(data, str(path))
    return Scheme(str(data.get("name", path.stem)), data, str(path), _chain(path) if chain else [])


def scheme_documents(scheme: "Scheme") -> list[tuple[str, dict[str, Any]]]:
    """(file, its own parsed data) for the scheme's file and every file it extends, leaf first:
    where a key of the resolved scheme was written."""
    path = Path(scheme.path)
    out = [(str(path), _read(path))]
    for parent in scheme.parents:
        f = find_scheme_file(parent)
        out.append((str(f), _read(f)))
    return out


def _chain(path: Path) -> list[str]:
    out: list[str] = []
    data = _read(path)
    while data.get("extends"):
        out.append(str(data["extends"]))
        data = _read(find_scheme_file(str(data["extends"])))
    return out
