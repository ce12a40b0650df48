"""Qualcomm per-layer ``.raw`` folders.

* QNN ``qnn-net-run --debug`` / SNPE ``snpe-net-run --debug``: ``<out>/Result_<i>/`` per inference,
  one headerless little-endian ``.raw`` per tensor (float32 by default; the tensor's native dtype
  with ``--use_native_output_files``).  Tensor names containing ``/`` become sub-folders; other
  characters are sanitised (details inferred from the docs: alignment matches sanitised names).
* AIMET ``LayerOutputUtil``: ``<dir>/outputs/layer_outputs_<i>/<sanitised name>.raw`` (float32,
  transformed to NHWC) plus ``layer_output_name_order.json`` and ``inputs/input_<i>.raw``.

Both are channels-last (NHWC) on the device side; files are read as undecoded bytes and their dtype
is decided against the model (float32, or the model's storage dtype when the byte count says so).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from ..errors import DumpError
from .model import Dump, DumpTensor, merge_samples
from .rawdir import read_raw_file

_NUM = re.compile(r"(\d+)$")


def _num(p: Path) -> int:
    m = _NUM.search(p.name)
    return int(m.group(1)) if m else -1


def _read_raw_tree(folder: Path, fmt: str, layout: str = "NHWC") -> Dump:
    d = Dump(str(folder), fmt)
    for f in sorted(folder.rglob("*.raw")):
        name = f.relative_to(folder).with_suffix("").as_posix()
        d.add(DumpTensor(name, [read_raw_file(f, None, None, str(f))], layout=layout, file=name + ".raw",
                         raw=True))
    return d


def qnn_result_dirs(root: Path) -> list[Path]:
    return sorted((p for p in root.glob("Result_*") if p.is_dir()), key=_num)


def read_qnn(path: str | Path) -> Dump:
    p = Path(path)
    dirs = qnn_result_dirs(p) or ([p] if any(p.rglob("*.raw")) else [])
    if not dirs:
        raise DumpError("no Result_<i> folders or .raw files", str(p))
    parts = [_read_raw_tree(r, "qnn") for r in dirs]
    return merge_samples(parts, str(p), "qnn") if len(parts) > 1 else parts[0]


def aimet_output_dirs(root: Path) -> list[Path]:
    base = root / "outputs" if (root / "outputs").is_dir() else root
    return sorted((p for p in base.glob("layer_outputs_*") if p.is_dir()), key=_num)


def read_aimet(path: str | Path) -> Dump:
    p = Path(path)
    dirs = aimet_output_dirs(p)
    if not dirs:
        raise DumpError("no layer_outputs_<i> folders", str(p))
    parts = [_read_raw_tree(r, "aimet") for r in dirs]
    d = merge_samples(parts, str(p), "aimet") if len(parts) > 1 else parts[0]
    d.format = "aimet"
    order_file = p / "layer_output_name_order.json"
    if order_file.is_file():
        try:
            order = json.loads(order_file.read_text()).get("layer_output_names", [])
        except (OSError, ValueError, AttributeError) as e:
            raise DumpError(f"unreadable name order ({e})", str(order_file)) from None
        rank = {n: i for i, n in enumerate(order)}
        for t in d.tensors.values():
            t.index = rank.get(t.name)
        d.tensors = dict(sorted(d.tensors.items(), key=lambda kv: (kv[1].index is None, kv[1].index or 0)))
    return d
