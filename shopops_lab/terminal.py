"""What every `shopops-lab` command needs from its terminal, below the commands themselves (so
`cli` and `sim.cli` share it without importing each other): usage errors in one line, and a
closed standard output refused before anything runs."""

from __future__ import annotations

import argparse
import io
import os
import sys
from typing import NoReturn

__all__ = ["OneLineErrorParser", "refuse_closed_stdout", "stdout_is_closed"]


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors in one line, like the kit's other refusals, pointing at --help."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see: {self.prog} --help)\n")


def stdout_is_closed() -> bool:
    """True when the process was started with its standard output closed (`>&-`): Python then
    has no sys.stdout, and the next file anything opens would become file descriptor 1, where
    a stray write would land inside it (a database, a notebook)."""
    if sys.stdout is None:
        return True
    try:
        descriptor = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # not a real file (a test's capture): open
        return False
    try:
        os.fstat(descriptor)
    except OSError:
        return True
    return False


def refuse_closed_stdout() -> int:
    """One line on stderr (if it is open) and exit status 2: nothing was done."""
    if sys.stderr is not None:
        print(
            "error: standard output is closed (>&-), so nothing this command says could be shown; nothing was "
            "done. Fix: leave it open, or send it to the null device: > /dev/null",
            file=sys.stderr,
        )
    return 2
