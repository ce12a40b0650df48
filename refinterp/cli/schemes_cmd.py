"""``refinterp schemes``: list the known schemes; ``refinterp schemes show NAME`` prints one fully
resolved (after ``extends:``) as YAML; ``refinterp schemes check FILE`` validates a scheme file."""
from __future__ import annotations

_FIRST = ("name", "describes", "backend_version", "status", "verified_against", "source", "notes")


def register(sub) -> None:
    p = sub.add_parser("schemes", help="list, show or check schemes",
                       description="List the schemes found in the scheme directories "
                       "(REFINTERP_SCHEMES_PATH, then the built-in ones).")
    p.add_argument("action", nargs="?", choices=("list", "show", "check"), default="list",
                   help="list (default), show NAME (fully resolved YAML), check FILE (validate)")
    p.add_argument("scheme", nargs="?", help="scheme name or path to a .yaml file")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import InputError
    from ..scheme_check import load_checked
    from ..schemes import list_schemes

    if args.action == "list":
        for name, desc in list_schemes():
            print(f"{name:24s} {' '.join(desc.split())}")
        return 0
    if not args.scheme:
        raise InputError(f"'refinterp schemes {args.action}' needs a scheme name or file")
    scheme = load_checked(args.scheme)
    if args.action == "check":
        print(f"{scheme.path}: ok ({scheme.name})")
        return 0
    print(format_resolved(scheme), end="")
    return 0


def format_resolved(scheme) -> str:
    import yaml

    data = {k: scheme.data[k] for k in _FIRST if k in scheme.data}
    data.update((k, v) for k, v in scheme.data.items() if k not in data)
    head = f"# {scheme.path}"
    if scheme.parents:
        head += f" (resolved; extends {' -> '.join(scheme.parents)})"
    return head + "\n" + yaml.safe_dump(data, sort_keys=False, width=100)
