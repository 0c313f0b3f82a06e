"""Planned interleavings of two real worker processes on one item, and all of them in a bound.

A `Schedule` says what happens to the first worker (W1) that takes an item: it runs whole;
it is killed (SIGKILL) right after one of its points; or it freezes there, its lease runs
out (the supervisor moves the clock), W2 takes the item over, and W1 wakes up stale, either
once W2 is done or while W2 waits at one of its own points. Whatever is left of the item is
then delivered to fresh workers until it is done or dead. `Player.play` makes one schedule
happen exactly (`Stepper` moves one worker at a time), and `explore` yields every schedule
of the bound, planned from the paths the handler itself took: each kill point of W1, each
freeze point outside a transaction while the item is still W1's, and for each freeze each
point of W2 outside a transaction. A planned stop that does not happen raises `StepsError`
(the run is void), never a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from enum import StrEnum

from shopops_lab.chaos.steps import IDLE, Reached, Stepper, StepsError
from shopops_lab.errors import BadArgumentError
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import Queue

__all__ = ["How", "Played", "Player", "Schedule", "Step", "explore"]

LIMIT = 12  # the points of one worker the exploration stops at (a handler with more is explored up to here)


class How(StrEnum):
    RUN = "run"  # W1 runs the delivery whole
    KILL = "kill"  # W1 is SIGKILLed right after its point `first`
    FREEZE = "freeze"  # W1 freezes there; W2 takes the item over; W1 wakes up stale


@dataclass(frozen=True, slots=True)
class Schedule:
    """One planned interleaving. `first`: W1's stop, a point number (0: right after it
    acquired) or the name of a point (its first one of that name). `second` (a freeze only):
    the point number where W2 waits while W1 finishes; None: W2 runs whole first."""

    how: How
    first: int | str = 0
    second: int | None = None

    @property
    def id(self) -> str:
        """How a learner names it again: `run`, `kill@3`, `freeze@1`, `freeze@1/2`."""
        if self.how is How.RUN:
            return "run"
        return f"{self.how.value}@{self.first}" + ("" if self.second is None else f"/{self.second}")

    @classmethod
    def parse(cls, text: object) -> Schedule:
        found = (
            re.fullmatch(r"(run)|(kill)@(\d+)|(freeze)@(\d+)(?:/(\d+))?", text.strip())
            if isinstance(text, str)
            else None
        )
        if found is None:
            raise BadArgumentError(
                field="schedule",
                problem=f"is {text!r}",
                fix="pass a schedule as the check names it, e.g. 'run', 'kill@2' or 'freeze@1/0'",
            )
        if found[1]:
            return cls(How.RUN)
        if found[2]:
            return cls(How.KILL, int(found[3]))
        return cls(How.FREEZE, int(found[5]), None if found[6] is None else int(found[6]))


@dataclass(frozen=True, slots=True)
class Step:
    """A point one worker reached: its name, inside a transaction or not, and whether the
    item was still leased to that worker there (a takeover can happen only then)."""

    point: str
    in_transaction: bool
    held: bool


@dataclass(frozen=True, slots=True)
class Played:
    """What one schedule did: W1's and W2's points as far as each got, whether the planned
    stop happened, and the story, line by line."""

    schedule: Schedule
    item_id: str
    stopped: int | None  # the number of W1's point where its planned stop happened (None: it did not)
    first: tuple[Step, ...]
    second: tuple[Step, ...]
    story: tuple[str, ...]

    @property
    def stop(self) -> Step | None:
        """W1's planned stop, where it happened."""
        return None if self.stopped is None else self.first[self.stopped]


class Player:
    """Plays schedules on one database through `steps`; `queue` is the supervisor's own view."""

    def __init__(self, steps: Stepper, queue: Queue) -> None:
        self.steps, self.queue = steps, queue
        self.lease = queue.lease_seconds
        self.now = 0.0

    def play(self, schedule: Schedule, item_id: str) -> Played:
        """Make `schedule` happen on the ready item `item_id`, then deliver what is left of it."""
        self._start, self._item = self.now, item_id
        self._story: list[str] = []
        self._paths: dict[str, list[Step]] = {}  # each worker's points, W1 first
        stopped = len(self._paths["W1"]) - 1 if self._plan(schedule) else None
        if stopped is not None and schedule.how is How.FREEZE:
            self._freeze(schedule)
        if "W1" in self.steps.procs:  # not killed, not finished: it runs on to its end
            self._finish("W1")
        self._settle()
        return Played(
            schedule=schedule,
            item_id=item_id,
            stopped=stopped,
            first=tuple(self._paths["W1"]),
            second=tuple(self._paths.get("W2", ())),
            story=tuple(self._story),
        )

    def _plan(self, schedule: Schedule) -> bool:
        """Play `schedule` up to W1's planned stop: True if it happened there (a kill ends W1
        there; a freeze and a run go on in `_freeze` and `_finish`)."""
        if not self._take("W1"):
            raise StepsError(
                reason=f"W1 found no delivery of {self._item} to acquire",
                fix="run the check again; if it repeats, report it",
            )
        if schedule.how is How.RUN:
            return False
        if not self._to("W1", schedule.first):
            self._finish("W1")
            return False
        if schedule.how is How.KILL:
            self.steps.kill("W1")
            self._tell("W1 is killed here (SIGKILL): it runs nothing more")
            return True
        here = self._paths["W1"][-1]
        if here.in_transaction or not here.held:  # inside a transaction no one can take the item over
            return False
        return True

    def _freeze(self, schedule: Schedule) -> None:
        """W1 stands at its planned stop: freeze it, let W2 take over, then wake W1 up."""
        self._tell("W1 freezes here")
        self.now += self.lease + 1
        self._tell(f"W1's lease ({self.lease:g} s) has run out")
        if not self._take("W2"):
            raise StepsError(
                reason="W2 could not take the item over after W1's lease ran out",
                fix="run the check again; if it repeats, report it",
            )
        if schedule.second is not None:
            if not self._to("W2", schedule.second) or self._paths["W2"][-1].in_transaction:
                raise StepsError(
                    reason=f"W2 did not reach its point {schedule.second} outside a transaction, "
                    "as it did when it first ran this schedule",
                    fix="make the handler do the same on every delivery (no randomness, no clock)",
                )
            self._tell("W2 waits here")
        else:
            self._finish("W2")
        self._tell("W1 wakes up, with its stale lease, and goes on")
        self._finish("W1")
        if schedule.second is not None:
            self._tell("W2 goes on")
            self._finish("W2")

    def _take(self, name: str) -> bool:
        """Start `name` and let it acquire: True if it got the item (it stops right after)."""
        self._paths[name] = []
        self.steps.start(name)
        reached = self.steps.acquire(name, self.now)
        if reached.point not in IDLE:
            self._note(reached)
            return True
        self.steps.stop(name)
        return False

    def _to(self, name: str, stop: int | str) -> bool:
        """Move `name` on until its point `stop` (a number or a name): True if it got there."""
        path = self._paths[name]
        while not (len(path) - 1 == stop if isinstance(stop, int) else path[-1].point == stop):
            if path[-1].point in IDLE:
                return False
            self._note(self.steps.go(name, self.now))
        return True

    def _finish(self, name: str) -> None:
        """Let `name` run its delivery to the end, then end it."""
        self._to(name, "after_handler")
        self.steps.stop(name)

    def _settle(self) -> None:
        """Deliver the item to fresh workers until it is done or dead (a bounded number of times)."""
        for _ in range(self.queue.max_attempts + 1):
            item = self.queue.item(self._item)
            if item.state in (ItemState.DONE, ItemState.DEAD):
                return
            if item.state is ItemState.LEASED:
                self.now += self.lease + 1
                self._tell(f"{item.worker_id}'s lease has run out")
            name = f"W{len(self._paths) + 1}"
            if self._take(name):
                self._finish(name)
        raise StepsError(
            reason=f"item {self._item} was neither done nor dead after {self.queue.max_attempts} more deliveries",
            fix="run it again; if it repeats, report it",
        )

    def _note(self, reached: Reached) -> None:
        for words in reached.did:
            self._tell(f"{reached.worker} {words}")
        held = False
        if not reached.in_transaction and reached.point not in IDLE:
            item = self.queue.item(self._item)
            held = item.state is ItemState.LEASED and item.worker_id == reached.worker
        self._paths[reached.worker].append(Step(reached.point, reached.in_transaction, held))

    def _tell(self, line: str) -> None:
        self._story.append(f"t={self.now - self._start:<3g} {line}")


def explore(player: Player, new_item: Callable[[], str], limit: int = LIMIT) -> Iterator[Played]:
    """Every schedule of the bound, shortest first: the delivery whole, a kill after each of
    W1's points, then each freeze (W2 whole, then W2 waiting at each of its points). Each
    replay must pass the points its plan was made from, or the run is void (`StepsError`)."""
    base = player.play(Schedule(How.RUN), new_item())
    yield base
    path = base.first
    for n in range(min(len(path), limit)):
        yield _same(player.play(Schedule(How.KILL, n), new_item()), path, n)
    for n, step in enumerate(path[:limit]):
        if step.in_transaction or not step.held or step.point in IDLE:
            continue
        whole = _same(player.play(Schedule(How.FREEZE, n), new_item()), path, n)
        yield whole
        for m, other in enumerate(whole.second[:limit]):
            if not other.in_transaction and other.point not in IDLE:
                yield _same(player.play(Schedule(How.FREEZE, n, m), new_item()), path, n)


def _same(played: Played, path: tuple[Step, ...], n: int) -> Played:
    """`played`, once its W1 is known to have stopped where the plan was made from (its point `n`)."""
    stop = played.stop
    if stop is None or (stop.point, stop.in_transaction) != (path[n].point, path[n].in_transaction):
        raise StepsError(
            reason=f"W1 did not stop at its point {n} ({path[n].point}) as planned from its first run",
            fix="make the handler do the same on every first delivery (no randomness, no clock), "
            "then run the check again",
        )
    return played
