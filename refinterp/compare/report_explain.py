"""``--explain`` parts of the terminal and HTML reports: per-tensor "explained by" text and the
summary (best scheme, per-scheme counts, unexplained nodes ranked, the suggested scheme file)."""
from __future__ import annotations

import html
import math
from typing import Any

from .result import DiffResult


def _resid(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    r = d.get("residual")
    if r is None or (isinstance(r, float) and not math.isfinite(r)):
        r_txt = "inf"
    else:
        r_txt = f"{r:.4g}"
    unit = " LSB" if d.get("residual_unit") == "lsb" else ""
    return f"{r_txt}{unit}, {100 * float(d.get('exact_fraction', 0)):.2f}% exact"


def tensor_text(e: dict[str, Any] | None) -> str:
    """One cell: what reproduces the tensor, or the closest variant and its residual."""
    if e is None:
        return "-"
    if e.get("op") == "Input":
        return f"input: {e['explained_by']}" if e.get("explained") else "input: unexplained"
    if e.get("explained"):
        more = len(e.get("schemes_exact", [])) + len(e.get("variants_exact", [])) - 1
        return str(e["explained_by"]) + (f" (+{more} more)" if more > 0 else "")
    c = e.get("closest")
    return "UNEXPLAINED" + (f"; closest {c['variant']} ({_resid(c)})" if c else "")


def summary_lines(res: DiffResult) -> list[str]:
    ex = res.explanation
    if not ex:
        return []
    tied = ex.get("equally_explained_by") or []
    lines = [f"best_scheme: {ex['best_scheme']}"
             + (f"; equally explained by: {', '.join(tied)} (the dump cannot tell these apart)" if tied else ""),
             "schemes: " + ", ".join(f"{s['name']} {s['exact_tensors']}/{s['compared_tensors']}"
                                     + (" (per node)" if s["partial"] else "")
                                     for s in sorted(ex["schemes"], key=lambda s: -s["exact_tensors"])),
             f"explained {ex['explained']} of {ex['re_run_tensors']} re-run tensors"]
    for u in ex["unexplained"][:10]:
        local = {"residual": u["local_residual"], "residual_unit": u["residual_unit"],
                 "exact_fraction": u["local_exact_fraction"]}
        lines.append(f"unexplained #{u['rank']}: {u['tensor']} ({u['op']}), local error under "
                     f"{ex['best_scheme']}: {_resid(local)}")
    if len(ex["unexplained"]) > 10:
        lines.append(f"... {len(ex['unexplained']) - 10} more unexplained (see --json)")
    s = ex.get("suggested_scheme")
    if s:
        lines.append(f"suggested scheme written to {s['path']}: extends {s['extends']}, per-op overrides "
                     f"{', '.join(s['ops']) or 'none'}, per-node overrides {len(s['nodes'])}; "
                     + ("reproduces every explained tensor" if s.get("verified") else
                        f"NOT verified ({s.get('error') or ', '.join(s.get('not_reproduced', [])[:5])})")
                     + (f"; it does not model {len(s['unmodelled'])} node(s): {', '.join(s['unmodelled'][:5])}"
                        if s.get("unmodelled") else ""))
    for n in ex.get("notes", []):
        lines.append(f"note: {n}")
    return lines


def html_section(res: DiffResult) -> str:
    lines = summary_lines(res)
    if not lines:
        return ""
    return "<h2>Explanation</h2><ul>" + "".join(f"<li>{html.escape(t)}</li>" for t in lines) + "</ul>"
