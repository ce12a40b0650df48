"""Terminal report (rich): stamp, verdict, input checks and a table of the tensors that matter.

Long models: every diverged / unaligned / unmodelled tensor plus a few rows around the first divergence are
shown; the rest are summarised in the count line (the JSON/HTML reports hold every tensor)."""
from __future__ import annotations

import math

from .result import DIVERGED, PASSING, UNALIGNED, UNMODELLED, DiffResult

MAX_ROWS = 60


def _f(v, d: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf"
        return f"{v:.{d}g}"
    return str(v)


def _pct(frac) -> str:
    """Exact-match fraction as a percentage that never rounds a mismatch up to 100%."""
    if frac is None:
        return "-"
    if frac >= 1.0:
        return "100%"
    return f"{math.floor(frac * 10000) / 100:.2f}%"


def _short(name: str, width: int = 44) -> str:
    """Long TFLite names (';'-joined fused op names): keep both ends (full names are in --json)."""
    if len(name) <= width:
        return name
    head = width // 2 - 1
    return name[:head] + "…" + name[-(width - head - 1):]


def _explain_cell(r):
    from rich.text import Text

    from .report_explain import tensor_text

    return Text(tensor_text(r.explanation))


def print_report(res: DiffResult, console=None, max_rows: int = MAX_ROWS) -> None:
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    if console is None and not con.is_terminal:  # pipes / CI logs: no 80-column squeeze
        con = Console(width=170)
    s = res.scheme
    con.print(f"[bold]refinterp diff[/] {res.model} vs {res.dump.get('path')} ({res.dump.get('format')}, "
              f"{res.num_samples} sample(s)) · scheme [bold]{s.get('name')}[/] · refinterp {res.refinterp_version}")
    for c in res.input_checks:
        if not c["matches"]:
            expl = c["explained_by"] or "nothing tested (closest: " + (
                c["candidates"][0]["hypothesis"] if c["candidates"] else "-") + ")"
            con.print(f"[red]input '{c['input']}' (sample {c['sample']}) differs from the given input; "
                      f"explained by: {expl}[/]")
    rows = list(enumerate(res.tensors))
    fd = res.first_divergence
    if len(rows) > max_rows:
        keep = {i for i, t in rows if t.status in (DIVERGED, UNALIGNED, UNMODELLED) and t.cause != "inherited"}
        if fd is not None:
            k = res.tensors.index(fd)
            keep |= set(range(max(0, k - 3), min(len(rows), k + 4)))
        rows = [(i, t) for i, t in rows if i in keep][:max_rows]
    explain = res.explanation is not None
    if explain:  # also every tensor the best scheme does not reproduce on the device's inputs
        keep_x = {i for i, r in enumerate(res.tensors) if r.explanation and r.explanation.get("op") != "Input"
                  and not r.explanation.get("exact_under_best")}
        shown = {i for i, _ in rows}
        rows = sorted(rows + [(i, res.tensors[i]) for i in keep_x - shown], key=lambda p: p[0])[:max_rows]
    t = Table(show_lines=False)
    for c in ("#", "tensor", "op", "status", "exact", "max|ΔLSB|", "max abs", "cosine", "nRMSE",
              "local", "local|ΔLSB|"):
        t.add_column(c, no_wrap=True)
    for i, r in rows:
        m, lm = r.metrics, r.local
        style = ("red" if r.status == DIVERGED else "yellow" if r.status == UNMODELLED else
                 "dim" if r.status not in PASSING else None)
        t.add_row(str(i), _short(r.name), r.op, r.status + (f" ({r.cause})" if r.cause else ""),
                  _pct(m.exact_fraction if m else None),
                  _f(m.max_abs_lsb if m else None), _f(m.max_abs_error if m else None),
                  _f(m.cosine if m else None, 6), _f(m.nrmse if m else None), r.local_status or "-",
                  _f(lm.max_abs_lsb if lm else None),
                  style=("bold red" if r is fd else style))
    con.print(t)
    if explain:
        x = Table(title="--explain: what reproduces each tensor on the device's inputs", show_lines=False)
        x.add_column("#", no_wrap=True)
        x.add_column("tensor", no_wrap=True)
        x.add_column("op", no_wrap=True)
        x.add_column("explained by")
        for i, r in rows:
            if r.explanation is not None and not r.explanation.get("exact_under_best", False):
                x.add_row(str(i), _short(r.name), r.op, _explain_cell(r))
        if x.row_count:
            con.print(x)
    if len(rows) < len(res.tensors):
        con.print(f"(showing {len(rows)} of {len(res.tensors)} tensors: diverging ones with their own local error "
                  f"and the neighbourhood of the first divergence; --json/--html hold all)")
    counts = ", ".join(f"{k} {v}" for k, v in res.counts().items())
    con.print(f"{len(res.tensors)} model tensors ({counts}); {len(res.dump_only)} dump-only tensor(s)"
              + (f": {', '.join(res.dump_only[:8])}{' ...' if len(res.dump_only) > 8 else ''}"
                 if res.dump_only else ""))
    for n in res.notes:
        con.print(f"note: {n}")
    if explain:
        from .report_explain import summary_lines

        for line in summary_lines(res):
            con.print(line, markup=False, highlight=False)
    if fd is None:
        con.print("[green]no divergence: every compared tensor is within policy[/]")
    else:
        fl = res.first_local_divergence
        con.print(f"[bold red]first divergence: {fd.name}[/] ({fd.op}, cause: {fd.cause})"
                  + (f"; first local divergence: {fl.name} ({fl.op})" if fl is not None else ""))
