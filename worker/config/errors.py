"""Exceptions the worker raises itself.

    Exception
    └── ConfigError   a setting in the environment (or a file it names) is unusable

A ConfigError always names the environment variable to fix, so a failed start can tell
the user exactly what to change. Messages never contain the value of a secret.
"""

from __future__ import annotations


class ConfigError(Exception):
    """Raised when an environment variable (or the file it points to) has a bad value."""

    def __init__(self, var: str, message: str) -> None:
        super().__init__(var, message)
        self.var = var
        self.message = message

    def __str__(self) -> str:
        return f"{self.var}: {self.message}"
