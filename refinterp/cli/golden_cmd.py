"""``refinterp golden make|sweep|check|export``: per-kernel golden vectors (see refinterp/golden/FORMAT.md)."""
from __future__ import annotations

import sys

from .common import add_input_args


def register(sub) -> None:
    p = sub.add_parser("golden", help="make, sweep, check and export per-kernel golden test vectors")
    gs = p.add_subparsers(dest="golden_command", metavar="ACTION")

    m = gs.add_parser("make", help="one golden case per node of a model")
    m.add_argument("model")
    m.add_argument("--scheme", required=True, help="scheme name or YAML path (e.g. tflite-reference)")
    m.add_argument("--out", required=True, metavar="DIR", help="output folder (must be empty or absent)")
    add_input_args(m, inputs_help="model inputs as .npz keyed by input name (default: random inputs, seed 0)")
    m.add_argument("--ops", metavar="OP,...", help="only these ops (TFLite builtin names such as CONV_2D, or "
                   "canonical names such as Conv)")
    _common_out(m)
    m.set_defaults(func=run_make)

    s = gs.add_parser("sweep", help="single-op cases sweeping zero points, scales, saturation, ties, shapes")
    s.add_argument("--op", required=True, help="TFLite builtin op: " + ", ".join(SWEEP_OPS))
    s.add_argument("--scheme", required=True)
    s.add_argument("--count", type=int, default=32, help="number of cases (default 32)")
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--dtype", choices=("int8", "int16"), default="int8",
                   help="activation type: int8, or int16 for TFLite 16x8 (int8 weights, int64 bias)")
    s.add_argument("--out", required=True, metavar="DIR")
    _common_out(s)
    s.set_defaults(func=run_sweep)

    c = gs.add_parser("check", help="re-run golden cases and compare exactly; exit 1 on any failure")
    c.add_argument("dir", help="a folder of cases (or one case folder)")
    c.add_argument("--scheme", help="run refinterp's kernels under this scheme (default: each case's own)")
    c.add_argument("--kernel", metavar="MODULE:FUNCTION", help="check a Python callable "
                   "fn(case: dict, inputs: list[ndarray]) -> list[ndarray] instead of refinterp's kernels")
    c.add_argument("--quiet", action="store_true", help="print failures and the summary only")
    c.set_defaults(func=run_check)

    e = gs.add_parser("export", help="export cases as a C99 header or raw little-endian files")
    e.add_argument("dir")
    e.add_argument("--format", choices=("c", "raw"), required=True)
    e.add_argument("--out", required=True, help="header path (c) or folder (raw)")
    e.add_argument("--overwrite", action="store_true")
    e.set_defaults(func=run_export)
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])


# kept here so building the CLI parser imports no kernels; a test checks it against golden.sweep
SWEEP_OPS = ("ADD", "AVERAGE_POOL_2D", "CONV_2D", "DEPTHWISE_CONV_2D", "FULLY_CONNECTED", "LOGISTIC", "MUL",
             "SOFTMAX", "SUB")


def _common_out(p) -> None:
    p.add_argument("--verify", choices=("litert-ref", "tflm"), help="re-run every case with a real runtime "
                   "(litert-ref: LiteRT BUILTIN_REF; tflm: TFLite Micro) and record the verdict; disagreeing "
                   "cases are flagged and the command exits 1")
    p.add_argument("--overwrite", action="store_true", help="replace earlier golden cases in --out")
    p.add_argument("--quiet", action="store_true")


def _finish(args, cases, model_path=None, feeds=None) -> int:
    from ..golden.make import write_cases
    from ..golden.verify import verify_cases

    counts = verify_cases(cases, args.verify, model_path=model_path, model_feeds=feeds) if args.verify else None
    root = write_cases(args.out, cases, overwrite=args.overwrite)
    if not args.quiet:
        print(f"wrote {len(cases)} cases to {root}")
    if counts is None:
        return 0
    print(f"verified against {args.verify}: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    schemes = {c.meta["scheme"]["name"] for c in cases}
    natural = {"litert-ref": "tflite-reference", "tflm": "tflite-micro"}[args.verify]
    if schemes != {natural}:
        print(f"note: scheme {', '.join(sorted(schemes))} is compared with {args.verify} (whose scheme is "
              f"{natural}); cases where the two intentionally differ are flagged as mismatches")
    bad = [c for c in cases if c.meta["provenance"].get("bit_exact") is False]
    for c in bad:
        print(f"MISMATCH {c.name}: {c.meta['provenance']['verified_against'].get('detail', '')}")
    for c in cases:
        v = c.meta["provenance"]["verified_against"]
        if v and v.get("result") in ("error", "inconclusive", "unsupported"):
            print(f"NOT VERIFIED {c.name}: {v.get('detail', '')}")
    return 1 if bad else 0


def run_make(args) -> int:
    from .. import load
    from ..golden.make import file_sha256, make_cases
    from .common import inputs_label, resolve_inputs

    _refuse_early(args.out, args.overwrite)
    graph = load(args.model)
    feeds = resolve_inputs(args, graph)
    ops = [o for o in (args.ops or "").split(",") if o.strip()] or None
    source = {"path": str(args.model), "sha256": file_sha256(args.model), "inputs": inputs_label(args)}
    cases = make_cases(graph, args.scheme, feeds, ops=ops, source=source)
    if not cases:
        from ..errors import GoldenError

        raise GoldenError(f"no node matches --ops {args.ops}", str(args.model))
    return _finish(args, cases, str(args.model), feeds)


def run_sweep(args) -> int:
    from ..golden.sweep import sweep_cases

    _refuse_early(args.out, args.overwrite)
    return _finish(args, sweep_cases(args.op, args.scheme, args.count, args.seed, args.dtype))


def _refuse_early(out: str, overwrite: bool) -> None:
    from ..golden.case import check_out_dir

    check_out_dir(out, overwrite)


def run_check(args) -> int:
    from ..golden.check import check_dir, load_user_kernel

    fn = load_user_kernel(args.kernel) if args.kernel else None
    results = check_dir(args.dir, args.scheme, fn)
    failed = [r for r in results if not r.ok]
    for r in results:
        if not r.ok:
            print(f"FAIL {r.case}: {r.message}")
        elif not args.quiet:
            print(f"ok   {r.case}")
    who = f"kernel {args.kernel}" if args.kernel else f"refinterp ({args.scheme or 'each case scheme'})"
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed of {len(results)} cases ({who})",
          file=sys.stderr if failed else sys.stdout)
    return 1 if failed else 0


def run_export(args) -> int:
    from ..golden.case import list_cases, read_case
    from ..golden.export_c import write_header
    from ..golden.export_raw import write_raw
    from .common import check_new_file

    cases = [read_case(p) for p in list_cases(args.dir)]
    if args.format == "c":
        check_new_file(args.out, args.overwrite)
        write_header(cases, args.out)
    else:
        _refuse_early(args.out, args.overwrite)
        write_raw(cases, args.out, overwrite=args.overwrite)
    print(f"exported {len(cases)} cases to {args.out}")
    return 0
