"""Command line: ``refinterp <subcommand>``; one module per subcommand, each with ``register(subparsers)``."""
