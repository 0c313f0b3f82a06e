"""A queue you can poke: enqueue cases, let workers W1-W3 acquire, heartbeat, ack, nack
or crash, move the clock, and step back and forth through what you did.

`PlaygroundModel` is the whole logic and needs no browser: every action returns a
sentence saying what happened and why ("W2 got nothing: case O-1001 is leased by W1
until t=30"). History is a list of actions; stepping back or forward replays them from
scratch on a fresh `FakeClock` and queue, which is deterministic and cannot drift.
`QueuePlayground` puts buttons on top of it.

Each worker remembers the one lease it is working on, as a real worker would. A crash
makes it forget; a worker that is merely slow keeps its (possibly stale) lease, so you
can watch the queue refuse its late ack.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any, cast

from shopops_lab import arguments, live
from shopops_lab.clock import FakeClock
from shopops_lab.errors import (
    BadArgumentError,
    LeaseExpiredError,
    LeaseSettledError,
    ShopOpsError,
    StaleTokenError,
)
from shopops_lab.events import EventKind
from shopops_lab.states import ItemState
from shopops_lab.viz.dot import Diagram
from shopops_lab.viz.state_machine import state_machine
from shopops_lab.widgets import _ui
from shopops_lab.worker.queue import InMemoryQueue, Lease

__all__ = ["CASES", "WORKERS", "PlaygroundModel", "PlaygroundState", "QueuePlayground", "Action"]

WORKERS = ("W1", "W2", "W3")
CASES = ("O-1001", "A-1002", "O-1003")
_START = "An empty queue at t=0. Enqueue a case, then let a worker acquire it."


@dataclass(frozen=True, kw_only=True, slots=True)
class Action:
    """One recorded action: what was done, to whom."""

    action: str
    arg: str | float | None = None

    def __str__(self) -> str:
        if self.action == "advance":
            return f"advance {self.arg:g} s"
        return self.action if self.arg is None else f"{self.action} {self.arg}"


Step = Action  # its old name


@dataclass(frozen=True, kw_only=True, slots=True)
class PlaygroundState:
    """Everything the playground shows: the clock, the item table, what each worker
    believes it holds, the last message, and the state-machine diagram."""

    time: float
    step: int
    steps: int
    rows: tuple[dict[str, Any], ...]
    holding: dict[str, str]
    message: str
    diagram: Diagram = field(repr=False)

    def table_html(self) -> str:
        """The item table as HTML (an empty queue says so)."""
        if not self.rows:
            return "<p><em>No items yet.</em></p>"
        head = "".join(f"<th>{html.escape(k)}</th>" for k in self.rows[0])
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in row.values()) + "</tr>" for row in self.rows
        )
        return f'<table class="shopops-items"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'

    def workers_html(self) -> str:
        cells = "".join(f"<li><b>{html.escape(w)}</b>: {html.escape(what)}</li>" for w, what in self.holding.items())
        return f"<ul>{cells}</ul>"

    def _repr_html_(self) -> str:
        return (
            f"<p><b>t={self.time:g}</b> (step {self.step} of {self.steps}): {html.escape(self.message)}</p>"
            f"{self.diagram.svg or ''}{self.table_html()}{self.workers_html()}"
        )


class PlaygroundModel:
    """The playground's logic. Actions return a message and are recorded for back/forward."""

    def __init__(self, *, lease_seconds: float = 30, max_attempts: int = 3, workers: tuple[str, ...] = WORKERS) -> None:
        if not workers or not all(isinstance(w, str) and w for w in workers) or len(set(workers)) != len(workers):
            raise BadArgumentError(
                field="workers", problem=f"is {workers!r}", fix="pass distinct worker names, e.g. ('W1', 'W2', 'W3')"
            )
        self.lease_seconds = lease_seconds
        self.max_attempts = max_attempts
        self.workers = tuple(workers)
        self._steps: list[Action] = []
        self._cursor = 0
        self.message = _START
        self._reset()  # the queue validates lease_seconds and max_attempts

    # ---------------------------------------------------------------- actions
    def enqueue(self, case_id: str = "O-1001") -> str:
        if not isinstance(case_id, str) or not case_id.strip():
            raise BadArgumentError(field="case_id", problem=f"is {case_id!r}", fix="pass a case id such as 'O-1001'")
        return self._record(Action(action="enqueue", arg=case_id))

    def acquire(self, worker: str) -> str:
        return self._record(Action(action="acquire", arg=self._worker(worker)))

    def heartbeat(self, worker: str) -> str:
        return self._record(Action(action="heartbeat", arg=self._worker(worker)))

    def ack(self, worker: str) -> str:
        return self._record(Action(action="ack", arg=self._worker(worker)))

    def nack(self, worker: str) -> str:
        return self._record(Action(action="nack", arg=self._worker(worker)))

    def crash(self, worker: str) -> str:
        """The worker dies and forgets its lease; the queue only learns at expiry."""
        return self._record(Action(action="crash", arg=self._worker(worker)))

    def advance(self, seconds: float) -> str:
        seconds = arguments.seconds("seconds", seconds, "pass a positive number of seconds, e.g. 10")
        return self._record(Action(action="advance", arg=seconds))

    def replay(self, item_id: str | None = None) -> str:
        """Send a dead item (the oldest, if none is named) back to ready."""
        if item_id is not None and (not isinstance(item_id, str) or not item_id):
            raise BadArgumentError(
                field="item_id",
                problem=f"is {item_id!r}",
                fix="pass an id from the DLQ, e.g. 'item-0001', or leave it out",
            )
        return self._record(Action(action="replay", arg=item_id))

    # ---------------------------------------------------------------- history
    @property
    def history(self) -> list[str]:
        """The actions applied so far (not the ones undone by back())."""
        return [str(s) for s in self._steps[: self._cursor]]

    def back(self) -> str:
        """Undo the last action (replaying the ones before it from scratch)."""
        if self._cursor == 0:
            self.message = "Already at the start: nothing to undo."
            return self.message
        undone = self._steps[self._cursor - 1]
        self._cursor -= 1
        self._replay()
        self.message = f"Back to step {self._cursor} of {len(self._steps)} (undid: {undone})."
        return self.message

    def forward(self) -> str:
        """Redo the next undone action."""
        if self._cursor == len(self._steps):
            self.message = "Nothing to redo: this is the latest step."
            return self.message
        self._cursor += 1
        last = self._replay()
        self.message = f"Step {self._cursor} of {len(self._steps)}: {last}"
        return self.message

    def state(self) -> PlaygroundState:
        now = self.clock.now()
        rows = tuple(
            {
                "item": i.id,
                "case": i.case_id,
                "state": i.state.value,
                "attempts": i.attempts,
                "token": i.token,
                "worker": i.worker_id or "",
                "lease until": "" if i.lease_expires_at is None else f"t={i.lease_expires_at:g}",
            }
            for i in self.queue.items()
        )
        return PlaygroundState(
            time=now,
            step=self._cursor,
            steps=len(self._steps),
            rows=rows,
            holding={w: self._holding(w) for w in self.workers},
            message=self.message,
            diagram=state_machine(self.queue),
        )

    # ---------------------------------------------------------------- internals
    def _reset(self) -> None:
        self.clock = FakeClock()
        self.queue = InMemoryQueue(lease_seconds=self.lease_seconds, max_attempts=self.max_attempts, clock=self.clock)
        self._held: dict[str, Lease | None] = {w: None for w in self.workers}

    def _worker(self, worker: str) -> str:
        if worker not in self.workers:
            raise BadArgumentError(
                field="worker", problem=f"is {worker!r}", fix=f"pass one of {', '.join(map(repr, self.workers))}"
            )
        return worker

    def _record(self, step: Action) -> str:
        del self._steps[self._cursor :]  # a new action after back() drops the undone ones
        self._steps.append(step)
        self._cursor += 1
        self.message = self._apply(step)
        return self.message

    def _replay(self) -> str:
        self._reset()
        message = _START
        for step in self._steps[: self._cursor]:
            message = self._apply(step)
        return message

    def _apply(self, step: Action) -> str:
        if step.action == "advance":
            self.clock.advance(cast(float, step.arg))  # an advance always records its seconds
            notes = self._expire()
            return " ".join([f"The clock moves to t={self.clock.now():g}.", *notes])
        notes = self._expire()
        return " ".join([*notes, getattr(self, f"_do_{step.action}")(step.arg)])

    def _expire(self) -> list[str]:
        """Let the queue notice leases whose deadline passed, and say so."""
        mark = len(self.queue.log)
        self.queue.expire_leases()
        notes = []
        for e in self.queue.log.events[mark:]:
            if e.kind is EventKind.EXPIRED:
                notes.append(
                    f"The lease on {e.item_id} ({e.worker_id}, token {e.token}) ran out at "
                    f"t={e.info['expires_at']:g}: case {e.case_id} is ready again."
                )
            elif e.kind is EventKind.DEAD_LETTERED and notes:
                notes[-1] = (
                    f"The lease on {e.item_id} ({e.worker_id}, token {e.token}) ran out on its "
                    f"last attempt ({e.attempt} of {self.max_attempts}): it moves to the dead-letter queue."
                )
        return notes

    def _do_enqueue(self, case_id: str) -> str:
        item_id = self.queue.enqueue(case_id=case_id)
        held = [i for i in self.queue.leases() if i.case_id == case_id]
        if held:
            return (
                f"Enqueued {item_id} for case {case_id}. It waits: {held[0].id} of the same case is "
                f"leased by {held[0].worker_id}, and a case has one live lease at a time."
            )
        return f"Enqueued {item_id} for case {case_id}; it is ready."

    def _do_acquire(self, worker: str) -> str:
        lease = self._held[worker]
        if lease is not None:
            return f"{worker} is still working on {lease.item_id} (token {lease.token}); ack, nack or crash it first."
        lease = self.queue.acquire(worker)
        if lease is None:
            return self._why_nothing(worker)
        self._held[worker] = lease
        message = (
            f"{worker} leased {lease.item_id} (case {lease.case_id}): token {lease.token}, "
            f"attempt {lease.attempt}, until t={lease.expires_at:g}."
        )
        if lease.attempt > 1:
            message += " This is a redelivery: the handler runs again, so it must be safe to repeat."
        return message

    def _why_nothing(self, worker: str) -> str:
        if not len(self.queue):
            return f"{worker} got nothing: the queue is empty. Enqueue a case first."
        leased = self.queue.leases()
        if leased:
            held = "; ".join(
                f"case {i.case_id} is leased by {i.worker_id} until t={i.lease_expires_at:g}" for i in leased
            )
            waiting = " Its next item waits: one live lease per case." if self.queue.depth else ""
            return f"{worker} got nothing: {held}.{waiting}"
        return f"{worker} got nothing: every item is done or dead."

    def _do_heartbeat(self, worker: str) -> str:
        lease = self._held[worker]
        if lease is None:
            return f"{worker} holds no lease, so there is nothing to heartbeat."
        if self.queue.heartbeat(lease):
            until = self.queue.item(lease.item_id).lease_expires_at
            return f"{worker} heartbeat: {lease.item_id} is now leased until t={until:g}."
        self._held[worker] = None
        return f"{worker}'s heartbeat was refused: {self._lost(lease)} {worker} stops and drops the work."

    def _do_ack(self, worker: str) -> str:
        lease = self._held[worker]
        if lease is None:
            return f"{worker} holds no lease, so there is nothing to ack."
        self._held[worker] = None
        try:
            self.queue.ack(lease)
        except (StaleTokenError, LeaseExpiredError, LeaseSettledError):
            return f"{worker}'s ack was refused: {self._lost(lease)} Its result is dropped."
        return f"{worker} acked {lease.item_id} (case {lease.case_id}): done."

    def _do_nack(self, worker: str) -> str:
        lease = self._held[worker]
        if lease is None:
            return f"{worker} holds no lease, so there is nothing to nack."
        self._held[worker] = None
        try:
            state = self.queue.nack(lease, "failed in the playground")
        except (StaleTokenError, LeaseExpiredError, LeaseSettledError):
            return f"{worker}'s nack was refused: {self._lost(lease)}"
        if state is ItemState.DEAD:
            return (
                f"{worker} nacked {lease.item_id} on its last attempt ({lease.attempt} of "
                f"{self.max_attempts}): it moves to the dead-letter queue."
            )
        return (
            f"{worker} nacked {lease.item_id} (attempt {lease.attempt} of {self.max_attempts}): "
            f"it is ready again for the next free worker."
        )

    def _do_crash(self, worker: str) -> str:
        lease = self._held[worker]
        self._held[worker] = None
        if lease is None:
            return f"{worker} crashed while idle and restarts; nothing to redeliver."
        until = self.queue.item(lease.item_id).lease_expires_at
        if until is None or self.queue.item(lease.item_id).token != lease.token:
            return f"{worker} crashed holding a lease it had already lost; nothing changes."
        return (
            f"{worker} crashed holding {lease.item_id} (case {lease.case_id}) and restarts with "
            f"nothing. The queue does not know yet: the lease runs out at t={until:g}, "
            f"then the item is redelivered."
        )

    def _do_replay(self, item_id: str | None) -> str:
        dead = self.queue.dlq_items()
        if not dead:
            return "Nothing to replay: the dead-letter queue is empty."
        target = item_id if item_id is not None else dead[0].id
        try:
            self.queue.replay_dlq(target)
        except ShopOpsError as exc:
            return str(exc)
        return f"Replayed {target}: it is ready again with its attempts reset."

    def _lost(self, lease: Lease) -> str:
        item = self.queue.item(lease.item_id)
        if item.token > lease.token:
            owner = f"now held by {item.worker_id}" if item.worker_id else f"now {item.state.value}"
            return f"{lease.item_id} was claimed again with token {item.token} ({owner}); token {lease.token} is stale."
        return (
            f"the lease on {lease.item_id} ran out (the item is {item.state.value} now); a redelivery will handle it."
        )

    def _holding(self, worker: str) -> str:
        lease = self._held[worker]
        if lease is None:
            return "idle"
        item = self.queue.item(lease.item_id)
        alive = item.state is ItemState.LEASED and item.token == lease.token
        return f"{lease.item_id} (token {lease.token})" + ("" if alive else ", lease lost: it does not know yet")

    def __repr__(self) -> str:
        return f"PlaygroundModel(t={self.clock.now():g}, step {self._cursor} of {len(self._steps)})"


class QueuePlayground(_ui.LiveWidget):
    """Buttons over a `PlaygroundModel`. The cell's last expression shows it."""

    def __init__(self, model: PlaygroundModel | None = None) -> None:
        self.model = model if model is not None else PlaygroundModel()

    def build(self, w: Any) -> Any:
        model = self.model
        message, picture = w.HTML(), w.HTML()
        case = w.Dropdown(options=CASES, value=CASES[0], description="case")
        worker = w.ToggleButtons(options=model.workers, value=model.workers[0], description="worker")
        seconds = w.BoundedIntText(value=10, min=1, max=3600, description="seconds")

        def refresh() -> None:
            state = model.state()
            message.value = live.region(
                f"<p><b>t={state.time:g}</b> · step {state.step} of {state.steps} · {html.escape(state.message)}</p>"
            )
            picture.value = (state.diagram.svg or "") + state.table_html() + state.workers_html()

        def button(label: str, action: Any) -> Any:
            b = w.Button(description=label)

            def clicked(_: Any) -> None:
                try:
                    action()
                except ShopOpsError as exc:
                    model.message = str(exc)
                refresh()

            b.on_click(clicked)
            return b

        def by_worker(action: str) -> Any:
            return lambda: getattr(model, action)(worker.value)

        rows = [
            w.HBox([case, button("enqueue", lambda: model.enqueue(case.value))]),
            worker,
            w.HBox([button(name, by_worker(name)) for name in ("acquire", "heartbeat", "ack", "nack", "crash")]),
            w.HBox(
                [
                    seconds,
                    button("advance clock", lambda: model.advance(seconds.value)),
                    button("replay DLQ", model.replay),
                ]
            ),
            w.HBox([button("◀ back", model.back), button("forward ▶", model.forward)]),
            message,
            picture,
        ]
        refresh()
        return w.VBox(rows)

    def static_html(self, note: str = _ui.NO_WIDGETS) -> str:
        return (
            f"<p><em>{html.escape(note)} By hand, for example: "
            f"<code>playground.model.acquire('W1')</code>.</em></p>{self.model.state()._repr_html_()}"
        )

    def label(self) -> str:
        return "QueuePlayground: the buttons drive a real InMemoryQueue"

    def __repr__(self) -> str:
        return f"QueuePlayground({self.model!r})"
