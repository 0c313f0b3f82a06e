"""The learner's whole worker (lab 09), driven one kit call at a time wherever its code runs.

`Delivery(copy, lease)` starts `copy(lease, Kit())` (a worker process's copy of the learner's
`async def work`) and `step(reply)` runs it on to its next kit call. In the notebook the
coroutine lives here; in the grader it lives in the learner's process, and each step is one
message there (`in_turn` with the kit's own `step`): the judge sends the answer to the last
call and gets the next call back, as data. Every judge of lab 09 drives a delivery this way.
"""

from __future__ import annotations

import contextlib
from typing import Any

from shopops_lab.checks.base import ForeignAnswer, call_answer, in_turn
from shopops_lab.errors import KitMisuseError
from shopops_lab.worker import kit
from shopops_lab.worker.kit import Finished, Kit, KitCall, Raised, Reply
from shopops_lab.worker.queue import Lease

__all__ = ["Delivery"]

_PLAIN = (type(None), bool, int, float, str, bytes, tuple, list, dict, set, frozenset)


class Delivery:
    """One delivery of `lease` to `copy` (a worker process's copy of the answer): the
    coroutine its call made, stepped where it lives. The stub's own NotImplementedError comes
    out of the first `step`, like any error the worker raises."""

    __slots__ = ("_copy", "_coroutine")

    def __init__(self, copy: Any, lease: Lease) -> None:
        self._copy = copy
        self._coroutine = call_answer(copy, lease, Kit())
        if isinstance(copy, ForeignAnswer) and isinstance(self._coroutine, _PLAIN):
            raise kit.not_a_coroutine(self._coroutine)  # no object of the learner's process: nothing to step

    def step(self, reply: Reply) -> KitCall | Finished:
        """The worker run on with `reply` to its next kit call (or to its end)."""
        if isinstance(self._copy, ForeignAnswer):
            (found,) = in_turn(self._copy, self._coroutine, (kit.step, (reply,)))
            if not isinstance(found, (KitCall, Finished)):
                raise KitMisuseError(problem="the worker's step came back as no kit call", fix="await only kit calls")
            return found
        return kit.step(self._coroutine, reply)

    def steps(self, replies: list[Reply]) -> list[KitCall | Finished | Raised]:
        """`step` with each of `replies` in turn (what this delivery was told before): what each
        gave back, a raise ending the list as a `Raised`. One message in all, where the code
        runs elsewhere."""
        if not isinstance(self._copy, ForeignAnswer):
            return kit.steps(self._coroutine, replies)
        (found,) = in_turn(self._copy, self._coroutine, (kit.steps, (replies,)))
        if not (isinstance(found, list) and all(isinstance(one, (KitCall, Finished, Raised)) for one in found)):
            raise KitMisuseError(problem="the worker's steps came back as no kit calls", fix="await only kit calls")
        return found

    def close(self) -> None:
        """The process died: nothing more of this delivery runs (a `finally` of the worker's may,
        as Python closes the coroutine, but no kit call of it reaches anything)."""
        coroutine, self._coroutine = self._coroutine, None
        if coroutine is not None and not isinstance(self._copy, ForeignAnswer):
            with contextlib.suppress(BaseException):
                coroutine.close()
