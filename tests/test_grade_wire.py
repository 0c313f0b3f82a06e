"""The wire between the judge and the learner's process, one promise per test: a real
learner process (a fresh interpreter) runs small cells, and the judge calls into it."""

from __future__ import annotations

import json
import tempfile

import pytest

from shopops_lab.checks.base import NotAttempted, around, call_answer, in_turn, memory, picture, restart, watching
from shopops_lab.checks.lab03 import HeartbeatPolicy
from shopops_lab.course.grade.remote import CheckRun, JudgePeer, Learner, LearnerRaised, RemoteAnswer
from shopops_lab.course.grade.wire import FRAME_LIMIT, HEADER, Frames, Handle, Peer, PeerGone, ProtocolError, send_frame
from shopops_lab.errors import BadArgumentError, StaleTokenError
from shopops_lab.fencing import NaiveResultStore, TokenFence

CELLS = """
from shopops_lab.checks.lab03 import HeartbeatPolicy
from shopops_lab.errors import StaleTokenError
from shopops_lab.fencing import NaiveResultStore
import sys

class Same(str):
    def __eq__(self, other):
        return True
    __hash__ = str.__hash__

class Mine(HeartbeatPolicy):
    pass

def same():
    return Same("not what you think")

def policy(subclass):
    return (Mine if subclass else HeartbeatPolicy)(ttl=30, heartbeat_interval=10, missed_tolerance=1)

def fails(n):
    return {"a": 1}["b" * n]

CALLED = []

def noted(n):                                        # a batch's calls, noted in the learner's process
    CALLED.append(n)
    if n == 2:
        raise KeyError(n)
    return n

def stub():
    raise NotImplementedError()

def stale():
    raise StaleTokenError(what="job-1", token=3, current=4)

def leave(code):
    sys.exit(code)

class Named:
    def __init__(self, name):
        self.name = name
    def __str__(self):
        return f"named {self.name}"

def hands_its_own(kit, name):       # the kit's method uses the learner's object while the learner waits
    return kit.shown(Named(name), key=lambda text: text.upper())

def through(callback):
    return callback()

def catches(callback):
    try:
        callback()
    except ConnectionError as exc:
        return f"caught {exc}"

def peek(thing):
    try:
        return thing._secret
    except AttributeError:
        return "refused"

def reach(thing):
    try:
        return thing.os.getpid()
    except TypeError:
        return "refused"

def fill(seen, item):
    seen.add(item)

def tick(thing):
    try:
        return thing.now()
    except TypeError:
        return "refused"

def hand_back(thing):
    return thing.now

COUNT = []
def count():
    COUNT.append(1)
    return len(COUNT)

class Store(NaiveResultStore):
    pass

class Fills(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id):
        result["seen"] = True  # the check's container, filled
        if token != self.current_token(job_id):
            raise StaleTokenError(what=job_id, token=token, current=self.current_token(job_id))
        return super().complete(job_id, result, token=token, worker_id=worker_id)

class Unwritten(NaiveResultStore):
    def complete(self, job_id, result, *, token, worker_id):
        raise NotImplementedError()

class ShowsOtherwise(NaiveResultStore):
    def result(self, job_id):
        return "all is well"

def outlives(effect):
    try:
        effect("first")
    except BaseException:
        pass
    effect("second")
    return "carried on"

def reads_fixed(thing):
    found = [thing.label, thing.label, thing.clock.now()]
    for name in ("os", "_secret"):
        try:
            found.append(getattr(thing, name).getpid())
        except (TypeError, AttributeError):
            found.append("refused")
    return found

def fenced(key):
    from shopops_lab.fencing import TokenFence
    return TokenFence("job").claim(key)
"""


@pytest.fixture(scope="module")
def learner():
    scratch = tempfile.mkdtemp(prefix="shopops-wire-")
    process = Learner(
        {
            "scratch": scratch,
            "lock": scratch,
            "uid": None,
            "hide": [],
            "memory_mb": 1024,
            "cpu_seconds": 120,
            "imports": ["shopops_lab.checks.base"],
        },
        announce=lambda pid: None,
    )
    process.start()
    assert process.run(CELLS, "<cell test>") is None
    yield process
    process.stop()


@pytest.fixture()
def run(learner, monkeypatch):
    monkeypatch.setattr(JudgePeer, "handed", ("shopops_lab", __name__))  # this file's objects act as the kit's
    check = CheckRun(learner)
    yield check
    check.close()


def test_a_value_that_equals_everything_arrives_as_the_plain_string_it_holds(run) -> None:
    got = call_answer(run.answer("same"))
    assert type(got) is str and got == "not what you think" and got != "anything else"


def test_a_kit_record_arrives_as_the_kits_own_class_even_from_a_subclass(run) -> None:
    for subclass in (False, True):
        got = call_answer(run.answer("policy"), subclass)
        assert type(got) is HeartbeatPolicy and got == HeartbeatPolicy(
            ttl=30, heartbeat_interval=10, missed_tolerance=1
        )


def test_the_learners_error_arrives_named_and_placed(run) -> None:
    with pytest.raises(LearnerRaised) as raised:
        call_answer(run.answer("fails"), 2)
    assert type(raised.value).__name__ == "KeyError" and "'bb'" in str(raised.value)
    assert "(in fails, line" in str(raised.value)


def test_the_stub_is_not_attempted_and_says_so_when_asked(run) -> None:
    answer = run.answer("stub")
    assert isinstance(answer, RemoteAnswer) and answer.is_stub() and not run.answer("same").is_stub()
    with pytest.raises(NotAttempted):
        call_answer(answer)


def test_a_kit_error_crosses_with_its_fields_and_sys_exit_as_sys_exit(run) -> None:
    with pytest.raises(StaleTokenError) as raised:
        call_answer(run.answer("stale"))
    assert (raised.value.token, raised.value.current) == (3, 4)
    with pytest.raises(SystemExit) as left:
        call_answer(run.answer("leave"), 7)
    assert left.value.code == 7


class _Private(BaseException):
    pass


def test_the_judges_own_exception_comes_back_as_the_same_object(run) -> None:
    raised = _Private("the check's own")

    def callback():
        raise raised

    with pytest.raises(_Private) as caught:
        call_answer(run.answer("through"), callback)
    assert caught.value is raised

    def refused():
        raise ConnectionError("payments API timed out")

    assert call_answer(run.answer("catches"), refused) == "caught payments API timed out"


def test_only_public_attributes_of_the_judges_objects_cross(run) -> None:
    class Thing:
        _secret = "the answer key"
        shown = "fine"

    assert call_answer(run.answer("peek"), Thing()) == "refused"


def test_no_module_or_foreign_object_is_handed_over_whatever_leads_to_it(run) -> None:
    import os

    class Thing:
        pass

    thing = Thing()
    thing.os = os  # a public attribute that leads out of the kit
    assert call_answer(run.answer("reach"), thing) == "refused"


class _Clock:
    def now(self) -> float:
        return 5.0


class _Fixed:
    """A judge's object whose class promises some attributes never change (as WorkerEnv does)."""

    _FIXED = ("clock", "label", "os", "_secret")

    def __init__(self) -> None:
        import os

        self.clock, self.label, self.os, self._secret = _Clock(), "env-1", os, "key"


def test_fixed_attributes_cross_with_their_object_and_are_not_asked_again(run) -> None:
    asked: list[str] = []
    peer = run.channel()
    original = peer.answer
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(peer, "answer", lambda message, given: asked.append(message[0]) or original(message, given))
        assert call_answer(run.answer("reads_fixed"), _Fixed()) == ["env-1", "env-1", 5.0, "refused", "refused"]
    # the label and the clock came with the object: only the clock's method call crossed, and
    # the module (never handed over) was asked and refused as always (a private name never leaves)
    assert asked == ["callattr", "get"]


def test_a_method_call_on_a_judges_object_runs_the_method_it_names_then(run) -> None:
    import os

    clock = _Clock()
    assert call_answer(run.answer("tick"), clock) == 5.0
    assert call_answer(run.answer("hand_back"), clock)() == 5.0  # the method itself, back to its owner
    clock.now = os.getpid  # an instance attribute that leads out of the kit, under a method's name
    assert call_answer(run.answer("tick"), clock) == "refused"


def test_a_set_the_learner_fills_is_the_checks_own_set_afterwards(run) -> None:
    seen: set = set()
    call_answer(run.answer("fill"), seen, "out-0001")
    assert seen == {"out-0001"}


def test_a_restart_forgets_what_the_learners_code_kept_in_memory(run) -> None:
    answer = run.answer("count")
    assert [call_answer(answer), call_answer(answer)] == [1, 2]
    fresh = restart(answer)
    assert call_answer(fresh) == 1


def test_each_restart_is_a_namespace_of_its_own_as_the_cells_left_it(run) -> None:
    answer = run.answer("count")
    call_answer(answer)  # what the original did is in no copy
    one, two = restart(answer), restart(answer)
    assert [call_answer(one), call_answer(one), call_answer(two)] == [1, 2, 1]
    assert memory(one) != memory(two) and memory(restart(answer)) == memory(restart(answer))


def test_a_restart_and_its_first_call_are_one_request_and_the_copy_lives_on(run) -> None:
    counted, through = run.answer("count"), run.answer("through")
    peer = counted._current()._peer
    sent: list[str] = []
    original = peer.request
    refused = ConnectionError("payments API timed out")

    def refuse():
        raise refused

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(peer, "request", lambda message, *rest: sent.append(message[0]) or original(message, *rest))
        fresh = restart(counted)
        assert [call_answer(fresh), call_answer(fresh)] == [1, 2]
        copy = restart(through)
        with pytest.raises(ConnectionError) as caught:  # the first call raised: the copy came back all the same
            call_answer(copy, refuse)
        assert call_answer(copy, lambda: "next") == "next"
    assert caught.value is refused  # the judge's own exception, the same object
    assert sent == ["restartcall", "call", "restartcall", "call"]


def test_a_batch_of_calls_is_one_message_with_each_calls_own_outcome(run) -> None:
    counted = restart(run.answer("count"))
    assert [value for value, _ in counted.each([((), {})] * 3)] == [1, 2, 3]  # in order, each a call of its own
    fails, stale, through = run.answer("fails"), run.answer("stale"), run.answer("through")
    peer = fails._current()._peer
    sent: list[str] = []
    original = peer.request
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(peer, "request", lambda message, *rest: sent.append(message[0]) or original(message, *rest))
        outcomes = fails.each([((1,), {}), ((2,), {})])  # the first raises: the batch stops there
        refused = stale.each([((), {})])
        called = through.each([((lambda: "from the judge",), {})])
    assert sent == ["each", "each", "each"]  # one request per batch
    assert [(value, type(error).__name__) for value, error in outcomes] == [(None, "KeyError")]
    assert isinstance(outcomes[0][1], LearnerRaised) and "'b'" in str(outcomes[0][1])
    assert isinstance(refused[0][1], StaleTokenError) and refused[0][1].token == 3  # a kit error, with its fields
    assert called == [("from the judge", None)]  # a kit callback inside a batched call crosses back as usual


def test_a_batch_stops_at_its_first_exception_as_the_check_does(run) -> None:
    """`call_each` raises the first exception a batch met, so the learner's process runs no
    call after it (a stub's batch of 5,465 calls is one call)."""
    outcomes = run.answer("noted").each([((n,), {}) for n in (1, 2, 3, 4)])
    assert [value for value, _ in outcomes] == [1, None] and type(outcomes[1][1]).__name__ == "KeyError"
    assert run.lookup("CALLED") == (True, [1, 2])


class _Death(BaseException):
    pass


def test_a_crash_the_check_raises_into_a_learner_call_ends_it_and_refuses_what_follows(run) -> None:
    death, done = _Death("the process dies here"), []

    def effect(what: str) -> None:
        done.append(what)
        raise death

    with pytest.raises(_Death) as caught:  # the learner's code caught it and carried on: the call ends anyway
        call_answer(run.answer("outlives"), effect)
    assert caught.value is death and done == ["first"]
    assert call_answer(run.answer("through"), lambda: "next call") == "next call"


def test_the_kits_own_code_at_work_in_the_learners_process_is_seen(run) -> None:
    answer = run.answer("fenced")
    with watching(answer, TokenFence.claim, TokenFence.check) as ran:
        assert call_answer(answer, "job-1") == 1
    assert ran == {"TokenFence.claim"}
    with watching(answer, TokenFence.check) as ran:
        call_answer(answer, "job-1")
    assert not ran


def test_an_object_of_the_learners_process_is_pictured_there(run) -> None:
    made = restart(run.answer("Store"))
    store = made()
    before = picture(made, store)
    assert picture(made, store) == before
    store.claim("job-1", "W1")
    assert picture(made, store) != before


def test_reads_in_turn_of_an_object_there_are_one_message_and_stop_at_the_first_raise(run) -> None:
    made = restart(run.answer("Store"))
    store = made()
    store.complete("job-1", {"x": 1}, token=store.claim("job-1", "W1"), worker_id="W1")
    peer = store._peer
    sent: list[str] = []
    original = peer.request
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(peer, "request", lambda message, *rest: sent.append(message[0]) or original(message, *rest))
        read = in_turn(made, store, ("result", ("job-1",)), ("written_by", ("job-1",)))
    assert read == [{"x": 1}, ("W1", 1)] and sent == ["calls"]
    with pytest.raises(BadArgumentError, match="job_id"):
        in_turn(made, store, ("result", ("job-1",)), ("result", (5,)), ("claim", ("job-2", "W1")))
    assert store.claim("job-2", "W1") == 1  # the call after the one that raised never ran
    with pytest.raises(ProtocolError):
        in_turn(made, NaiveResultStore(), ("result", ("job-1",)))  # not an object of the learner's process


def _around_twice(made, store) -> tuple:
    """A write under the newest token and one under a stale token, each read around."""
    reads = ((NaiveResultStore.result, ("job-1",)), (NaiveResultStore.written_by, ("job-1",)))
    token, accepted, refused = store.claim("job-1", "W1"), {"x": 1}, {"x": 2}
    first = around(made, store, ("complete", ("job-1", accepted), {"token": token, "worker_id": "W1"}), *reads)
    second = around(made, store, ("complete", ("job-1", refused), {"token": 0, "worker_id": "X"}), *reads)
    return first, second, accepted, refused


def test_a_call_with_reads_around_it_is_one_message_and_says_what_one_process_says(run) -> None:
    made = restart(run.answer("Fills"))
    store = made()
    peer = store._peer
    sent: list[str] = []
    original = peer.request
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(peer, "request", lambda message, *rest: sent.append(message[0]) or original(message, *rest))
        remote = _around_twice(made, store)
    assert sent == ["callattr", "around", "around"]  # the claim, then each write with its reads
    (before, (value, error), after), (kept, (_, stale), still), accepted, refused = remote
    assert (before, value, error, after) == ([None, None], None, None, [{"x": 1, "seen": True}, ("W1", 1)])
    assert accepted == {"x": 1, "seen": True} and refused == {"x": 2, "seen": True}  # filled, as in one process
    assert isinstance(stale, StaleTokenError) and (stale.token, stale.current) == (0, 1) and kept == still == after
    namespace: dict = {}
    exec(compile(CELLS, "<cell test>", "exec"), namespace)
    local = _around_twice(namespace["Fills"], namespace["Fills"]())
    assert [(b, o[0], type(o[1]), a) for b, o, a in local[:2]] == [(b, o[0], type(o[1]), a) for b, o, a in remote[:2]]
    unwritten = restart(run.answer("Unwritten"))
    with pytest.raises(NotAttempted):  # the stub's own error is no outcome, as `attempt` says
        around(unwritten, unwritten(), ("complete", ("job-1", {}), {"token": 1, "worker_id": "W1"}))
    with pytest.raises(ProtocolError):
        around(made, NaiveResultStore(), ("complete", ("job-1", {}), {"token": 1, "worker_id": "W1"}))


def test_a_class_answer_is_a_subclass_of_the_kit_class_it_extends(run) -> None:
    store = run.answer("Store")
    assert store.kind == "class" and issubclass(store, NaiveResultStore)
    assert not issubclass(run.answer("Same"), NaiveResultStore)
    instance = store()
    assert isinstance(instance, Handle) and type(instance).__name__ == "Store"


class _Quiet(Peer):
    def __init__(self) -> None:
        super().__init__(None, public_only=True)

    def rebuild(self, described: dict) -> BaseException:
        return RuntimeError(str(described.get("msg")))


def test_a_peer_must_say_how_it_raises_the_other_sides_exceptions() -> None:
    class Mute(Peer):
        pass

    with pytest.raises(TypeError, match="rebuild"):
        Mute(None, public_only=True)  # type: ignore[abstract]


@pytest.mark.parametrize(
    "value",
    [
        [1, 2],  # a bare list: every collection is tagged
        {"z": 1},  # an unknown tag
        {"y": 99},  # a handle this side never gave out
        {"r": [["builtins", "object"], {}]},  # a class that is not the kit's
        {"r": [["shopops_lab.checks.lab03", "HeartbeatPolicy"], {"secret": 1}]},  # a field it does not have
        {"e": [["shopops_lab.course.grade.judge", "_Runner"], 1]},  # a private class
    ],
)
def test_the_judge_refuses_what_is_off_the_protocol(value) -> None:
    with pytest.raises(ProtocolError):
        _Quiet().decode(value)


def test_a_value_nested_too_deep_is_refused() -> None:
    assert _Quiet().decode({"l": [{"t": [{"s": []}]}]}) == [(set(),)]
    deep: dict = {"l": []}
    for _ in range(100):
        deep = {"l": [deep]}
    with pytest.raises(ProtocolError):
        _Quiet().decode(deep)


class _Trickle:
    """A socket that hands out what was sent in pieces of the sizes given, as a busy
    kernel may: to see the reader put frames back together across reads."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes = data, sizes

    def recv(self, limit: int) -> bytes:
        size = min(self.sizes.pop(0) if self.sizes else limit, limit)
        piece, self.data = self.data[:size], self.data[size:]
        return piece


def _framed(*messages: object) -> bytes:
    class Sink:
        sent = b""

        def sendall(self, data: bytes) -> None:
            Sink.sent += data

    for message in messages:
        send_frame(Sink(), message)
    return Sink.sent


@pytest.mark.parametrize("sizes", [[], [1] * 200, [3, 5, 40, 2], [6, 1000]])
def test_frames_arrive_whole_and_in_order_however_the_bytes_are_cut(sizes) -> None:
    messages = [["ret", 1], ["call", "x" * 30, [1, 2]], ["bye"]]
    frames = Frames(_Trickle(_framed(*messages), list(sizes)))
    assert [frames.read() for _ in messages] == messages
    with pytest.raises(PeerGone):
        frames.read()


def test_a_frame_cut_off_by_the_other_side_leaving_is_the_peer_gone() -> None:
    data = _framed(["ret", "a long enough answer"])
    with pytest.raises(PeerGone):
        Frames(_Trickle(data[:-3], [])).read()


def test_a_frame_over_the_limit_is_refused_before_it_is_read() -> None:
    header = HEADER.pack(FRAME_LIMIT + 1)
    with pytest.raises(ProtocolError, match="over the limit"):
        Frames(_Trickle(header, [])).read()


class _Shows:
    def shown(self, thing, *, key):
        return key(str(thing))


def test_the_judge_may_ask_about_the_learners_object_inside_a_call_the_learner_made(run) -> None:
    """While the learner's process waits on a kit call, the kit may use what the learner handed
    it (its `str()`, a key function it passed): those requests are answered there and then."""
    assert call_answer(run.answer("hands_its_own"), _Shows(), "ada") == "NAMED ADA"


def test_digests_asked_together_are_drawn_in_one_request_before_the_learners_code_runs_again(run) -> None:
    """A state's key holds several digests (a store's picture, each copy's memory): they are
    drawn together when first compared, and a digest not yet compared when the learner's
    code is called again is drawn first, in the same write as that call (no round trip of
    its own), so it pictures the state it was asked in."""
    made = restart(run.answer("Store"))
    store = made()
    peer = made._current()._peer
    writes: list[list[str]] = []  # the kinds of the frames in each write to the learner's process
    original = peer.flush

    def flush() -> None:
        writes.append([json.loads(bytes(held[4:]))[0] for held in peer.held])
        original()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(peer, "flush", flush)
        asked = (picture(made, store), memory(made), picture(made, store))
        assert [write for write in writes if write] == []  # nothing drawn yet
        assert hash(asked) == hash(asked) and asked[0] == asked[2]
        assert [write for write in writes if write] == [["digests"]]
        before = picture(made, store)
        store.claim("job-1", "W1")  # the learner's code runs: `before` is drawn first...
        assert [write for write in writes if write] == [["digests"], ["digests", "callattr"]]
        assert picture(made, store) != before and before == asked[0]  # ...as it stood before the claim


@pytest.mark.parametrize("fate", ["answered with an exception", "the learner's process gone"])
def test_a_digest_sent_ahead_without_a_usable_answer_is_unknown_and_equal_to_none(fate: str) -> None:
    """Digests sent ahead of a request are answered before it; one answered with an
    exception, or never (the process gone), pictures nothing: it equals no other digest,
    so no two states are merged on it (the search only grows), and the request itself is
    answered as it would have been."""
    import socket

    from shopops_lab.course.grade.remote import Digest

    ours, theirs = socket.socketpair()
    peer = JudgePeer(ours)
    asked, same = Digest(peer, "memory", 1), Digest(peer, "memory", 1)
    if fate == "answered with an exception":
        send_frame(theirs, ["exc", {"builtin": "ValueError", "message": "no"}, []])
        send_frame(theirs, ["ret", 5, []])
        assert peer.request(["get", 1, "x"]) == 5
        written = Frames(theirs)
        assert [written.read()[0], written.read()[0]] == ["digests", "get"] and not written.buffer
    else:
        theirs.close()
        with pytest.raises((PeerGone, OSError)):
            peer.request(["get", 1, "x"])
    assert asked != same and hash(asked) != hash(same) and not peer.pending and not peer.ahead
    ours.close()


def test_a_kit_method_read_in_turn_is_the_kits_whatever_the_learners_class_overrides(run) -> None:
    """A check reads what a store holds with the kit's own method, in the store's process:
    a class that overrides `result` to show something else shows it only to its own callers."""
    made = restart(run.answer("ShowsOtherwise"))
    store = made()
    store.complete("job-1", {"x": 1}, token=store.claim("job-1", "W1"), worker_id="W1")
    assert in_turn(made, store, ("result", ("job-1",)), (NaiveResultStore.result, ("job-1",))) == [
        "all is well",
        {"x": 1},
    ]
