"""The two domain errors every command raises; the CLI turns them into a message and an exit code
(fastapi-cli's pattern), so logic never prints or exits."""

from __future__ import annotations

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class DoctorError(Exception):
    """Base class: carries the exit code the CLI should use."""

    exit_code = EXIT_INTERNAL


class UsageError(DoctorError):
    """Bad input from the user: one line, exit 2."""

    exit_code = EXIT_USAGE


class CannotRun(DoctorError):
    """ddpdoctor itself could not run (torchrun missing, internal error): exit 3."""

    exit_code = EXIT_INTERNAL


def printable(text: str) -> str:
    """A user's text inside a one-line message: control characters escaped, never raw (a
    newline in an argument must not break the line, an ESC must not reach the terminal)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
