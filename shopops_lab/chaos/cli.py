"""`shopops-lab chaos`: real worker processes, SIGKILL, and the checker's verdict.

Exit status: 0 when the checker finds nothing wrong, 1 when it names an anomaly (the naive
adapter's double contacts), 2 for bad input or a run that could not finish.
"""

from __future__ import annotations

import argparse
import json
import sys

from shopops_lab.chaos.run import ADAPTERS, LIMITS
from shopops_lab.store import redact

__all__ = ["add_arguments", "run"]

EPILOG = """\
examples:
  shopops-lab chaos --db sqlite:///chaos.db --items 40 --workers 3 --kills 12 --seed 7
  shopops-lab chaos --db postgresql://class@db.example/shopops --workers 8 --kills 20 --json

every run needs a new, empty database. a database restart is ridden through; a run stopped
anywhere (killed, the disk full) is finished with --db URL --resume (docs/operators.md).
exit status: 0 valid, 1 the checker found an anomaly, 2 bad input or a run that could not finish."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        required=True,
        metavar="URL",
        help="an empty database the workers share: sqlite:///path.db or postgresql://...",
    )
    parser.add_argument("--items", type=int, default=40, help=f"emails to send (default 40, at most {LIMITS['items']})")
    parser.add_argument(
        "--workers", type=int, default=3, help=f"worker processes (default 3, at most {LIMITS['workers']})"
    )
    parser.add_argument("--kills", type=int, default=12, help="how many times to SIGKILL a worker (default 12)")
    parser.add_argument("--seed", type=int, default=0, help="decides the items and where the kills land (default 0)")
    parser.add_argument(
        "--adapter",
        choices=ADAPTERS,
        default="idempotent",
        help="idempotent: a repeated key returns the first message; naive: every send reaches the customer",
    )
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=1.0,
        help="how long a killed worker's item stays invisible before it comes back (default 1)",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds (default 300)")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="finish the run already on --db from wherever it stopped, with its own settings",
    )
    parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    parser.epilog = EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def run(args: argparse.Namespace) -> int:
    from shopops_lab.chaos.run import run_chaos

    try:
        report = run_chaos(
            args.db,
            items=args.items,
            workers=args.workers,
            kills=args.kills,
            seed=args.seed,
            adapter=args.adapter,
            lease_seconds=args.lease_seconds,
            timeout=args.timeout,
            resume=args.resume,
        )
    except KeyboardInterrupt:  # the workers are gone already (the supervisor's cleanup): say how to go on
        print(f"interrupted: finish the run with shopops-lab chaos --db {redact(args.db)} --resume", file=sys.stderr)
        return 130
    print(json.dumps(report.as_dict(), sort_keys=True) if args.json else report)
    return 1 if report.valid is False else 0
