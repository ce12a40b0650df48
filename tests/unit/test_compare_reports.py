"""Reports: 1,000-tensor rendering time, offline HTML, strict JSON, CSV order, Model Explorer overlay."""
import csv
import io
import json
import time

import numpy as np
from rich.console import Console

from refinterp.compare import metrics as M
from refinterp.compare import report_files as rf
from refinterp.compare.report_html import to_html
from refinterp.compare.report_term import print_report
from refinterp.compare.result import DiffResult, TensorResult


def big_result(n=1000) -> DiffResult:
    rng = np.random.default_rng(0)
    ts = []
    for i in range(n):
        ref = rng.normal(size=64)
        err = np.zeros(64) if i < 500 else rng.normal(size=64) * 0.01 * (i - 499)
        m = M.compute([ref], [ref + err], lsb=[err / 0.05])
        lm = M.compute([ref], [ref + (err if i == 500 else 0 * err)], lsb=[err / 0.05])
        st = "exact" if i < 500 else "diverged"
        ts.append(TensorResult(f"layer{i}/out:0", "Conv", f"n{i}", i, st, "int8", [1, 64], True, 0.05, 0,
                               metrics=m, local=lm, local_status="exact" if i != 500 else "diverged"))
    ts[3].metrics.nan_dev = 1
    ts[3].metrics.needed_atol = float("inf")
    return DiffResult("m.tflite", "tflite", {"name": "tflite-reference", "backend": "LiteRT ref",
                                               "backend_version": "2.18"}, "0.1.0",
                      {"path": "dump", "format": "npy"}, 1, {"atol_lsb": 0}, ts, dump_only=["x"])


def test_thousand_tensor_reports_render_fast():
    res = big_result()
    t0 = time.perf_counter()
    html = to_html(res)
    js = rf.to_json_text(res)
    csv_text = rf.to_csv_text(res)
    mx = rf.to_model_explorer(res, "max_abs_lsb")
    buf = io.StringIO()
    print_report(res, Console(file=buf, width=200))
    assert time.perf_counter() - t0 < 5.0
    assert res.first_divergence.name == "layer500/out:0"
    doc = json.loads(js)
    assert doc["first_divergence"] == "layer500/out:0" and len(doc["tensors"]) == 1000
    assert doc["tensors"][3]["metrics"]["needed_atol"] == "inf"
    assert doc["scheme"]["name"] == "tflite-reference" and doc["refinterp_version"] == "0.1.0"
    assert doc["tensors"][500]["cause"] == "local" and doc["tensors"][501]["cause"] == "inherited"
    rows = list(csv.reader(io.StringIO(csv_text)))
    assert len(rows) == 1001 and rows[1][9] == "layer0/out:0"
    assert float(rows[1][10]) == 255 * 0.05  # range = 255 * scale
    r = rows[600]
    assert abs(float(r[11]) - (float(r[6]) ** 0.5) / 0.05) < 1e-9  # rmse/scale
    assert len(mx["results"]) == 1000 and mx["results"]["layer0/out:0"]["value"] == 0.0
    text = buf.getvalue()
    assert "first divergence: layer500/out:0" in text and "layer500/out:0" in text


def test_html_is_self_contained():
    html = to_html(big_result(520))
    assert html.startswith("<!DOCTYPE html>") and "<svg" in html and "first divergence" in html
    for bad in ("<script", "src=", "href=", "@import", "url("):
        assert bad not in html
    assert "tflite-reference" in html and "0.1.0" in html


def test_write_text_atomic_refuses_folder(tmp_path):
    import pytest
    from refinterp.errors import OutputError

    with pytest.raises(OutputError):
        rf.write_text_atomic(tmp_path, "x")
    p = rf.write_text_atomic(tmp_path / "a" / "r.json", "{}")
    assert p.read_text() == "{}" and [x.name for x in p.parent.iterdir()] == ["r.json"]
