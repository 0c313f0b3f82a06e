"""`shopops-lab simulate SCENARIO`: play a scenario and print its report.

The lead's `shopops_lab.cli` registers `add_arguments` and `run`; `python -m shopops_lab.sim`
runs the same command on its own. Exit status: 0 when the checker finds nothing wrong
(or cannot judge), 1 when it names an anomaly, 2 for bad input such as an unknown scenario.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence

from shopops_lab.errors import ShopOpsError
from shopops_lab.terminal import OneLineErrorParser, refuse_closed_stdout, stdout_is_closed

__all__ = ["add_arguments", "main", "run"]

EPILOG = """\
exit status: 0 nothing wrong (or not judged), 1 the checker found an anomaly, 2 bad input.
every report ends with the seed and a line that replays the run exactly."""


def count(most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to `most`, refused at once otherwise (a run
    of 10**18 items would otherwise fill the memory before it said anything)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {most:,}, not {text!r}")
        return value

    return parse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from shopops_lab.sim.engine import ADAPTERS
    from shopops_lab.sim.scenarios import MAX_ITEMS, MAX_WORKERS, SCENARIOS

    parser.add_argument("scenario", metavar="SCENARIO", help=f"which scenario to play: {', '.join(sorted(SCENARIOS))}")
    parser.add_argument("--seed", type=int, default=0, help="the run's one random seed (default 0)")
    parser.add_argument(
        "--items",
        type=count(MAX_ITEMS),
        default=None,
        metavar="N",
        help=f"how many items, 1 to {MAX_ITEMS:,} (default: the scenario's)",
    )
    parser.add_argument(
        "--workers",
        type=count(MAX_WORKERS),
        default=None,
        metavar="N",
        help=f"how many workers, 1 to {MAX_WORKERS:,} (default: the scenario's)",
    )
    parser.add_argument(
        "--adapter",
        choices=sorted(ADAPTERS),
        default="idempotent",
        help="idempotent: sends dedupe on the key; naive: every send reaches the customer",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.add_argument("--events", action="store_true", help="with --json: include the whole event log")
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def run(args: argparse.Namespace) -> int:
    """Play the scenario `args` names and print the report; returns the exit status."""
    from shopops_lab.sim.engine import run as simulate

    try:
        report = simulate(args.scenario, seed=args.seed, items=args.items, workers=args.workers, adapter=args.adapter)
    except ShopOpsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report.as_dict(events=args.events), sort_keys=True))
    else:
        print(report)
    return 1 if report.valid is False else 0


def main(argv: Sequence[str] | None = None) -> int:
    if stdout_is_closed():
        return refuse_closed_stdout()

    parser = OneLineErrorParser(
        prog="shopops-lab simulate", description="Play a burst-day scenario and print its report."
    )
    add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help or a usage error: argparse already printed
        return exc.code if isinstance(exc.code, int) else 2
    return run(args)


if __name__ == "__main__":
    raise SystemExit(main())
