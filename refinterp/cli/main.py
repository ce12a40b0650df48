"""Entry point.  Every RefinterpError becomes one line on stderr and exit code 2 (``--debug`` shows the
traceback).  Subcommands return their exit code."""
from __future__ import annotations

import argparse
import importlib
import sys

from ..errors import RefinterpError

SUBCOMMANDS = ("run", "inspect", "schemes", "diff", "capture", "golden", "sensitivity")


def build_parser() -> argparse.ArgumentParser:
    from .. import __version__

    p = argparse.ArgumentParser(prog="refinterp", description="Bit-exact reference interpreter for quantized "
                                "ONNX and TFLite models.")
    p.add_argument("--version", action="version", version=f"refinterp {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    p.add_argument("--max-memory", metavar="SIZE", help="memory budget for tensors read or allocated, e.g. "
                   "512M or 2G (default: REFINTERP_MAX_MEMORY, else half the RAM)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        try:
            mod = importlib.import_module(f"{__package__}.{name}_cmd")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{name}_cmd":
                raise
            continue
        mod.register(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        if getattr(args, "max_memory", None):
            from ..limits import set_max_memory

            set_max_memory(args.max_memory)
        return int(args.func(args) or 0)
    except RefinterpError as e:
        if args.debug:
            raise
        print(f"refinterp: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("refinterp: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug in refinterp: still one line unless --debug
        if args.debug:
            raise
        print(f"refinterp: internal error: {type(e).__name__}: {e} (rerun with --debug for a traceback)",
              file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
