"""The aarch64 runtimes, run on an x86-64 host under qemu user-mode emulation.

Phones and boards run LiteRT's and ONNX Runtime's *ARM* kernels, which compute differently from the
x86 builds.  Their official aarch64 wheels run here unchanged under ``qemu-aarch64-static``: a
minimal arm64 Debian tree (``mmdebstrap --variant=extract``: the loader, libc, libstdc++ and a
python3.11) is the emulated program's root (``-L``), and the wheels are unpacked into a site folder
with ``pip install --target --platform manylinux_*_aarch64`` (no binfmt, no chroot, no root needed
once qemu is installed).

Layout of the environment folder (``REFINTERP_ARM64_ENV`` or ``~/.cache/refinterp/arm64-env``):

    base/               the arm64 Debian tree
    cores/<core>/       a root per emulated core: symlinks into base/ plus its own proc/cpuinfo
    site-<name>/        one wheel set per runtime release (SITES)

Per core, the root carries an ARM ``/proc/cpuinfo`` that matches the CPU qemu emulates: qemu
passes the host's x86 cpuinfo through, which the cpuinfo library inside XNNPACK / ORT cannot parse
(crash) or reads as a core it is not, picking instructions qemu then refuses (SIGILL).  ``-cpu max``
enables SME, whose XNNPACK kernels qemu 7.2 computes wrongly, hence ``max,sme=off`` for i8mm.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..errors import RefinterpError

# The aarch64 wheel sets.  Pinned with == (they are oracles); the 2.3 set matches the test extras.
SITES = {
    "litert-2.3": ("ai-edge-litert==2.3.0", "onnxruntime==1.32.0", "numpy==2.4.6"),
    "tflite-2.14": ("tflite-runtime==2.14.0", "numpy==1.26.4"),  # the old package; needs numpy < 2
    # the same old package for this (x86-64) host, run by the host's Python 3.11 (no emulation)
    "tflite-2.14-x86_64": ("tflite-runtime==2.14.0", "numpy==1.26.4"),
}
DEBIAN = ("bookworm", ("python3.11", "libpython3.11-stdlib", "libstdc++6", "libgomp1", "zlib1g", "libffi8",
                       "libssl3"))
_TAGS = ("manylinux2014_aarch64",) + tuple(f"manylinux_2_{m}_aarch64" for m in (17, 24, 27, 28, 31, 34, 35, 36))
_HOST_TAGS = ("manylinux2014_x86_64",) + tuple(f"manylinux_2_{m}_x86_64" for m in (17, 28))


@dataclass(frozen=True)
class Core:
    qemu_cpu: str
    part: str          # MIDR part number of the core the cpuinfo announces
    features: str      # /proc/cpuinfo Features (XNNPACK / ruy / MLAS select kernels from these + HWCAP)
    what: str


_BASE_FEATURES = "fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid"
CORES = {
    # Cortex-A53 class: ARMv8.0, no dot-product (older / low-end phones).
    "a53": Core("cortex-a53", "0xd03", _BASE_FEATURES, "Cortex-A53 (ARMv8.0, no dot-product)"),
    # Cortex-A76 class: ARMv8.2 with SDOT/UDOT (most phones since 2019).
    "a76": Core("cortex-a76", "0xd0b", _BASE_FEATURES + " atomics fphp asimdhp asimdrdm lrcpc dcpop asimddp",
                "Cortex-A76 (ARMv8.2 + dot-product)"),
    # An ARMv8.6+ core with int8 matrix multiply (i8mm: SMMLA), announced as a Neoverse N2; SME off.
    "i8mm": Core("max,sme=off", "0xd49", _BASE_FEATURES + " atomics fphp asimdhp asimdrdm lrcpc dcpop asimddp "
                 "sve sve2 i8mm bf16 svei8mm", "ARMv9 core with i8mm (qemu max, SME off)"),
}


class Arm64EnvMissing(RefinterpError):
    """The emulation environment is not built (or cannot be on this machine)."""


def env_root() -> Path:
    return Path(os.environ.get("REFINTERP_ARM64_ENV") or Path.home() / ".cache" / "refinterp" / "arm64-env")


def qemu() -> str | None:
    return shutil.which("qemu-aarch64-static") or shutil.which("qemu-aarch64")


def _cpuinfo(core: Core) -> str:
    return "".join(f"processor\t: {i}\nBogoMIPS\t: 50.00\nFeatures\t: {core.features}\nCPU implementer\t: 0x41\n"
                   f"CPU architecture: 8\nCPU variant\t: 0x1\nCPU part\t: {core.part}\nCPU revision\t: 1\n\n"
                   for i in range(2))


def status(site: str = "litert-2.3") -> str | None:
    """None when the environment can run ``site``; else why not (one line)."""
    root = env_root()
    if site.endswith("x86_64"):
        ok = (root / f"site-{site}" / ".complete").exists()
        return None if ok else f"the wheels '{site}' are not installed in {root} (build it: python -m refinterp.dumps.arm64_env)"
    if qemu() is None:
        return "qemu-aarch64-static is not installed (apt-get install qemu-user-static)"
    if not (root / "base" / "usr" / "bin" / "python3.11").exists():
        return f"no arm64 root in {root / 'base'} (build it: python -m refinterp.dumps.arm64_env)"
    if not (root / f"site-{site}" / ".complete").exists():
        return f"the aarch64 wheels '{site}' are not installed in {root} (build it: python -m refinterp.dumps.arm64_env)"
    return None


def command(core: str = "a76", site: str = "litert-2.3", path: tuple[str, ...] = ()) -> tuple[list[str], dict[str, str]]:
    """argv prefix (run a Python script under the emulated core) and the environment to run it with;
    ``path``: host folders put before the wheels on the emulated Python's sys.path."""
    why = status(site)
    if why:
        raise Arm64EnvMissing(f"the aarch64 emulation is not available: {why}")
    if core not in CORES:
        raise Arm64EnvMissing(f"unknown core '{core}' (known: {', '.join(CORES)})")
    root = env_root()
    croot = _core_root(root, core)
    argv = [qemu(), "-cpu", CORES[core].qemu_cpu, "-L", str(croot), str(root / "base" / "usr" / "bin" / "python3.11")]
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": str(root),
           "QEMU_SET_ENV": f"PYTHONPATH={':'.join([*path, str(root / f'site-{site}')])},PYTHONDONTWRITEBYTECODE=1"}
    return argv, env


def host_site(site: str) -> Path:
    """The folder of a wheel set for this host (``tflite-2.14-x86_64``), to put on PYTHONPATH."""
    why = status(site)
    if why:
        raise Arm64EnvMissing(f"the old-runtime environment is not available: {why}")
    return env_root() / f"site-{site}"


def _core_root(root: Path, core: str) -> Path:
    """cores/<core>: symlinks to every top-level entry of base/ except proc, and its own proc/cpuinfo."""
    croot = root / "cores" / core
    info = croot / "proc" / "cpuinfo"
    text = _cpuinfo(CORES[core])
    if info.exists() and info.read_text() == text:
        return croot
    (croot / "proc").mkdir(parents=True, exist_ok=True)
    for entry in (root / "base").iterdir():
        link = croot / entry.name
        if entry.name != "proc" and not link.exists() and not link.is_symlink():
            link.symlink_to(entry)
    info.write_text(text)
    return croot


def _run(argv: list[str], what: str) -> None:
    print("+", " ".join(argv), flush=True)
    proc = subprocess.run(argv, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = " | ".join(line for line in (proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise Arm64EnvMissing(f"{what} failed (exit {proc.returncode}): {tail}")


def build(install_system: bool = False, sites: tuple[str, ...] = tuple(SITES)) -> Path:
    """Build (or complete) the environment; ``install_system``: apt-get the emulator if missing (root)."""
    if qemu() is None or shutil.which("mmdebstrap") is None:
        if not install_system:
            raise Arm64EnvMissing("qemu-aarch64-static / mmdebstrap are not installed "
                                  "(apt-get install qemu-user-static mmdebstrap)")
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise Arm64EnvMissing("qemu-user-static / mmdebstrap are missing and this machine cannot apt-get them "
                                  "(not root, or no apt)")
        _run(["apt-get", "install", "-y", "-q", "qemu-user-static", "mmdebstrap"], "apt-get install")
    root = env_root()
    base = root / "base"
    if not (base / "usr" / "bin" / "python3.11").exists():
        shutil.rmtree(base, ignore_errors=True)
        base.parent.mkdir(parents=True, exist_ok=True)
        suite, pkgs = DEBIAN
        _run(["mmdebstrap", "--quiet", "--variant=extract", "--architectures=arm64", f"--include={','.join(pkgs)}",
              suite, str(base)], "mmdebstrap (arm64 root)")
    for name in sites:
        site = root / f"site-{name}"
        if (site / ".complete").exists():
            continue
        shutil.rmtree(site, ignore_errors=True)
        argv = [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", str(site),
                "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp", "--abi", "cp311"]
        for tag in (_HOST_TAGS if name.endswith("x86_64") else _TAGS):
            argv += ["--platform", tag]
        _run(argv + list(SITES[name]), f"pip install of the aarch64 wheels {name}")
        (site / ".complete").write_text("\n".join(SITES[name]) + "\n")
    for core in CORES:
        _core_root(root, core)
    return root


def main(argv: list[str] | None = None) -> int:
    """``python -m refinterp.dumps.arm64_env [--install-system] [--if-possible]``: build the environment."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m refinterp.dumps.arm64_env",
                                 description="Build the aarch64 emulation environment (qemu user mode, an arm64 "
                                             "Debian root, the aarch64 wheels) used by capture --arch arm64.")
    ap.add_argument("--install-system", action="store_true",
                    help="apt-get qemu-user-static and mmdebstrap when missing (needs root)")
    ap.add_argument("--if-possible", action="store_true", help="print why it cannot be built and exit 0")
    args = ap.parse_args(argv)
    try:
        root = build(install_system=args.install_system)
    except Arm64EnvMissing as e:
        print(f"arm64 emulation environment not built: {e}", file=sys.stderr)
        return 0 if args.if_possible else 1
    print(f"arm64 emulation environment ready: {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
