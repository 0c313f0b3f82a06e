"""One address layout for the grader and every process it starts (Linux).

A check hands control back and forth between its judge and the learner's process thousands
of times (lab 07: 20,000 calls of the learner's policy), the two pinned to one core
(`confinement.pin`). Each side runs the same interpreter loop, and the processor's branch
predictors and caches learn it by address: when the two processes map the interpreter at
the same addresses, what one side taught them serves the other. The judges are forks of the
grader, the learners forks of the zygote, a fresh interpreter; with address-space
randomization on, those two get different layouts and each hand-over starts cold. Measured
on the 2-core build machine: a call of lab 07's policy across the boundary takes 86 us with
two layouts and 55 us with one; grading lab 07 takes a quarter less.

So `grade`, run from a command line, runs itself again at once with randomization off
(`personality(ADDR_NO_RANDOMIZE)`, what `setarch -R` does), which every process it starts
inherits. Where the OS refuses it (a container's seccomp profile), or
SHOPOPS_GRADE_RANDOM_LAYOUT=1 asks to keep randomization, grading goes on as it is: the
same grades, slower. What it costs is in docs/internals.md's threat model: the grader's own
addresses become predictable, which matters only to a memory-corruption exploit of the
grader's C code, whose input from learner processes is JSON.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Sequence

ADDR_NO_RANDOMIZE = 0x0040000
QUERY = 0xFFFFFFFF  # personality(QUERY) reads the current persona without changing it
AGAIN = "SHOPOPS_GRADE_LAYOUT"  # set before running again: never a second time, whatever the OS did
KEEP = "SHOPOPS_GRADE_RANDOM_LAYOUT"


def fixed() -> bool:
    """Does this process run with address-space randomization off?"""
    persona = _personality(QUERY)
    return persona is not None and bool(persona & ADDR_NO_RANDOMIZE)


def command_word(argv: Sequence[str]) -> str | None:
    """The subcommand a command line names: its first word that is not an option (the CLI's
    rule too, here so it can be asked before the CLI loads)."""
    return next((word for word in argv if not word.startswith("-")), None)


def run_again_if_grading(argv: Sequence[str]) -> None:
    """`run_again_with_one_layout` when `argv` asks the CLI to grade, called before it loads."""
    if command_word(argv) == "grade":
        run_again_with_one_layout()


def run_again_with_one_layout() -> None:
    """Replace this process by itself, run with the same command line and randomization off;
    return (changing nothing) where that cannot be done or is not wanted."""
    if os.environ.get(AGAIN) or os.environ.get(KEEP) or not getattr(sys, "orig_argv", None):
        return
    persona = _personality(QUERY)
    if persona is None or persona & ADDR_NO_RANDOMIZE:
        return
    if _personality(persona | ADDR_NO_RANDOMIZE) is None:
        return
    os.environ[AGAIN] = "1"
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execv(sys.executable, sys.orig_argv)
    except OSError:  # the interpreter cannot be run again: go on here, as we were
        del os.environ[AGAIN]
        _personality(persona)


def _personality(persona: int) -> int | None:
    """libc's personality(2): the persona before the call, or None where there is none to ask."""
    if sys.platform != "linux":
        return None
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        found = int(ctypes.CDLL(None, use_errno=True).personality(ctypes.c_ulong(persona)))
        return None if found == -1 else found
    return None
