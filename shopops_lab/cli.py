"""`shopops-lab` command line: one argparse parser, subcommands added by registration.

To add a subcommand, decorate its run function in this module:

    @register("simulate", "run a scenario and print its event log", add_arguments=_sim_args)
    def _simulate(args: argparse.Namespace) -> int:
        from shopops_lab.sim import run   # import inside, so `--help` stays fast and one
        return run(args.scenario)         # broken module cannot break `doctor`

`main()` never needs editing: it builds the parser from COMMANDS. A ShopOpsError raised by
a command, or a usage error, becomes one line `error: <message>` on stderr and exit status 2,
without a traceback. Output to a closed pipe (`| head`), a full disk or a terminal that
cannot show every character ends cleanly too, and a closed standard output (`>&-`) is
refused before a command starts, so no file a command opens can take its place.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from shopops_lab import __version__
from shopops_lab.errors import ShopOpsError
from shopops_lab.terminal import OneLineErrorParser, refuse_closed_stdout, stdout_is_closed

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


@dataclass(frozen=True)
class Command:
    """A subcommand: its name, one-line help, how to declare its options, and what it does."""

    name: str
    help: str
    add_arguments: AddArguments
    run: Run
    ends_at_once: bool = False  # run from a real command line, the process ends when it returns
    one_layout: bool = False  # run from a real command line, it runs again with one address layout first


COMMANDS: list[Command] = []


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """Default for commands without options."""


def register(
    name: str,
    help: str,
    add_arguments: AddArguments = _no_arguments,
    *,
    ends_at_once: bool = False,
    one_layout: bool = False,
) -> Callable[[Run], Run]:
    """Decorator adding a subcommand; names are unique so a typo cannot shadow another.
    `ends_at_once`: the command leaves nothing for the interpreter's teardown to do (every
    file written and closed, every child process reaped), so a real command line skips it.
    `one_layout`: the command's processes hand over to each other thousands of times, so a
    real command line runs again with address-space randomization off (`grade.layout`)."""

    def decorate(run: Run) -> Run:
        if any(command.name == name for command in COMMANDS):
            raise ValueError(f"subcommand {name!r} is already registered")
        COMMANDS.append(Command(name, help, add_arguments, run, ends_at_once, one_layout))
        return run

    return decorate


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser, rebuilt from COMMANDS on each call so tests see late registrations. Given
    `argv`, only the subcommand it names declares its options: declaring one imports its
    module, and `grade` should not wait for `lite`'s and `simulate`'s (55 ms)."""
    chosen = _chosen(argv)
    parser = OneLineErrorParser(
        prog="shopops-lab",
        description="ShopOps Lab: a Jupyter course on distributed agent execution.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for command in COMMANDS:
        sub = subparsers.add_parser(command.name, help=command.help, description=command.help)
        if chosen is None or chosen == command.name:
            command.add_arguments(sub)
        sub.set_defaults(_run=command.run)
    return parser


def _chosen(argv: Sequence[str] | None) -> str | None:
    """The subcommand `argv` names (`layout.command_word`), or None for all."""
    from shopops_lab.course.grade.layout import command_word

    return None if argv is None else command_word(argv)


def _ends_at_once(argv: Sequence[str]) -> bool:
    chosen = _chosen(argv)
    return any(command.name == chosen and command.ends_at_once for command in COMMANDS)


def _one_layout(argv: Sequence[str]) -> bool:
    chosen = _chosen(argv)
    return any(command.name == chosen and command.one_layout for command in COMMANDS)


def _exit_status(code: object) -> int:
    """argparse exits via SystemExit; turn its code into the int main() promises."""
    if code is None:
        return 0
    return code if isinstance(code, int) else 2


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: sys.argv[1:]), run the chosen subcommand, return its status."""
    if stdout_is_closed():
        return refuse_closed_stdout()
    _replace_what_the_terminal_cannot_show()
    if argv is None and _one_layout(sys.argv[1:]):
        from shopops_lab.course.grade.layout import run_again_with_one_layout

        run_again_with_one_layout()  # returns only where it cannot (or must not)
    try:
        status = _run(argv)
        sys.stdout.flush()  # here, not at exit, so a closed pipe or a full disk is caught below
        if argv is None and _ends_at_once(sys.argv[1:]):
            sys.stderr.flush()
            os._exit(status)  # the interpreter's teardown of a loaded kit costs a grading run 40 to 70 ms
        return status
    except BrokenPipeError:  # the reader went away (`| head`): nobody is left to tell
        _discard_stdout()
        return 1
    except OSError as exc:  # e.g. a full disk under `> file`
        _discard_stdout()
        print(f"error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return 1


def _run(argv: Sequence[str] | None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, usage errors: argparse already printed
        return _exit_status(exc.code)
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._run(args) or 0)
    except ShopOpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


def _replace_what_the_terminal_cannot_show() -> None:
    """A terminal that cannot show an em dash (PYTHONIOENCODING=ascii, an old console)
    gets '?' instead of a UnicodeEncodeError halfway through the output."""
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        try:
            "\u2014\u2192".encode(stream.encoding)
        except (UnicodeEncodeError, LookupError, TypeError, AttributeError):
            if reconfigure is not None:
                reconfigure(errors="replace")


def _discard_stdout() -> None:
    """Point stdout at the null device, so the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # not a real file (a test's capture): nothing to do
        pass


@register("doctor", "check this machine can run the course; print fixes")
def _doctor(args: argparse.Namespace) -> int:
    from shopops_lab import doctor

    return doctor.main(sys.stdout)


def _build_arguments(parser: argparse.ArgumentParser) -> None:
    from shopops_lab.course.command import add_arguments

    add_arguments(parser)


@register(
    "build-notebooks",
    "write the student notebooks in notebooks/ from the masters in solutions/",
    add_arguments=_build_arguments,
)
def _build_notebooks(args: argparse.Namespace) -> int:
    from shopops_lab.course.command import run

    return run(args)


def _notebooks_arguments(parser: argparse.ArgumentParser) -> None:
    from shopops_lab.course.handout import add_arguments

    add_arguments(parser)


@register(
    "notebooks",
    "copy the kit's student notebooks into a learner's folder: adds what is new, never overwrites",
    add_arguments=_notebooks_arguments,
)
def _notebooks(args: argparse.Namespace) -> int:
    from shopops_lab.course.handout import run

    return run(args)


def _reveals_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--off",
        action="store_true",
        help="remove the model answers from this installed kit (a hub, a Binder image): for good",
    )


@register(
    "reveals",
    "say whether solution(confirm=True) can show model answers here; --off removes them from this kit",
    add_arguments=_reveals_arguments,
)
def _reveals(args: argparse.Namespace) -> int:
    from shopops_lab.checks import answers

    model = answers.FOLDER / "model_answers.py"
    if args.off and model.exists():
        model.unlink()
        print(f"removed {model}: solution() now says reveals are off (reinstall the kit to bring them back)")
    elif model.exists():
        print(f"on: solution(confirm=True) shows model answers from {model} (turn off: shopops-lab reveals --off)")
    else:
        print("off: this kit carries no model answers; solution() says so (reinstall the kit to bring them back)")
    return 0


def _grade_arguments(parser: argparse.ArgumentParser) -> None:
    from shopops_lab.course.grade.command import add_arguments

    add_arguments(parser)


@register(
    "grade",
    "grade submitted notebooks against the masters: grades.csv, grades.json, feedback/, manual.csv",
    add_arguments=_grade_arguments,
    ends_at_once=True,
    one_layout=True,
)
def _grade(args: argparse.Namespace) -> int:
    from shopops_lab.course.grade.command import run

    return run(args)


def _simulate_arguments(parser: argparse.ArgumentParser) -> None:
    from shopops_lab.sim.cli import add_arguments

    add_arguments(parser)


@register(
    "simulate",
    "play a scenario on the virtual clock; prints the seed, the checker's verdict and a replay line",
    add_arguments=_simulate_arguments,
)
def _simulate(args: argparse.Namespace) -> int:
    from shopops_lab.sim.cli import run

    return run(args)


def _lite_arguments(parser: argparse.ArgumentParser) -> None:
    from shopops_lab.course.lite import add_arguments

    add_arguments(parser)


@register(
    "lite",
    "build the course as a static JupyterLite site: `lite build --out DIR [--offline]`",
    add_arguments=_lite_arguments,
)
def _lite(args: argparse.Namespace) -> int:
    from shopops_lab.course.lite import run

    return run(args)


def _chaos_arguments(parser: argparse.ArgumentParser) -> None:
    from shopops_lab.chaos.cli import add_arguments

    add_arguments(parser)


@register(
    "chaos",
    "start worker processes on a database, SIGKILL them at seeded points, and check what survived",
    add_arguments=_chaos_arguments,
)
def _chaos(args: argparse.Namespace) -> int:
    from shopops_lab.chaos.cli import run

    return run(args)
