"""Due dates and the late policy: `--due [LAB=]WHEN` and `--late-policy none|zero|N%/day`.

A submission is late when the time its layout gives (the exchange's timestamp, nbgrader's
timestamp.txt, a `--student-pattern` time group) is after its lab's due date, or when its
LMS marked it late (Canvas's `LATE`). The policy takes points off the row's total: `none`
(the default) only flags it, `zero` scores it 0, `N%/day` takes N% of the lab's points for
each day or part of a day late (never below 0). A late mark without a time cannot be
counted in days: `N%/day` then takes nothing, and the row says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from shopops_lab.course.grade.submissions import Submission, parse_time
from shopops_lab.errors import BadArgumentError

DAY = 24 * 3600.0
PER_DAY = re.compile(r"^(\d+(?:\.\d+)?)%/day$")


@dataclass(frozen=True, slots=True)
class LatePolicy:
    """What lateness costs: nothing (`none`), everything (`zero`), or a share of the lab's
    points per day or part of a day (`per_day`, from 0 to 1)."""

    text: str = "none"
    zero: bool = False
    per_day: float = 0.0

    @classmethod
    def parse(cls, text: str | None) -> LatePolicy:
        spoken = (text or "none").strip().lower()
        if spoken in ("none", "zero"):
            return cls(spoken, zero=spoken == "zero")
        match = PER_DAY.match(spoken)
        if match and 0 < float(match.group(1)) <= 100:
            return cls(spoken, per_day=float(match.group(1)) / 100)
        raise BadArgumentError(
            field="--late-policy",
            problem=f"is {text!r}",
            fix="pass none (flag late work only), zero, or a share of the lab's points per day late, e.g. 10%/day",
        )


@dataclass(frozen=True, slots=True)
class Lateness:
    """How late a submission is: not late; late by `seconds`; or marked late by its LMS
    with no time to count (`seconds` None)."""

    late: bool = False
    seconds: float | None = None

    def text(self) -> str:
        """`late by 1 d 2 h 30 min` (minutes rounded up), or `late (marked so by the LMS)`."""
        if not self.late:
            return ""
        if self.seconds is None:
            return "late (marked so by the LMS)"
        minutes = math.ceil(self.seconds / 60)
        days, rest = divmod(minutes, 24 * 60)
        hours, minutes = divmod(rest, 60)
        parts = [f"{days} d" if days else "", f"{hours} h" if hours else "", f"{minutes} min" if minutes else ""]
        return "late by " + " ".join(part for part in parts if part)

    def penalty(self, policy: LatePolicy, earned: float, most: float) -> float:
        """The points `policy` takes off `earned` (of `most`) for this lateness."""
        if not self.late:
            return 0.0
        if policy.zero:
            return earned
        if self.seconds is None or not policy.per_day:
            return 0.0
        days = math.ceil(self.seconds / DAY)
        return min(earned, round(most * policy.per_day * days, 4))


def lateness(submission: Submission, due: datetime | None) -> Lateness:
    """How late `submission` is against `due` (None: no due date for its lab)."""
    if due is not None and submission.submitted is not None and submission.submitted > due:
        return Lateness(True, (submission.submitted - due).total_seconds())
    if submission.late_mark:
        return Lateness(True, None)
    return Lateness()


def due_dates(given: Sequence[str], labs: Sequence[str]) -> dict[str, datetime]:
    """`--due` values (`WHEN` for every lab of this run, or `LAB=WHEN`) by lab; a time without
    a zone is UTC. Refuses a time that is not ISO 8601 or a lab that is not two digits."""
    found: dict[str, datetime] = {}
    for value in given:
        lab, _, when = value.rpartition("=")
        moment = parse_time(when)
        if moment is None or (lab and not (len(lab.strip()) in (1, 2) and lab.strip().isdigit())):
            raise BadArgumentError(
                field=f"--due {value}",
                problem="is not a date and time (ISO 8601), for every lab or as LAB=WHEN",
                fix="pass e.g. --due 2026-03-10T23:59+01:00, or --due 05=2026-03-10T23:59+01:00",
            )
        for one in [lab.strip().zfill(2)] if lab else labs:
            found[one] = moment
    return found
