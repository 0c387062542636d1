"""The `engram` command line: one module per command, each with `register(subparsers)`."""
