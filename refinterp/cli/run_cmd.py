"""``refinterp run MODEL --scheme NAME``: execute a model and capture its tensors.

``--inputs`` holding many samples (arrays with one extra leading axis, or a folder of .npz files)
runs them on worker processes (refinterp/cli/batch.py): outputs stacked in ``--outputs``, one dump
folder per sample under ``--dump DIR/sample_<k>/``.
"""
from __future__ import annotations

import numpy as np

from .common import add_input_args, resolve_inputs, save_npz_atomic


def register(sub) -> None:
    p = sub.add_parser("run", help="run a model under a scheme and capture tensors")
    p.add_argument("model")
    p.add_argument("--scheme", default="float32", help="scheme name or path to a scheme YAML (default float32)")
    add_input_args(p)
    p.add_argument("--outputs", metavar="OUT.npz", help="write the model outputs to an .npz")
    p.add_argument("--dump", metavar="DIR", help="write every tensor as .npy plus manifest.json")
    p.add_argument("--workers", type=int, metavar="N",
                   help="worker processes for many inputs (default: REFINTERP_THREADS or all CPUs)")
    p.add_argument("--overwrite", action="store_true", help="allow replacing existing output files/folders")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from .. import Session, load
    from ..dumps.npydir import write_npy_dump
    from .batch import detect
    from .common import check_dump_dir

    graph = load(args.model)
    batch = detect(args.inputs, graph) if getattr(args, "inputs", None) else None
    if args.outputs:
        from .common import check_new_file

        check_new_file(args.outputs, args.overwrite)
    if args.dump:
        check_dump_dir(args.dump, args.overwrite)
    if batch is not None:
        return _run_many(args, graph, batch)
    session = Session(graph, scheme=args.scheme)
    feeds = resolve_inputs(args, graph)
    result = session.run(feeds, capture="all" if args.dump else None)
    outputs = {k: result[k] for k in graph.outputs}
    if args.outputs:
        save_npz_atomic(args.outputs, outputs, overwrite=args.overwrite)
    if args.dump:
        write_npy_dump(args.dump, result, graph, session.scheme.name, overwrite=args.overwrite)
    if not args.quiet:
        _print_summary(graph, session.scheme.name, outputs, args)
    return 0


def _run_many(args, graph, batch) -> int:
    from .. import Session
    from ..errors import InputError
    from ..settings import threads
    from .batch import run_batch

    workers = threads() if args.workers is None else args.workers
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    workers = min(workers, batch.count)
    session = Session(graph, scheme=args.scheme) if workers <= 1 else None
    scheme_name = session.scheme.name if session is not None else args.scheme
    outputs, wall = run_batch(args.model, args.scheme, batch, graph, workers=workers, dump=args.dump,
                              overwrite=args.overwrite, progress=not args.quiet, session=session)
    if args.outputs:
        save_npz_atomic(args.outputs, outputs, overwrite=args.overwrite)
    if not args.quiet:
        _print_summary(graph, scheme_name, outputs, args, samples=batch.count)
        from rich.console import Console

        Console().print(f"{batch.count} samples in {wall:.2f} s: {batch.count / max(wall, 1e-9):.1f} samples/s "
                        f"({workers} worker{'s' if workers > 1 else ''})")
    return 0


def _print_summary(graph, scheme_name, outputs, args, samples: int | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    con = Console()
    t = Table(title=f"{graph.path} · scheme {scheme_name}", show_lines=False)
    for c in ("output", "dtype", "shape", "min", "max", "mean"):
        t.add_column(c)
    for name, v in outputs.items():
        a = np.asarray(v)
        num = a.size and a.dtype.kind in "iufb"
        t.add_row(name, str(a.dtype), str(list(a.shape)),
                  f"{a.min():.6g}" if num else "-", f"{a.max():.6g}" if num else "-",
                  f"{a.astype(np.float64).mean():.6g}" if num else "-")
    con.print(t)
    if args.dump:
        where = f"{args.dump}/sample_<k>/" if samples else f"{args.dump}/"
        con.print(f"wrote {len(graph.nodes)} node outputs{f' per sample ({samples} samples)' if samples else ''} "
                  f"to {where} (manifest.json)")
    if args.outputs:
        con.print(f"wrote outputs to {args.outputs}")
