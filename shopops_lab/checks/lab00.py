"""Lab 00 warm-up: put the first case on the queue."""

from __future__ import annotations

from shopops_lab.checks import answers
from shopops_lab.checks.base import Exercise, Wrong, call_answer, describe
from shopops_lab.clock import FakeClock
from shopops_lab.states import ItemState
from shopops_lab.worker.queue import InMemoryQueue


def _run(enqueue_first_case) -> str:
    queue = InMemoryQueue(lease_seconds=30, max_attempts=5, clock=FakeClock())
    item_id = call_answer(enqueue_first_case, queue)
    if type(item_id) is not str:  # a str, not a look-alike whose == says yes to anything
        raise Wrong(
            f"the function returned {describe(item_id)}; return what queue.enqueue(...) gives back (the item id)."
        )
    items = queue.items()
    if len(items) != 1:
        raise Wrong(f"the queue holds {len(items)} items after your function ran; put exactly one on it.")
    item = items[0]
    if item.id != item_id:
        what = "the case id" if item_id == item.case_id else "not the id of the item on the queue"
        raise Wrong(f"you returned {item_id!r}, {what}; return the item id that queue.enqueue(...) gives back.")
    wanted = {"case_id": "O-1001", "tenant_id": "store_northline", "kind": "contact_send"}
    for field, value in wanted.items():
        if getattr(item, field) != value:
            raise Wrong(f"the item's {field} is {getattr(item, field)!r}; the story's case needs something else there.")
    if item.state is not ItemState.READY:
        raise Wrong(f"the item is {item.state.value}, not ready: only enqueue it, leave acquiring to the workers.")
    return "case O-1001 is waiting on the queue for a worker."


warmup = Exercise(
    id="00.1",
    title="enqueue the first case",
    answer="enqueue_first_case",
    run=_run,
    hints=(
        "The queue object has a method that adds work; it takes keyword arguments only.",
        "Look at `help(queue.enqueue)`: it needs case_id, tenant_id and kind.",
        "The queue gives every item it accepts an id, and that id is the whole answer: hand it the story's case, "
        "store and kind the way its method asks for them (by name), and give back exactly what it gave you.",
    ),
)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab00", ("LEASE_RUNS_OUT_QUIZ",))
