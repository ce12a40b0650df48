"""Machine-readable reports: JSON, QuantizationDebugger-style CSV, Model Explorer node data, and the
Polygraphy RunResults export.  Every file is written atomically (temporary name, then rename)."""
from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

from ..fsutil import atomic_write
from .result import DiffResult, TensorResult

# TFLite QuantizationDebugger's layer_statistics_dump column order, plus the tutorial's two columns
CSV_COLUMNS = ["op_name", "tensor_idx", "num_elements", "stddev", "mean_error", "max_abs_error",
               "mean_squared_error", "scale", "zero_point", "tensor_name", "range", "rmse/scale", "error_kind"]


def write_text_atomic(path: str | Path, text: str, overwrite: bool = True) -> Path:
    return atomic_write(path, lambda f: f.write(text), binary=False, overwrite=overwrite)


def _finite(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None if math.isnan(o) else ("inf" if o > 0 else "-inf")
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def to_json_text(res: DiffResult) -> str:
    """Strict JSON: non-finite numbers become null (NaN) or the strings "inf" / "-inf"."""
    return json.dumps(_finite(res.to_json()), indent=1, allow_nan=False)


def _num(v: Any) -> Any:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v) if math.isfinite(v) else ("nan" if math.isnan(v) else ("inf" if v > 0 else "-inf"))
    return v


def to_csv_text(res: DiffResult) -> str:
    """One row per compared tensor.  Like QuantizationDebugger's layer-by-layer statistics the error
    is the node's *local* error (device inputs re-injected) where it could be computed, else the
    accumulated error; ``error_kind`` says which.  ``range`` = 255 * scale and ``rmse/scale`` as in
    the TFLite debugger tutorial (empty for float tensors)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for i, t in enumerate(res.tensors):
        m, kind = (t.local, "local") if t.local is not None else (t.metrics, "accumulated")
        if m is None:
            continue
        scale = t.scale
        rng = 255.0 * scale if scale else None
        rs = m.rmse / scale if scale else None
        w.writerow([_num(x) for x in (t.op, t.tensor_index if t.tensor_index is not None else i, m.num_elements,
                                      m.stddev, m.mean_error, m.max_abs_error, m.mean_squared_error,
                                      scale, t.zero_point, t.name, rng, rs, kind)])
    return buf.getvalue()


def _mx_value(t: TensorResult, metric: str) -> float | None:
    m = t.local if metric.startswith("local_") and t.local is not None else t.metrics
    key = metric.removeprefix("local_")
    if m is None:
        return None
    v = getattr(m, key, None)
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return None
    return float(v)


MX_PRESETS = {  # thresholds: value <= threshold -> colour (Model Explorer semantics)
    "nrmse": [{"value": 0.0, "bgColor": "#2e7d32"}, {"value": 0.01, "bgColor": "#9ccc65"},
              {"value": 0.05, "bgColor": "#ffb300"}, {"value": 1e9, "bgColor": "#c62828"}],
    "max_abs_lsb": [{"value": 0, "bgColor": "#2e7d32"}, {"value": 1, "bgColor": "#9ccc65"},
                    {"value": 3, "bgColor": "#ffb300"}, {"value": 1e9, "bgColor": "#c62828"}],
    "cosine": [{"value": 0.99, "bgColor": "#c62828"}, {"value": 0.999, "bgColor": "#ffb300"},
               {"value": 0.99999, "bgColor": "#9ccc65"}, {"value": 2, "bgColor": "#2e7d32"}],
}


def to_model_explorer(res: DiffResult, metric: str = "nrmse") -> dict[str, Any]:
    """A Model Explorer ``GraphNodeData`` overlay keyed by output tensor name (ONNX tensor names;
    TFLite tensor names as stored in the file), which Model Explorer resolves to the producing node
    for either format.  Tensors without a value (not in the dump) are left out."""
    results: dict[str, Any] = {}
    for t in res.tensors:
        v = _mx_value(t, metric)
        if v is None:
            continue
        results[t.name] = {"value": v}
    fd = res.first_divergence
    preset = MX_PRESETS.get(metric.removeprefix("local_"), MX_PRESETS["nrmse"])
    return {"name": f"refinterp {metric} vs {Path(str(res.dump.get('path'))).name} "
                    f"[{res.scheme['name']}]" + (f", first divergence {fd.name}" if fd else ""),
            "results": results, "thresholds": preset}
