"""What the checker says: the names of the promises a run can break, one `Anomaly` with
its evidence, and the `CheckResult` verdict on a whole log."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from shopops_lab.errors import BadArgumentError
from shopops_lab.events import Event

__all__ = ["Anomaly", "AnomalyName", "CheckResult"]

_SHOWN_EVIDENCE = 12  # evidence lines printed per anomaly (all are kept)


class AnomalyName(StrEnum):
    """Everything the checker can find. Each one is a promise the run broke."""

    APPROVAL_STARVED = "approval_starved"  # an approval waited past its budget while bulk work went ahead
    DOUBLE_CONTACT = "double_contact"  # a customer heard the same thing twice
    LOST_ITEM = "lost_item"  # a finished run left an item neither done nor dead-lettered
    POISON_RETRY_STORM = "poison_retry_storm"  # an item was delivered past max_attempts instead of dead-lettered
    STALE_WRITE_ACCEPTED = "stale_write_accepted"  # a store took a write under a token that was no longer current
    TWO_LIVE_LEASES = "two_live_leases"  # two leases on one case were live at the same moment


@dataclass(frozen=True, kw_only=True, slots=True)
class Anomaly:
    """One broken promise: what went wrong in words, who and what was involved, and the
    events that prove it (in log order)."""

    name: AnomalyName
    message: str
    case_id: str | None = None
    item_id: str | None = None
    workers: tuple[str, ...] = ()
    tokens: tuple[int, ...] = ()
    times: tuple[float, ...] = ()
    evidence: tuple[Event, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict (evidence as event dicts)."""
        return {
            "name": self.name.value,
            "message": self.message,
            "case_id": self.case_id,
            "item_id": self.item_id,
            "workers": list(self.workers),
            "tokens": list(self.tokens),
            "times": list(self.times),
            "evidence": [e.as_dict() for e in self.evidence],
        }

    def __str__(self) -> str:
        lines = [f"{self.name.value}: {self.message}"]
        shown = self.evidence[:_SHOWN_EVIDENCE]
        lines.extend(f"  {event}" for event in shown)
        if len(self.evidence) > len(shown):
            lines.append(f"  ... and {len(self.evidence) - len(shown)} more events (see .evidence)")
        return "\n".join(lines)


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckResult:
    """The verdict on one log. `valid` is True, False, or None for "cannot tell yet";
    `summary` says in one line what was checked or why the answer is unknown."""

    valid: bool | None
    anomalies: tuple[Anomaly, ...] = ()
    summary: str = ""
    event_count: int = 0

    def names(self) -> list[AnomalyName]:
        """The distinct anomaly names found, sorted."""
        return sorted({anomaly.name for anomaly in self.anomalies})

    def of(self, name: AnomalyName | str) -> tuple[Anomaly, ...]:
        """The anomalies called `name`, in report order."""
        try:
            wanted = AnomalyName(name)
        except ValueError:
            known = ", ".join(n.value for n in AnomalyName)
            raise BadArgumentError(
                field="name", problem=f"is {name!r}, not an anomaly the checker knows", fix=f"use one of: {known}"
            ) from None
        return tuple(a for a in self.anomalies if a.name is wanted)

    def as_dict(self) -> dict[str, Any]:
        """A plain, JSON-ready dict."""
        return {
            "valid": self.valid,
            "summary": self.summary,
            "event_count": self.event_count,
            "anomalies": [a.as_dict() for a in self.anomalies],
        }

    def __str__(self) -> str:
        if self.valid is None:
            return f"unknown: {self.summary}"
        if self.valid:
            return f"valid: {self.summary}"
        blocks = [f"invalid: {self.summary}"]
        blocks.extend(str(anomaly) for anomaly in self.anomalies)
        return "\n\n".join(blocks)
