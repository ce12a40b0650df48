#!/usr/bin/env python3
"""Build the aarch64 emulation environment (qemu user mode + arm64 Debian root + the aarch64 wheels of
LiteRT / ONNX Runtime / tflite-runtime 2.14) that the ARM64 conformance tests and
`refinterp capture --arch arm64` use.  Idempotent; see refinterp/dumps/arm64_env.py.

usage: tools/setup_arm64_env.py [--install-system] [--if-possible]
  --install-system  apt-get qemu-user-static and mmdebstrap when missing (needs root)
  --if-possible     never fail: print why the environment cannot be built and exit 0
                    (`make test` uses this; the ARM64 tests then skip with that reason)
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from refinterp.dumps.arm64_env import Arm64EnvMissing, build  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--install-system", action="store_true")
    ap.add_argument("--if-possible", action="store_true")
    args = ap.parse_args()
    try:
        root = build(install_system=args.install_system)
    except Arm64EnvMissing as e:
        print(f"arm64 emulation environment not built: {e}", file=sys.stderr)
        return 0 if args.if_possible else 1
    print(f"arm64 emulation environment ready: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
