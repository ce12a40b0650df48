"""Scheme files: YAML, ``yaml.safe_load`` only, unknown keys are errors, ``extends:`` inherits.

Minimal schema (issue 2); numeric keys are added by the quantization schemes:

    name: float32                 # must match the file name when found by name
    describes: text               # the real backend (and version) this scheme mimics
    status: verified | documented # documented = follows cited source, not run against a runtime
    source: [text, ...]           # citations
    extends: other-scheme         # optional
    variants: [float]             # kernel variants in order of preference
    ops: {Op: {key: value}}       # per canonical op settings (given to the kernel's prepare)
    nodes: {name-or-glob: {key: value}}   # per-node overrides; ``variants`` allowed here too
"""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import SchemeError

TOP_KEYS = {"name", "describes", "status", "source", "extends", "variants", "ops", "nodes", "notes",
            "verified_against", "backend_version"}
_PKG_DIR = Path(__file__).resolve().parent.parent


def scheme_dirs() -> list[Path]:
    dirs = [Path(p) for p in os.environ.get("REFINTERP_SCHEMES_PATH", "").split(os.pathsep) if p]
    dirs += [_PKG_DIR.parent / "schemes", _PKG_DIR / "schemes_data"]
    return [d for d in dirs if d.is_dir()]


def find_scheme_file(name: str) -> Path:
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


def _read(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise SchemeError(f"not valid YAML ({getattr(e, 'problem', e)})", where) from None
    except (OSError, UnicodeDecodeError) as e:
        raise SchemeError(f"cannot read scheme file ({e})", str(path)) from None
    if not isinstance(data, dict):
        raise SchemeError("a scheme file must be a mapping at the top level", str(path))
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise SchemeError(f"unknown key '{unknown[0]}' (expected one of: {', '.join(sorted(TOP_KEYS))})",
                          str(path))
    return data


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _merge(out[k], v)
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
    base = {k: v for k, v in base.items() if k not in ("name", "describes", "status", "source")}
    return _merge(base, data)


@dataclass
class NodeChoice:
    variants: list[str]
    settings: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scheme:
    name: str
    data: dict[str, Any]
    path: str | None = None

    @property
    def describes(self) -> str:
        return str(self.data.get("describes", ""))

    @property
    def variants(self) -> list[str]:
        return list(self.data.get("variants") or ["float"])

    def for_node(self, node, graph=None) -> NodeChoice:
        settings: dict[str, Any] = {}
        settings.update((self.data.get("ops") or {}).get(node.op, {}) or {})
        variants = list(settings.pop("variants", None) or self.variants)
        for pattern, over in (self.data.get("nodes") or {}).items():
            if node.name == pattern or fnmatch.fnmatchcase(node.name, pattern):
                over = dict(over or {})
                variants = list(over.pop("variants", None) or variants)
                settings.update(over)
        return NodeChoice(variants, settings)


def load_scheme(name_or_path: str) -> Scheme:
    path = find_scheme_file(name_or_path)
    data = _resolve_file(path)
    data.pop("extends", None)
    variants = data.get("variants", ["float"])
    if not (isinstance(variants, list) and all(isinstance(v, str) for v in variants)):
        raise SchemeError("key 'variants': expected a list of kernel variant names", str(path))
    for key in ("ops", "nodes"):
        v = data.get(key)
        if v is not None and not (isinstance(v, dict) and all(isinstance(x, dict) or x is None
                                                               for x in v.values())):
            raise SchemeError(f"key '{key}': expected a mapping of mappings", str(path))
    return Scheme(str(data.get("name", path.stem)), data, str(path))
