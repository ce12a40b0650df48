"""``refinterp capture MODEL --runtime NAME (--inputs in.npz | --input NAME=F.npy | --random-inputs SEED)
--out DUMP``: run a real runtime and write every intermediate tensor as a refinterp ``.npy`` dump
(several samples when the inputs carry a leading sample axis)."""
from __future__ import annotations


def register(sub) -> None:
    from ..dumps.capture import RUNTIMES
    from ..dumps.arm64_env import CORES
    from ..dumps.capture_arm64 import ARCHES
    from ..dumps.capture_qnn import HTP_ARCHS

    p = sub.add_parser("capture", help="run a real runtime (LiteRT, TFLM, ONNX Runtime, Qualcomm's HTP "
                                             "emulation) and dump every tensor")
    p.add_argument("model")
    p.add_argument("--runtime", required=True, choices=RUNTIMES)
    from .common import add_input_args

    add_input_args(p, required=True, inputs_help="inputs keyed by input name; a leading sample axis gives "
                                                 "several samples")
    p.add_argument("--out", required=True, metavar="DUMP", help="output folder (refinterp npy dump)")
    p.add_argument("--ort-opt-level", default="all", choices=("disable", "basic", "extended", "all"),
                   help="ONNX Runtime graph optimisation level (default all: the tensors of ORT's optimized "
                        "graph, as deployed; disable: every tensor of the model, unfused)")
    p.add_argument("--htp-arch", default="73", choices=HTP_ARCHS,
                   help="qnn-htp: the Hexagon architecture the emulator models (default 73)")
    p.add_argument("--htp-probes", type=int, default=None, metavar="N",
                   help="qnn-htp: at most N emulator sessions (each builds the model: 1-10 s) search for the tensors "
                        "whose exposure changes what the HTP computes; those left unresolved are left out of the "
                        "dump (default 48)")
    p.add_argument("--arch", default="x86_64", choices=ARCHES,
                   help="run the runtime's aarch64 build under qemu user-mode emulation (arm64: LiteRT 2.3 / "
                        "ONNX Runtime 1.32; arm64-tflite2.14: tflite-runtime 2.14); build it once with: python -m refinterp.dumps.arm64_env")
    p.add_argument("--arm-core", default="a76", choices=tuple(CORES),
                   help="the emulated ARM core (a53: no dot-product, a76: dot-product, i8mm); default a76")
    p.add_argument("--overwrite", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    import numpy as np

    from .. import load
    from ..dumps.capture import capture
    from ..dumps.npydir import write_npy_dump
    from ..errors import InputError
    from ..samples import feed_samples
    from .common import check_dump_dir, resolve_inputs

    check_dump_dir(args.out, args.overwrite)
    graph = load(args.model)
    samples = feed_samples(graph, resolve_inputs(args, graph))
    notes: list[str] = []
    if args.htp_probes is not None and args.htp_probes < 0:
        raise InputError(f"--htp-probes {args.htp_probes}: a count of sessions, 0 or more")
    results = capture(graph, args.runtime, samples, args.ort_opt_level, args.htp_arch, args.arch, args.arm_core,
                      notes, args.htp_probes)
    names = [n for n in results[0] if all(n in r for r in results)]
    if len(results) == 1:
        tensors, k = results[0], None
    else:
        tensors, k = {n: np.stack([r[n] for r in results]) for n in names}, len(results)
    source = f"runtime:{args.runtime}" + (f" htp_arch={args.htp_arch}" if args.runtime == "qnn-htp" else "") + \
        (f" arch={args.arch} core={args.arm_core} (qemu user-mode emulation)" if args.arch != "x86_64" else "")
    write_npy_dump(args.out, {n: tensors[n] for n in names}, graph, "; ".join([source] + notes),
                   overwrite=args.overwrite, samples=k)
    print(f"captured {len(names)} tensors x {len(results)} sample(s) from {args.runtime} -> {args.out}")
    for note in notes:
        print(f"note: {note}")
    return 0
