"""What each of the kit's calls does, on the shop's systems: the one implementation behind
every judge of the whole worker (lab 09).

A worker's `await kit.send(key, body)` reaches `KitBackend.perform`, which acts on a queue
(heartbeat, ack), a store (the case's checkpoint, fenced by the lease's token), a channel
adapter (send, lookup) and a drafting model (`Drafts`). The explorer's world, the simulator
and a real worker process each build one over their own queue, store and adapter, and wrap
it with what only they do (a crash between two calls, the model's time, a SIGKILL); what a
call means is written here once. Its answer is a `Reply`: the value, or the kit's refusal,
which the worker's `await` raises.
"""

from __future__ import annotations

from typing import Any

from shopops_lab import arguments
from shopops_lab.clock import resolve
from shopops_lab.effects import ChannelAdapter, SendResult
from shopops_lab.errors import BadArgumentError, DraftError
from shopops_lab.events import EventKind
from shopops_lab.fencing import TokenFence
from shopops_lab.payloads import json_copy, state_copy
from shopops_lab.store import Store, bind_transactions, transaction
from shopops_lab.worker.kit import REFUSABLE, KitCall, Refusal, Reply
from shopops_lab.worker.queue import Lease, Queue

__all__ = ["CHECKPOINTS", "Drafts", "KitBackend", "is_poison"]

CHECKPOINTS = "case checkpoint"  # the store's records: case id -> the dict its last save stored
_DRAFTINGS = "drafting"  # the store's records: case id -> its draftings so far, so a second one reads differently
# Each call: the method that does it, and how many arguments it takes (least, most). Looked up
# by name when called, so a method `bind_transactions` wrapped runs as its transaction.
_CALLS = {
    "load": ("_load", 0, 0),
    "next_chunk": ("_next_chunk", 0, 0),
    "heartbeat": ("_heartbeat", 0, 0),
    "save": ("_save", 1, 1),
    "send": ("_send", 1, 2),
    "lookup": ("_lookup", 1, 1),
    "ack": ("_ack", 0, 0),
}
TEXT = ("Dear customer, ", "we are sorry your order {case} is late; ", "your refund is on its way.")


def is_poison(payload: Any) -> bool:
    """A payload no worker can ever handle: the bad schema of the chapter's poison message."""
    return payload.get("schema", 1) != 1 or not payload.get("idem_key")


class Drafts:
    """The drafting model. Each delivery that asks drafts the case anew, in `chunks` pieces (a
    judge may `plan` another count for one delivery: a long model call streams more), and a
    case drafted again reads differently (a model rarely writes the same text twice: draft 2
    says so); a poison case cannot be drafted at all. What a delivery was given so far lives
    here; the count of draftings lives in the store, so every worker process sees the same."""

    __deepcopy__ = state_copy

    def __init__(self, chunks: int = 2) -> None:
        self.chunks = arguments.whole("chunks", chunks, 1, "pass how many pieces a draft streams, e.g. 2")
        self._given: dict[tuple[str, int, str], tuple[int, int, int]] = {}  # delivery -> (drafting, given, of)

    def plan(self, lease: Lease, chunks: int) -> None:
        """The delivery of `lease` has its draft streamed in `chunks` pieces (before its first)."""
        self._given[_delivery(lease)] = (0, 0, chunks)

    def next_chunk(self, lease: Lease, store: Store) -> str | None:
        if is_poison(lease.payload):
            raise DraftError(case_id=lease.case_id, reason="its payload has a bad schema (no idempotency key)")
        delivery = _delivery(lease)
        drafting, given, of = self._given.get(delivery, (0, 0, self.chunks))
        if given >= of:
            return None
        if not given:
            with store.atomic:  # one read and one write: two processes drafting at once get two numbers
                drafting = self.draftings(store, lease.case_id) + 1
                store.put(_DRAFTINGS, lease.case_id, drafting)
        self._given[delivery] = (drafting, given + 1, of)
        text = _piece(given, of).format(case=lease.case_id)
        return f"[draft {drafting}] {text}" if drafting > 1 and not given else text

    @staticmethod
    def draftings(store: Store, case_id: str) -> int:
        """How many times case `case_id` was drafted so far (by any worker process)."""
        found = store.get(_DRAFTINGS, case_id)
        return found if isinstance(found, int) else 0


def _delivery(lease: Lease) -> tuple[str, int, str]:
    return lease.item_id, lease.token, lease.worker_id


def _piece(n: int, of: int) -> str:
    """Piece `n` (from 0) of a draft in `of` pieces: the greeting first, the promise last."""
    if n == 0:
        return TEXT[0]
    if n == of - 1:
        return TEXT[2]
    return TEXT[1] if n == 1 else "and more; "


class KitBackend:
    """The kit's calls on `queue` (heartbeat, ack), `store` (checkpoints; the queue's own by
    default), `adapter` (send, lookup) and `model`. `perform(call, lease)` answers one call of
    the worker holding `lease`."""

    __deepcopy__ = state_copy

    def __init__(
        self, *, queue: Queue, adapter: ChannelAdapter, model: Drafts | None = None, store: Store | None = None
    ) -> None:
        self.queue, self.adapter = queue, adapter
        self.model = Drafts() if model is None else model
        self.store: Store = queue.store if store is None else store
        self.fence = TokenFence("checkpoint", what="the checkpoint of {key}", store=self.store)
        bind_transactions(self, self.store)

    def perform(self, call: KitCall, lease: Lease) -> Reply:
        """Do `call` for the worker holding `lease`: its value, or the kit's refusal of it."""
        name, args = call.name, call.args
        known = _CALLS.get(name) if type(name) is str else None
        try:
            if known is None or type(args) is not tuple or not known[1] <= len(args) <= known[2]:
                raise BadArgumentError(
                    field="kit call",
                    problem=f"is {call.words if known is None else name + ' with ' + str(len(args)) + ' arguments'}",
                    fix="call the kit as its docstring says: load, next_chunk, heartbeat, save, send, lookup, ack",
                )
            return Reply(getattr(self, known[0])(lease, *args))
        except REFUSABLE as refused:
            return Reply(refused=Refusal.of(refused))

    def checkpoint(self, case_id: str) -> Any:
        """The case's checkpoint as stored (for a judge: never handed to a worker as is)."""
        return self.store.get(CHECKPOINTS, case_id)

    # ------------------------------------------------------------------ the calls
    def _load(self, lease: Lease) -> Any:
        found = self.store.get(CHECKPOINTS, lease.case_id)
        return None if found is None else json_copy(found, "checkpoint")

    def _next_chunk(self, lease: Lease) -> str | None:
        return self.model.next_chunk(lease, self.store)

    def _heartbeat(self, lease: Lease) -> bool:
        return self.queue.heartbeat(lease)

    def _ack(self, lease: Lease) -> None:
        self.queue.ack(lease)

    @transaction
    def _save(self, lease: Lease, checkpoint: Any) -> None:
        if type(checkpoint) is not dict:
            raise BadArgumentError(
                field="checkpoint",
                problem=f"is {arguments.a(type(checkpoint).__name__)}, not a dict",
                fix="save a dict of plain values, e.g. {'intent': key}",
            )
        record = json_copy(checkpoint, "checkpoint")
        row = self.store.get_item(lease.item_id)
        current = None if row is None else row.token
        t = resolve(self.queue.clock, None)
        self.fence.check(
            lease.item_id,
            lease.token,
            t=t,
            op="checkpoint",
            current=current,
            case_id=lease.case_id,
            worker_id=lease.worker_id,
        )
        self.store.put(CHECKPOINTS, lease.case_id, record)
        self.store.log.append(
            EventKind.CHECKPOINT_WRITTEN,
            t,
            item_id=lease.item_id,
            case_id=lease.case_id,
            worker_id=lease.worker_id,
            token=lease.token,
            attempt=lease.attempt,
        )

    def _send(self, lease: Lease, key: Any, body: Any = "") -> SendResult:
        to = lease.payload.get("to") or "customer"
        return self.adapter.send(key, case_id=lease.case_id, to=to, body=body, worker_id=lease.worker_id)

    def _lookup(self, lease: Lease, key: Any) -> SendResult:
        return self.adapter.lookup(key)
