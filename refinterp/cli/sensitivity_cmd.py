"""``refinterp sensitivity MODEL --scheme S``: which nodes to run in float to win back accuracy,
ranked by the final-output gain against a float reference, picked greedily up to ``--budget`` and
written as a scheme (``--write-scheme``) that ``run`` / ``diff`` accept."""
from __future__ import annotations

import json

from .common import add_input_args, check_new_file, resolve_inputs


def register(sub) -> None:
    p = sub.add_parser("sensitivity", help="rank nodes by the accuracy gained running them in float; "
                       "write the best few as a scheme")
    p.add_argument("model")
    p.add_argument("--scheme", required=True, help="the quantized scheme to analyse")
    add_input_args(p)
    p.add_argument("--against", default="float32", metavar="float32|FLOAT_MODEL",
                   help="reference: the float32 scheme on this model (default) or a float model file "
                        "(outputs matched by name, else by position)")
    p.add_argument("--metric", default="cosine", choices=("cosine", "sqnr", "mse", "top1"))
    p.add_argument("--budget", type=int, default=3, help="at most this many nodes picked (default 3)")
    p.add_argument("--mode", default="float", choices=("float", "int16", "both"),
                   help="fallback tried per node: float (float32 compute, output left in float), int16 "
                        "(output on a 16-bit grid over the same range: 16-bit activations, estimated) "
                        "or both")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="worker processes scoring the fallbacks (default 1; results do not depend on it)")
    p.add_argument("--json", metavar="OUT.json")
    p.add_argument("--html", metavar="OUT.html")
    p.add_argument("--write-scheme", metavar="FIX.yaml")
    p.add_argument("--overwrite", action="store_true", help="allow replacing existing output files")
    p.add_argument("--quiet", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    import yaml

    from .. import Session, load
    from ..fsutil import atomic_write
    from ..samples import feed_samples
    from ..schemes import find_scheme_file
    from ..sensitivity import analyse
    from ..sensitivity.engine import fix_scheme, reference_session
    from ..sensitivity.report import render_html
    from ..errors import InputError

    outs = [(p, f) for p, f in ((args.json, "json"), (args.html, "html"), (args.write_scheme, "yaml")) if p]
    for p, _ in outs:
        check_new_file(p, args.overwrite)
    if args.workers < 1:
        raise InputError(f"--workers must be at least 1, got {args.workers}")
    graph = load(args.model)
    session = Session(graph, scheme=args.scheme)
    reference, omap, label = reference_session(graph, args.against)
    samples = feed_samples(graph, resolve_inputs(args, graph))
    progress = None
    if not args.quiet:
        from rich.console import Console

        console = Console(stderr=True)

        def progress(stage: str, k: int, n: int) -> None:
            if k % 10 == 0:
                console.print(f"{stage}: {k}/{n}", highlight=False)
    kw = dict(metric=args.metric, budget=args.budget, mode=args.mode, output_map=omap, progress=progress,
              reference_label=label)
    if args.workers == 1:
        result = analyse(session, reference, samples, **kw)
    else:
        from ..sensitivity.parallel import WorkerPool

        spec = {"model": args.model, "scheme": args.scheme, "against": args.against, "samples": samples,
                "metric": args.metric, "mode": args.mode, "output_map": omap}
        with WorkerPool(spec, args.workers) as pool:
            result = analyse(session, reference, samples, mapper=pool.mapper, **kw)
    src = find_scheme_file(args.scheme)
    extends = args.scheme if src.stem == args.scheme else str(src.resolve())
    for path, kind in outs:
        if kind == "json":
            text = json.dumps(result.to_json(), indent=1, allow_nan=True)
        elif kind == "html":
            text = render_html(result)
        else:
            text = yaml.safe_dump(fix_scheme(result, extends), sort_keys=False)
        atomic_write(path, lambda f, t=text: f.write(t), binary=False, overwrite=args.overwrite)
    if not args.quiet:
        print(f"{result.scheme} vs {label}, {result.samples} sample(s), {result.metric}: baseline "
              f"{result.baseline:.6g}")
        for i, r in enumerate(result.ranking[:10]):
            loc = "" if r["local_error"] is None else f", local SQNR {r['local_error']:.1f} dB"
            print(f"  {i + 1:2d}. {r['node']} ({r['op']}, {r['fallback']}): gain {r['gain']:+.4g}{loc}")
        for s in result.selected:
            print(f"  picked {s['node']} ({s['fallback']}): {result.metric} {s['metric']:.6g}")
        print(f"final {result.metric}: {result.final:.6g}")
    return 0
