"""The lease state machine, kept as data: the queue enforces it and the diagrams draw it."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from shopops_lab.errors import TransitionError


class ItemState(StrEnum):
    READY = "ready"
    LEASED = "leased"
    DONE = "done"
    DEAD = "dead"


# (from, to) -> the label the diagram puts on that edge.
TRANSITIONS = MappingProxyType(
    {
        (ItemState.READY, ItemState.LEASED): "acquire",
        (ItemState.LEASED, ItemState.DONE): "ack",
        (ItemState.LEASED, ItemState.READY): "expiry / nack",
        (ItemState.LEASED, ItemState.DEAD): "max attempts",
        (ItemState.DEAD, ItemState.READY): "replay",
    }
)


def check_transition(what: str, source: StrEnum, target: StrEnum, table: Mapping[tuple, str] = TRANSITIONS) -> None:
    """Raise `TransitionError` unless (source, target) is an edge of `table` (default: the
    lease table; the job store passes its own)."""
    if (source, target) not in table:
        raise TransitionError(what=what, source=source.value, target=target.value)
