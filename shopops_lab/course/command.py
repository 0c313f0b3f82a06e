"""`shopops-lab build-notebooks`: the options and the run function that cli.py registers.

Kept free of nbformat imports so `shopops-lab --help` works on an engine-only install."""

from __future__ import annotations

import argparse

from shopops_lab.course import outputs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare --check, --execute, --solutions and --notebooks on the subcommand parser."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 if any student notebook differs from what the masters give",
    )
    mode.add_argument(
        "--execute", action="store_true", help="also run masters and student notebooks and store their outputs"
    )
    parser.add_argument(
        "--solutions", metavar="DIR", default="solutions", help="folder of master notebooks (default: solutions)"
    )
    parser.add_argument(
        "--notebooks", metavar="DIR", default="notebooks", help="folder of student notebooks (default: notebooks)"
    )
    outputs.add_force(parser, "--notebooks", "a folder of student notebooks")
    add_lab_option(parser, "only this lab (repeatable, e.g. --lab 01 --lab 05); default: all")


def add_lab_option(parser: argparse.ArgumentParser, help: str) -> None:
    """`--lab NN`, repeatable, into `args.labs` (None: every lab): the same on every command."""
    parser.add_argument("--lab", metavar="NN", action="append", dest="labs", help=help)


def run(args: argparse.Namespace) -> int:
    """Build or check, print one line per notebook; 0 when all is in order, 1 when --check
    found drift or a student notebook has no master. Errors propagate as ShopOpsError."""
    from shopops_lab.course.build import build_notebooks

    report = build_notebooks(
        args.solutions, args.notebooks, check=args.check, execute=args.execute, labs=args.labs, force=args.force
    )
    for line in report.lines():
        print(line)
    if not report.results:
        print(f"{args.solutions}: no NN_*.ipynb master notebooks; nothing to build")
    return 0 if report.ok else 1
