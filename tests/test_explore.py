"""The schedule explorer on a tiny model: two workers each bump a shared counter once (a
learner call, whose kit calls are fault points) and then ack; a worker that died before
its ack bumps again from a fresh process. The counter must end at 2.

Checked here: the explorer finds the shortest breaking schedule; the count of schedules
it reports is exact (equal to a brute-force enumeration without state hashing); state
hashing merges commuting steps without losing a counterexample; it is deterministic; a
crash is a process death (nothing kept in memory survives, no except of the learner's has
an effect); `restart` rebuilds an answer on fresh memory; the cyclic collector is paused
during a search; and a world that offers `clone()` is searched alike from copies."""

from __future__ import annotations

import dataclasses

import pytest

from shopops_lab.checks.base import memory, restart
from shopops_lab.errors import ShopOpsError
from shopops_lab.explore import Bound, Event, FaultKind, Move, Scenario, _play, _variants, explore, parse, replay

WORKERS = ("A", "B")


class _Counter:
    def __init__(self, run) -> None:
        self.run, self.value, self.keys = run, 0, set()
        self.state = dict.fromkeys(WORKERS, "todo")
        world = self

        class Counter:
            __slots__ = ()

            def read(self):
                run.enter("read")
                value = world.value
                run.leave("read")
                return value

            def write(self, value):
                run.enter("write")
                world.value = value
                run.leave("write")

            def add_once(self, key):
                run.enter("add_once")
                if key not in world.keys:
                    world.keys.add(key)
                    world.value += 1
                run.leave("add_once")

        self.counter = Counter()

    def moves(self):
        moves = []
        for who in WORKERS:
            if self.state[who] == "todo":
                moves.append(Move(f"{who} bump", who, self._bump, peer="counter"))
            elif self.state[who] == "bumped":
                moves.append(Move(f"{who} ack", who, self._ack))
                moves.append(Move(f"{who} crash", who, crash=True, cost="crash"))
        return moves

    def _bump(self, run):
        who = run.current_actor
        called = run.call(run.answer(who), self.counter, who)
        self.state[who] = "bumped"
        return f"{who} bumps: {called.value!r}, the counter is {self.value}"

    def _ack(self, run):
        self.state[run.current_actor] = "done"
        return f"{run.current_actor} acks"

    def fingerprint(self):
        return self.value, tuple(sorted(self.keys)), tuple(self.state.items())

    def broken(self):
        return f"the counter is {self.value}, above 2" if self.value > 2 else None

    def finished(self):
        return None if self.value == 2 else f"the counter ended at {self.value}, not 2"

    def crashed(self, actor):
        self.state[actor] = "todo"
        return None


def scenario(crashes: int = 1, *, in_calls: bool = True) -> Scenario:
    faults = (FaultKind.LOST_REQUEST, FaultKind.LOST_REPLY) if in_calls else ()
    return Scenario(
        "counter", Bound(words=f"2 workers, {crashes} crash", budget={"crash": crashes}, faults=faults), _Counter
    )


def bumps_once_by_key(counter, me):
    counter.add_once(me)


def reads_then_writes(counter, me):
    counter.write(counter.read() + 1)


_DONE: set = set()


def remembers_in_memory(counter, me):
    if me in _DONE:
        return
    counter.write(counter.read() + 1)
    _DONE.add(me)


def writes_99_when_it_dies(counter, me):
    try:
        counter.add_once(me)
    except BaseException:
        counter.write(99)
        raise


def brute_force(scen: Scenario, answer):
    """Every schedule, one by one, no state hashing: (complete schedules, shortest broken length)."""
    complete, shortest, stack = 0, None, [()]
    while stack:
        events = stack.pop()
        played = _play(scen, answer, events)
        if played.problem is not None:
            shortest = len(events) if shortest is None else min(shortest, len(events))
            continue
        if not played.moves:
            complete += 1
            continue
        for move in played.moves:
            first = events + (Event(move.name),)
            stack.append(first)
            stack.extend(
                events + (e,) for e in _variants(scen.bound, played.spent, move.name, _play(scen, answer, first).points)
            )
    return complete, shortest


@pytest.mark.parametrize("crashes", [0, 1, 2])
def test_the_count_of_schedules_is_exact_against_brute_force(crashes):
    found = explore(scenario(crashes), bumps_once_by_key)
    complete, shortest = brute_force(scenario(crashes), bumps_once_by_key)
    assert found.counterexample is None and shortest is None
    assert found.schedules == complete
    assert found.summary == f"checked all {complete:,} schedules of 2 workers, {crashes} crash"
    if crashes:
        assert found.states < found.schedules  # commuting steps were merged, not played again


def test_no_crash_no_fault_is_the_plain_interleavings():
    # bump/ack of A and of B interleaved: 4! / (2! 2!) = 6
    assert explore(scenario(0), bumps_once_by_key).schedules == 6


@pytest.mark.parametrize("answer", [reads_then_writes, remembers_in_memory])
def test_the_counterexample_is_a_shortest_one(answer):
    found = explore(scenario(1), answer)
    _, shortest = brute_force(scenario(1), answer)
    assert found.counterexample is not None and len(found.counterexample.events) == shortest


def test_a_lost_reply_is_found_and_written_in_words_that_replay():
    found = explore(scenario(1), reads_then_writes).counterexample
    assert found.words == "A bump · B bump (crash after write) · B bump"
    assert found.problem == "the counter is 3, above 2"
    assert found.lines == (
        "1. A bumps: None, the counter is 1",
        "2. B bump: B's process dies (crash after write)",
        "3. B bumps: None, the counter is 3",
    )
    again = replay(scenario(1), reads_then_writes, found.words)
    assert again.problem == found.problem and again.events == found.events


def test_memory_does_not_survive_a_crash_or_leak_between_schedules():
    """Remembering "done" in a module-level set passes only if the set outlives the
    process: after `A crash` the fresh process has forgotten, and bumps again."""
    found = explore(scenario(1, in_calls=False), remembers_in_memory).counterexample
    assert found.words == "A bump · A crash · A bump · B bump"
    assert found.problem == "the counter is 3, above 2"
    assert _DONE == set()  # the learner's own module was never touched


def test_no_except_of_the_learners_has_an_effect_after_a_crash():
    replayed = replay(scenario(1), writes_99_when_it_dies, "A bump (crash before add_once) · A bump · B bump")
    assert replayed.problem is None and "the counter is 2" in str(replayed)


def test_the_search_is_deterministic_and_so_is_its_picture():
    one, two = explore(scenario(1), reads_then_writes), explore(scenario(1), reads_then_writes)
    assert (one.schedules, one.states, one.counterexample.words) == (
        two.schedules,
        two.states,
        two.counterexample.words,
    )
    svg = one.counterexample.diagram().svg
    assert svg == two.counterexample.diagram().svg
    assert (
        'role="img"' in svg
        and 'aria-label="the shortest breaking schedule: 1. A bump; 2. B bump (crash after '
        'write) (process dies); 3. B bump; broken: the counter is 3, above 2"'
        in svg
    )


def test_parse_reads_back_every_kind_of_fault():
    words = "A bump (crash before read) · A bump (crash after write 2) · B bump (apply fails) · B ack"
    events = parse(words)
    assert [e.fault.kind if e.fault else None for e in events] == [
        FaultKind.LOST_REQUEST,
        FaultKind.LOST_REPLY,
        FaultKind.FAIL,
        None,
    ]
    assert events[1].fault.nth == 2 and " · ".join(e.words for e in events) == words


@pytest.mark.parametrize("schedule", ["", "C bump", "A ack", "A bump (crash before nothing)"])
def test_a_schedule_that_cannot_happen_is_refused_by_name(schedule):
    with pytest.raises(ShopOpsError, match="schedule"):
        replay(scenario(1), bumps_once_by_key, schedule)


# ---------------------------------------------------------------------------- restart

COUNTS: dict = {}


def counts_calls(key, seen=[]):  # noqa: B006 - a default argument is memory too
    COUNTS[key] = COUNTS.get(key, 0) + 1
    seen.append(key)
    counts_calls.calls = getattr(counts_calls, "calls", 0) + 1
    return COUNTS[key], len(seen), counts_calls.calls


class Tally:
    totals: dict = {}

    def add(self, key):
        type(self).totals[key] = Tally.totals.get(key, 0) + 1
        return self.totals[key]


def closure():
    box = []

    def keep(x):
        box.append(x)
        return len(box)

    return keep


def test_restart_forgets_globals_defaults_and_function_attributes():
    fresh = restart(counts_calls)
    assert fresh("a") == (1, 1, 1) and fresh("a") == (2, 2, 2)
    assert restart(counts_calls)("a") == (1, 1, 1)
    assert COUNTS == {} and not hasattr(counts_calls, "calls")


def test_restart_forgets_class_attributes_and_closures():
    cls = restart(Tally)
    assert cls().add("x") == 1 and cls().add("x") == 2 and restart(Tally)().add("x") == 1
    assert Tally.totals == {}
    keep = closure()
    again = restart(keep)
    assert again(1) == 1 and again(2) == 2 and restart(keep)(1) == 1 and keep(1) == 1


def test_memory_tells_two_processes_apart():
    one, two = restart(counts_calls), restart(counts_calls)
    assert memory(one) == memory(two)
    one("a")
    assert memory(one) != memory(two)


_TALLY: dict = {}


def _tally(key):
    _TALLY[key] = _TALLY.get(key, 0) + 1
    return _TALLY[key]


STEPS = {"count": _tally}


def counts_through_a_table(key):
    return STEPS["count"](key)


def test_restart_reaches_functions_kept_in_a_table():
    """A helper reached through a module-level dict is rebuilt too: its own memory is fresh."""
    fresh = restart(counts_through_a_table)
    assert fresh("a") == 1 and fresh("a") == 2 and restart(counts_through_a_table)("a") == 1
    assert _TALLY == {}


def test_the_collector_is_paused_during_a_search_and_back_after():
    """A search makes thousands of short-lived worlds; the cyclic collector would walk every
    object the process holds each time. It is paused for the search, and restored after, also
    when the search ends on a counterexample."""
    import gc

    seen = []

    class Noting(_Counter):
        def moves(self):
            seen.append(gc.isenabled())
            return super().moves()

    assert gc.isenabled()
    noting = Scenario("counter", scenario().bound, Noting)
    assert explore(noting, bumps_once_by_key).counterexample is None
    assert seen and not any(seen) and gc.isenabled()
    assert explore(noting, reads_then_writes).counterexample is not None and gc.isenabled()


def test_a_world_that_can_be_copied_is_searched_alike_from_copies():
    """A world may offer clone(run); going on from copies instead of replaying each prefix
    covers the same schedules, through the same states."""
    import copy

    class Plain:
        """Two workers each take one of two turns, in any order; no learner code."""

        def __init__(self, run):
            self.done = ()

        def moves(self):
            return [Move(f"{w} turn", w, lambda run, w=w: self._turn(w)) for w in WORKERS if w not in self.done]

        def _turn(self, who):
            self.done += (who,)
            return f"{who} takes its turn"

        def fingerprint(self):
            return tuple(sorted(self.done))

        def broken(self):
            return None

        def finished(self):
            return None

        def crashed(self, actor):
            return None

    class Copied(Plain):
        clones = 0

        def clone(self, run):
            Copied.clones += 1
            return copy.copy(self)

    replayed = explore(Scenario("plain", Bound(words="2 turns"), Plain), None)
    copied = explore(Scenario("copied", Bound(words="2 turns"), Copied), None)
    assert (copied.schedules, copied.states) == (replayed.schedules, replayed.states)
    assert copied.schedules == 2
    assert Copied.clones > 0


LEDGER: list = []  # a global that shares its name with an attribute below


class _Box:
    def __init__(self) -> None:
        self.LEDGER: list = []


def files_in_the_box(box):
    box.LEDGER.append(1)  # an attribute, not the global
    return len(box.LEDGER)


def test_a_copys_memory_holds_only_what_its_code_can_reach_by_name():
    """An attribute named like a global does not pull the global into the copy: changing
    that global changes nothing the explorer would see of the copy."""
    one = restart(files_in_the_box)
    LEDGER.append("unrelated")
    try:
        two = restart(files_in_the_box)
        assert memory(one) == memory(two)
        assert one(_Box()) == 1 and LEDGER == ["unrelated"]
    finally:
        LEDGER.clear()


PREFIX: list = []


def writes_a_global_and_reads_one_in_a_class_body(value):
    global _LAST
    _LAST = [value]

    class Tagged:
        tag = PREFIX  # a class body reads the module's name too

    Tagged.tag.append(value)
    return len(Tagged.tag), _LAST


_LAST: list = []


def test_names_a_class_body_or_a_global_statement_uses_are_fresh_in_the_copy():
    fresh = restart(writes_a_global_and_reads_one_in_a_class_body)
    assert fresh("a") == (1, ["a"]) and fresh("b") == (2, ["b"])
    assert restart(writes_a_global_and_reads_one_in_a_class_body)("c") == (1, ["c"])
    assert PREFIX == [] and _LAST == []


# ---------------------------------------------------------------------------- twins


class _Elsewhere:
    """Stands for an object of the other side of the grader's wire (a `Handle`: no copy of it
    can be made here)."""

    def __deepcopy__(self, memo):
        raise TypeError("an object of the other side cannot be copied here")


class Counter:
    seen: list = []

    def __init__(self, clock):
        self.clock, self.count = clock, 0

    def tick(self):
        self.count += 1
        Counter.seen.append(self.count)
        return self.count


def test_twins_are_copies_as_they_are_now_sharing_what_they_shared():
    """A twin starts from the state the original is in now (a restart, from the state the
    check began with); what two values shared, their twins share; the originals go on alone."""
    from shopops_lab.checks.base import _learners
    from shopops_lab.checks.fresh import twins

    cls = restart(Counter)
    one = cls(clock="clock")
    one.tick()
    one.tick()
    twin_cls, twin = twins([cls, one], _learners)
    assert twin.count == 2 and type(twin) is twin_cls and twin_cls is not cls
    assert twin.tick() == 3 and one.count == 2  # apart from now on
    assert twin_cls.seen == [1, 2, 3] and cls.seen == [1, 2] and Counter.seen == []
    assert memory(twin_cls) != memory(cls)  # each pictures its own memory
    again = twins([cls], _learners)[0]
    assert memory(again) == memory(cls)


def test_twins_swap_the_other_sides_objects_or_refuse():
    from shopops_lab.checks.base import _learners
    from shopops_lab.checks.fresh import NotCopyable, twins

    cls = restart(Counter)
    there, counterpart = _Elsewhere(), _Elsewhere()
    one = cls(clock=there)
    (twin,) = twins([one], _learners, swap=[(there, counterpart)], foreign=(_Elsewhere,))
    assert twin.clock is counterpart and one.clock is there
    with pytest.raises(NotCopyable, match="_Elsewhere"):
        twins([one], _learners, foreign=(_Elsewhere,))  # held, with no counterpart
    one.clock = {"inside": [there]}
    with pytest.raises(NotCopyable):
        twins([one], _learners, foreign=(_Elsewhere,))
    import threading

    one.clock = threading.Lock()  # a value that cannot be copied is refused, never shared
    with pytest.raises(NotCopyable):
        twins([one], _learners)


def test_in_one_process_a_world_with_learner_copies_is_replayed_not_twinned():
    """A clone(run) that asks for twins in one process is refused (its copies could hold the
    check's objects unseen), so the search replays and covers the same schedules."""
    from shopops_lab.checks.fresh import NotCopyable

    asked = []

    class Twinned(_Counter):
        def clone(self, run):
            try:
                run.twin()  # nothing to twin before any worker ran: fine, but this world copies nothing
            except NotCopyable:
                asked.append("refused")
                raise
            raise NotCopyable("this test's world is never copied")

    plain = explore(scenario(), remembers_in_memory)
    twinned = explore(dataclasses.replace(scenario(), start=Twinned), remembers_in_memory)
    assert "refused" in asked and plain.counterexample is not None
    assert (twinned.schedules, twinned.states, twinned.counterexample) == (
        plain.schedules,
        plain.states,
        plain.counterexample,
    )
