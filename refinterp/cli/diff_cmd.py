"""``refinterp diff MODEL --scheme S --against DUMP``: compare every tensor with a device dump.

Exit codes: 0 every compared tensor within policy, 1 something diverged (or could not be aligned),
2 bad usage or unreadable input (raised as RefinterpError, printed by the main entry)."""
from __future__ import annotations

import json
import sys

from .common import add_input_args


def register(sub) -> None:
    p = sub.add_parser("diff", help="compare every layer against a device dump (first divergence, "
                                    "local vs inherited error)")
    p.add_argument("model")
    p.add_argument("--scheme", default="float32", help="scheme name or YAML path (default float32)")
    p.add_argument("--against", required=True, metavar="DUMP", help="dump file or folder")
    p.add_argument("--format", dest="dump_format", metavar="FMT",
                   help="dump format (npy, npz, raw, polygraphy, ort, tflm, qnn, snpe, aimet, vitis); "
                        "detected when omitted")
    p.add_argument("--runner", metavar="NAME", help="Polygraphy RunResults: the runner to compare (default the "
                                                  "first one in the file)")
    add_input_args(p, inputs_help="the inputs given to the device (default: the model inputs stored in "
                                  "the dump; --random-inputs SEED: the same seed as `capture --random-inputs`)")
    p.add_argument("--mapping", metavar="FILE", help="YAML/JSON {model tensor: dump tensor | null}")
    p.add_argument("--atol-lsb", nargs="+", metavar="[NAME:]N",
                   help="tolerance in LSBs for quantized tensors (default 0); NAME:N per tensor")
    p.add_argument("--atol", nargs="+", metavar="[NAME:]X", help="absolute tolerance for float tensors")
    p.add_argument("--rtol", nargs="+", metavar="[NAME:]X", help="relative tolerance for float tensors")
    p.add_argument("--json", metavar="F", help="write the machine-readable report")
    p.add_argument("--html", metavar="F", help="write a self-contained HTML report")
    p.add_argument("--csv", metavar="F", help="write a QuantizationDebugger-style CSV")
    p.add_argument("--model-explorer", metavar="F", help="write a Model Explorer node-data overlay")
    p.add_argument("--model-explorer-metric", default="nrmse",
                   help="metric of the overlay: nrmse, max_abs_lsb, cosine, max_abs_error, sqnr_db, "
                        "or local_<metric> (default nrmse)")
    p.add_argument("--save-polygraphy", metavar="F",
                   help="also write the reference run's tensors as Polygraphy RunResults JSON")
    p.add_argument("--explain", action="store_true",
                   help="re-run every node on the device's inputs under every built-in scheme and single-knob "
                        "variant; report which arithmetic reproduces each tensor and best_scheme")
    p.add_argument("--write-scheme", metavar="F.yaml",
                   help="(implies --explain) write a scheme extending best_scheme with the per-op / per-node "
                        "overrides that reproduce the dump")
    p.add_argument("--quiet", action="store_true", help="no terminal table")
    p.set_defaults(func=run)


def _progress():
    if not sys.stderr.isatty():
        return None, None
    from rich.progress import Progress

    prog = Progress(transient=True)
    task = prog.add_task("diff", total=None)
    prog.start()

    def cb(done: int, total: int) -> None:
        prog.update(task, completed=done, total=total)

    return prog, cb


def run(args) -> int:
    from .. import load
    from ..compare.align import load_mapping
    from ..compare.engine import Differ
    from ..compare.policy import Policy
    from ..compare import report_files as rf
    from ..dumps.detect import read_dump
    from .common import given_inputs

    graph = load(args.model)
    policy = Policy.from_args(args.atol_lsb, args.atol, args.rtol)
    mapping = load_mapping(args.mapping) if args.mapping else None
    if args.runner:
        from ..dumps.polygraphy import read_polygraphy

        dump = read_polygraphy(args.against, args.runner)
    else:
        dump = read_dump(args.against, args.dump_format)
    feeds = given_inputs(args, graph)
    differ = Differ(graph, args.scheme, policy, mapping)
    differ.keep_reference = bool(args.save_polygraphy)
    differ.explain = bool(args.explain or args.write_scheme)
    prog, cb = _progress()
    try:
        res = differ.run(dump, feeds, progress=cb)
    finally:
        if prog is not None:
            prog.stop()
    if args.write_scheme:
        from ..compare.scheme_writer import write_scheme

        res.explanation["suggested_scheme"] = write_scheme(differ.explanation, args.write_scheme, dump.path)
    if args.json:
        rf.write_text_atomic(args.json, rf.to_json_text(res))
    if args.csv:
        rf.write_text_atomic(args.csv, rf.to_csv_text(res))
    if args.model_explorer:
        rf.write_text_atomic(args.model_explorer,
                             json.dumps(rf._finite(rf.to_model_explorer(res, args.model_explorer_metric)), indent=1))
    if args.html:
        from ..compare.report_html import to_html

        rf.write_text_atomic(args.html, to_html(res))
    if args.save_polygraphy:
        from ..dumps.polygraphy import write_polygraphy

        write_polygraphy(args.save_polygraphy, differ.reference_samples, f"refinterp-{res.scheme['name']}",
                         overwrite=True)
    if not args.quiet:
        from ..compare.report_term import print_report

        print_report(res)
    return 0 if res.passed else 1
