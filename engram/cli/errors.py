"""Errors the CLI reports without a traceback."""


class UsageError(Exception):
    """Bad input from the user: printed as one message, exit code 2."""
