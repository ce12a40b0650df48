"""Offline HTML report of a sensitivity run: the per-node gain ranking as bars and the metric after
each greedy pick as a curve (inline SVG, no scripts, no network)."""
from __future__ import annotations

import html

from .engine import Sensitivity

_BAR_H, _W, _LABEL = 18, 420, 260


def _bars(result: Sensitivity, top: int = 40) -> str:
    rows = result.ranking[:top]
    if not rows:
        return "<p>No quantized node could run in float.</p>"
    span = max(max(abs(r["gain"]) for r in rows), 1e-12)
    mid = _LABEL + _W // 2
    out = [f'<svg width="{_LABEL + _W + 120}" height="{_BAR_H * len(rows) + 10}" role="img" '
           f'aria-label="gain per node">']
    for i, r in enumerate(rows):
        y = 5 + i * _BAR_H
        w = abs(r["gain"]) / span * (_W // 2)
        x = mid if r["gain"] >= 0 else mid - w
        colour = "#2a7" if r["gain"] >= 0 else "#c44"
        name = html.escape(f'{r["node"]} ({r["op"]})')
        out.append(f'<text x="{_LABEL - 6}" y="{y + 13}" text-anchor="end" font-size="12">{name[:48]}</text>'
                   f'<rect x="{x:.1f}" y="{y + 2}" width="{max(w, 0.5):.1f}" height="{_BAR_H - 4}" fill="{colour}"/>'
                   f'<text x="{_LABEL + _W + 4}" y="{y + 13}" font-size="12">{r["gain"]:+.4g}</text>')
    out.append(f'<line x1="{mid}" x2="{mid}" y1="0" y2="{_BAR_H * len(rows) + 10}" stroke="#333"/></svg>')
    return "".join(out)


def _curve(result: Sensitivity) -> str:
    vals = [result.baseline] + [s["metric"] for s in result.selected]
    finite = [v for v in vals if v == v and abs(v) != float("inf")]
    if len(finite) < 2:
        return ""
    lo, hi = min(finite), max(finite)
    span = (hi - lo) or 1.0
    w, h = 420, 160
    pts = []
    for i, v in enumerate(vals):
        v = min(max(v, lo), hi) if v == v else lo
        pts.append((20 + i * (w - 40) / max(len(vals) - 1, 1), h - 20 - (v - lo) / span * (h - 40)))
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
    dots = "".join(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3"/><text x="{x:.1f}" y="{y - 6:.1f}" font-size="11" '
                   f'text-anchor="middle">{v:.4g}</text>' for (x, y), v in zip(pts, vals))
    return (f'<svg width="{w}" height="{h}" role="img" aria-label="metric after each pick">'
            f'<polyline points="{line}" fill="none" stroke="#36c" stroke-width="2"/>{dots}</svg>')


def _row(i: int, r: dict) -> str:
    local = "" if r["local_error"] is None else f"{r['local_error']:.2f}"
    return (f"<tr><td>{i + 1}</td><td>{html.escape(r['node'])}</td><td>{html.escape(r['op'])}</td>"
            f"<td>{r['gain']:+.6g}</td><td>{r['metric']:.6g}</td><td>{local}</td></tr>")


def render_html(result: Sensitivity) -> str:
    e = html.escape
    picks = "".join(f"<li>{e(s['node'])} ({e(s['op'])}): {result.metric} {s['metric']:.6g}</li>"
                    for s in result.selected) or "<li>none improved the metric</li>"
    rows = "".join(_row(i, r) for i, r in enumerate(result.ranking))
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>refinterp sensitivity: {e(result.scheme)}</title>
<style>body{{font-family:sans-serif;margin:2em}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 6px}}</style>
</head><body><h1>Sensitivity of {e(result.scheme)} against {e(result.reference)}</h1>
<p>{result.samples} sample(s); metric <b>{e(result.metric)}</b> of the final outputs: baseline {result.baseline:.6g},
after the {len(result.selected)} pick(s) {result.final:.6g}.</p>
<h2>Greedy picks (each re-measured with the earlier picks in float)</h2><ol>{picks}</ol>{_curve(result)}
<h2>Gain of running each node alone in float</h2>{_bars(result)}
<h2>Ranking</h2><table><tr><th>#</th><th>node</th><th>op</th><th>gain</th><th>{e(result.metric)}</th>
<th>local SQNR dB</th></tr>{rows}</table></body></html>
"""
