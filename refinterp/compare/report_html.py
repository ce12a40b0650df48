"""One self-contained HTML report (no scripts, fonts or images fetched): stamp, summary, input
checks, an inline SVG curve of per-layer error (accumulated and local normalised RMSE on a log
scale, first divergence marked) and the per-tensor table."""
from __future__ import annotations

import html
import math

from .result import DiffResult, TensorResult

_CSS = """body{font:13px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}
td.l,th.l{text-align:left}tr.diverged{background:#fde0dc}tr.first{outline:2px solid #c62828}
tr.missing,tr.unaligned{color:#888}tr.unmodelled{color:#a60}.stamp{background:#f4f4f4;padding:.5em;border-radius:4px}
.ok{color:#2e7d32}.bad{color:#c62828}"""


def _f(v, digits: int = 4) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return f"{v:.{digits}g}"
    return html.escape(str(v))


def _curve(res: DiffResult, width: int = 960, height: int = 260) -> str:
    pts = [(i, t) for i, t in enumerate(res.tensors) if t.metrics is not None]
    if not pts:
        return "<p>No compared tensors.</p>"
    floor = 1e-9

    def y_of(v: float | None) -> float:
        v = floor if v is None or not math.isfinite(v) or v <= floor else v
        lv = max(min(math.log10(v), 1.0), -9.0)
        return 10 + (1.0 - (lv + 9.0) / 10.0) * (height - 40)

    n = max(len(res.tensors) - 1, 1)

    def x_of(i: int) -> float:
        return 50 + i * (width - 70) / n

    acc = " ".join(f"{x_of(i):.1f},{y_of(t.metrics.nrmse):.1f}" for i, t in pts)
    loc = " ".join(f"{x_of(i):.1f},{y_of(t.local.nrmse):.1f}" for i, t in pts if t.local is not None)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
             f'aria-label="per-layer error">']
    for e in range(-9, 2, 2):
        y = y_of(10.0 ** e)
        parts.append(f'<line x1="50" x2="{width - 20}" y1="{y:.1f}" y2="{y:.1f}" stroke="#eee"/>'
                     f'<text x="4" y="{y + 4:.1f}" font-size="10">1e{e}</text>')
    parts.append(f'<polyline fill="none" stroke="#1565c0" stroke-width="1.5" points="{acc}"/>')
    if loc:
        parts.append(f'<polyline fill="none" stroke="#ef6c00" stroke-width="1" stroke-dasharray="4 2" '
                     f'points="{loc}"/>')
    fd = res.first_divergence
    if fd is not None:
        i = res.tensors.index(fd)
        x = x_of(i)
        parts.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="5" y2="{height - 25}" stroke="#c62828" '
                     f'stroke-width="2"/><text x="{x + 4:.1f}" y="16" fill="#c62828" font-size="11">'
                     f'first divergence: {html.escape(fd.name)}</text>')
    parts.append(f'<text x="50" y="{height - 6}" font-size="11"><tspan fill="#1565c0">— accumulated nRMSE'
                 f'</tspan>   <tspan fill="#ef6c00">- - local nRMSE</tspan>   (x: tensors in execution order)'
                 f'</text></svg>')
    return "".join(parts)


def _row(t: TensorResult, first: TensorResult | None, explain: bool = False) -> str:
    m, lm = t.metrics, t.local
    cls = t.status + (" first" if t is first else "")
    cells = [f'<td class="l">{html.escape(t.name)}</td>', f'<td class="l">{html.escape(t.op)}</td>',
             f"<td>{_f(t.index)}</td>", f'<td class="l">{t.status}</td>', f'<td class="l">{_f(t.cause)}</td>']
    for v in ((m.exact_fraction if m else None), (m.max_abs_lsb if m else None), (m.max_abs_error if m else None),
              (m.cosine if m else None), (m.nrmse if m else None), (m.sqnr_db if m else None),
              (lm.max_abs_lsb if lm else None), (lm.nrmse if lm else None)):
        cells.append(f"<td>{_f(v)}</td>")
    cells.append(f'<td class="l">{_f(t.local_status)}</td>')
    cells.append(f'<td class="l">{html.escape("; ".join(t.notes))}</td>')
    if explain:
        from .report_explain import tensor_text

        cells.append(f'<td class="l">{html.escape(tensor_text(t.explanation))}</td>')
    return f'<tr class="{cls}">' + "".join(cells) + "</tr>"


def _explain_section(res: DiffResult) -> str:
    if res.explanation is None:
        return ""
    from .report_explain import html_section

    return html_section(res)


def to_html(res: DiffResult) -> str:
    fd = res.first_divergence
    sch = res.scheme
    head = ["tensor", "op", "index", "status", "cause", "exact", "max |ΔLSB|", "max abs err", "cosine",
            "nRMSE", "SQNR dB", "local max |ΔLSB|", "local nRMSE", "local status", "notes"]
    explain = res.explanation is not None
    if explain:
        head.append("explained by (--explain)")
    checks = "".join(
        f"<li>input <b>{html.escape(c['input'])}</b> sample {c['sample']}: "
        + ("matches the given input" if c["matches"] else
           f"differs from the given input; explained by: <b>{html.escape(str(c['explained_by']))}</b>")
        + "</li>" for c in res.input_checks)
    verdict = (f'<p class="bad">First divergence: <b>{html.escape(fd.name)}</b> ({html.escape(fd.op)}, '
               f'cause: {fd.cause})</p>' if fd else '<p class="ok">No divergence: every tensor within policy.</p>')
    counts = ", ".join(f"{k}: {v}" for k, v in res.counts().items())
    rows = "".join(_row(t, fd, explain) for t in res.tensors)
    only = (f"<p>Dump-only tensors ({len(res.dump_only)}): {html.escape(', '.join(res.dump_only))}</p>"
            if res.dump_only else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>refinterp diff – {html.escape(str(res.model))}</title>
<style>{_CSS}</style></head><body>
<h1>refinterp diff</h1>
<div class="stamp">model <b>{html.escape(str(res.model))}</b> ({res.model_format}) ·
dump <b>{html.escape(str(res.dump.get('path')))}</b> ({html.escape(str(res.dump.get('format')))}, {res.num_samples}
sample(s)) · scheme <b>{html.escape(str(sch.get('name')))}</b> — {html.escape(str(sch.get('backend') or ''))}
{('version ' + html.escape(str(sch.get('backend_version')))) if sch.get('backend_version') else ''} ·
refinterp {html.escape(res.refinterp_version)} · policy {html.escape(str(res.policy))}</div>
{verdict}<p>{html.escape(counts)}</p>{('<ul>' + checks + '</ul>') if checks else ''}
{_curve(res)}
{_explain_section(res)}
<table><thead><tr>{''.join(f'<th class="l">{h}</th>' for h in head)}</tr></thead><tbody>{rows}</tbody></table>
{only}
</body></html>
"""
