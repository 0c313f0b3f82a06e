"""What a judge tells the grader: one typed record per event, one JSON object per message.

A judge (`judge.child_main`, one process per submission) reports over a pipe and never
scores; the grader (`pool.Pool`) reads each message with `decode`, which refuses anything
off its shape (a judge runs no learner code, so a malformed message is the grader's own
bug, and the submission's run ends). The events, in the order a judge sends them:

    LearnerStarted(group)      a learner process started: the grader kills its group at the end
    CellStarted(index)         a cell of the plan begins: its deadline starts
    Verdict(...)               a test cell's check: its mark, message and evidence
    CellStopped(index, cause)  the cell ran past its limit, or the learner's process died in it
    Restarting()               a fresh learner process replays the cells that ran
    Note(text)                 something the instructor should read (a sys.exit in a cell)
    GraderFailed(cause)        the judge could not go on for a reason of its own: charges nothing
    Done()                     every cell of the plan was run

The other link, between a judge and its learner's process, is the wire (`wire.py`): frames of
JSON lists, `[kind, ...]`, kept positional because a check makes thousands of them (lab 07's
policy: 21,000 hand-overs) and each must cost microseconds. Its vocabulary, all in one place
(`LEARNER_LINK`; `learner.py` answers them, `remote.py` asks them):
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from typing import ClassVar


class MessageError(ValueError):
    """A message off its shape: not JSON, an unknown kind, or a field of the wrong type."""


@dataclass(frozen=True, slots=True)
class CellStarted:
    KIND: ClassVar[str] = "cell"
    index: int


@dataclass(frozen=True, slots=True)
class Verdict:
    KIND: ClassVar[str] = "result"
    index: int
    mark: str
    message: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class CellStopped:
    KIND: ClassVar[str] = "stopped"
    index: int
    cause: str


@dataclass(frozen=True, slots=True)
class Restarting:
    KIND: ClassVar[str] = "starting"


@dataclass(frozen=True, slots=True)
class Note:
    KIND: ClassVar[str] = "note"
    text: str


@dataclass(frozen=True, slots=True)
class LearnerStarted:
    KIND: ClassVar[str] = "learner"
    group: int


@dataclass(frozen=True, slots=True)
class GraderFailed:
    KIND: ClassVar[str] = "failed"
    cause: str


@dataclass(frozen=True, slots=True)
class Done:
    KIND: ClassVar[str] = "done"


Message = CellStarted | Verdict | CellStopped | Restarting | Note | LearnerStarted | GraderFailed | Done
KINDS: dict[str, type[Message]] = {
    kind.KIND: kind
    for kind in (CellStarted, Verdict, CellStopped, Restarting, Note, LearnerStarted, GraderFailed, Done)
}


def encode(message: Message) -> bytes:
    return json.dumps({"kind": message.KIND, **asdict(message)}).encode()


def decode(data: bytes) -> Message:
    """The message in `data`, each field checked against its type."""
    try:
        document = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise MessageError(f"not JSON ({exc})") from None
    if not isinstance(document, dict):
        raise MessageError("not a JSON object")
    kind = KINDS.get(document.pop("kind", None))
    if kind is None:
        raise MessageError("no known kind")
    names = [field.name for field in fields(kind)]
    if sorted(document) != sorted(names):
        raise MessageError(f"{kind.KIND}: fields {sorted(document)}, not {sorted(names)}")
    values = {}
    for field in fields(kind):
        value = document[field.name]
        if field.type == "int":
            ok = type(value) is int
        elif field.type == "str":
            ok = type(value) is str
        elif field.type == "tuple[str, ...]":
            ok = type(value) is list and all(type(item) is str for item in value)
            value = tuple(value) if ok else value
        else:  # Any: JSON as it came
            ok = True
        if not ok:
            raise MessageError(f"{kind.KIND}: {field.name} is {type(value).__name__}, not {field.type}")
        values[field.name] = value
    return kind(**values)


# The judge <-> learner link: each request kind and what it carries (`learner.Cells`,
# `learner.Worker`, `wire.Peer`), then each reply. Documentation the tests hold to the code:
# tests/test_grade_messages.py checks every kind here is handled where it says, and the
# reverse.
LEARNER_LINK: dict[str, str] = {
    # to the learner's first process (`learner.Cells`)
    "exec": "[exec, source, filename]: run a cell in the learner's namespace",
    "fork": "[fork] + a socket passed alongside: fork a worker for one check on that socket",
    "reap": "[reap]: the exit status of the last worker (killed first if it still runs)",
    # to a worker (`learner.Worker`): the check's calls and the explorer's questions
    "lookup": "[lookup, name]: what the namespace holds under name (missing, value, function or class)",
    "bases": "[bases, handle]: the kit classes an object's class derives from",
    "stub": "[stub, handle]: is the answer still the exercise's stub?",
    "each": "[each, handle, [[args, kwargs], ...]]: one call per argument list, up to the first that raises",
    "restart": "[restart, name]: a copy of the answer on fresh memory",
    "restartcall": "[restartcall, name, args, kwargs]: a restart and its first call, in one request",
    "digests": "[digests, [[memory|picture, handle], ...]]: hashes of what copies keep, drawn there",
    "twins": "[twins, [handles], [[original, counterpart], ...]]: copies of objects taken together",
    "calls": "[calls, handle, [[name or {kit: [module, qualname]}, args], ...]]: reads of one state, in turn",
    "around": "[around, handle, name, reads, args, kwargs]: reads, one call, the reads again",
    "watch": "[watch, [[module, owner, name], ...]]: note which kit functions run from now on",
    "watched": "[watched]: stop noting, and say which ran",
    "bye": "[bye]: the check is over: the worker exits",
    # either way (`wire.Peer`): objects by handle
    "op": "[op, handle, operator, operand]: an operator applied to an object of the other side",
    "get": "[get, handle, attribute]: a public attribute",
    "call": "[call, handle, args, kwargs]: call an object",
    "callattr": "[callattr, handle, method, args, kwargs]: call one of its methods (one request)",
    # replies
    "ret": "[ret, value]: the request's value",
    "exc": "[exc, exception]: what the request raised (by class and fields, by name, or the other side's own)",
    "ready": "[ready]: the learner's process is confined and serves (its first frame)",
    "failed": "[failed, why]: it could not get ready (the grader's failure, before any learner code)",
}
