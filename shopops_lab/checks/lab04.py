"""Lab 04: the store, not the worker, must refuse a completion under an old token.

The check explores: two workers share job-1 on one store made from the learner's class.
W7 claims it and writes twice (the second write may come after it lost the job); W9
claims, writes, claims again and writes; X, which never claimed, sends one write with
token 0; and one write request may arrive a second time, late (its reply was lost and it
was sent again). Every interleaving of those steps is played on a fresh store, and after
each write the store must have accepted it exactly when its token is the newest one issued
(and some claim issued it), refused it otherwise with StaleTokenError naming both tokens,
and changed nothing when it refused. Only the token may decide: a store that looks at the
worker's name, at whether a result exists, or at the first writer's token fails a schedule,
and the check shows the shortest one. `replay(store_class, schedule)` plays any schedule.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any

from shopops_lab.checks import answers
from shopops_lab.checks.base import (
    Exercise,
    ForeignAnswer,
    Wrong,
    around,
    call_answer,
    describe,
    error_text,
    named,
    picture,
    plain,
    watching,
)
from shopops_lab.checks.fresh import canonical
from shopops_lab.errors import StaleTokenError
from shopops_lab.explore import Bound, Called, Move, Replayed, Run, Scenario, explore, refuse
from shopops_lab.explore import replay as replay_schedule
from shopops_lab.fencing import NaiveResultStore, TokenFence

JOB = "job-1"
PROGRAMS = {"W7": ("claim", "write", "write"), "W9": ("claim", "write", "claim", "write"), "X": ("write",)}
STRANGERS = {"X": 0, "Y": 99}  # who writes without having claimed, with the token each makes up
AHEAD = {"W7": ("claim", "write"), "Y": ("write",)}  # a token above every one issued, searched apart (it is small)
STORE = "store"
BOUND = Bound(
    words="W7 (claim, write, write), W9 (claim, write, claim, write), a stranger X writing token 0, "
    "and one write request arriving again late",
    budget={"late copy": 1},
    faults=(),
)
AHEAD_BOUND = Bound(words="W7 (claim, write) and a stranger Y writing token 99, above every token issued", faults=())


class _Fencing:
    """One schedule's world: the learner's store, and the check's own ledger of the tokens
    claims returned (the learner's code never sees it)."""

    def __init__(self, run: Run, programs: dict[str, tuple[str, ...]] = PROGRAMS) -> None:
        self.run, self.programs = run, programs
        self.made = run.answer(STORE)
        self.store = self.made()  # its own FakeClock, where it lives (this world never moves time)
        self.foreign = isinstance(self.made, ForeignAnswer)  # the store lives in the learner's process
        self.pc = dict.fromkeys(programs, 0)
        self.held: dict[str, int] = {who: STRANGERS[who] for who in programs if who in STRANGERS}  # each one's token
        self.holder: dict[int, str] = {}  # token -> who claimed it
        self.sent: dict[str, int] = {}  # each worker's last write request (its token)
        self.newest = 0
        self.problem: str | None = None

    def moves(self) -> list[Move]:
        moves = [
            Move(
                f"{who} {program[self.pc[who]]}",
                who,
                self._claim if program[self.pc[who]] == "claim" else self._write,
                peer=STORE,
            )
            for who, program in self.programs.items()
            if self.pc[who] < len(program)
        ]
        moves += [
            Move(f"{who} write again", who, self._again, peer=STORE, cost="late copy") for who in sorted(self.sent)
        ]
        return moves

    def clone(self, run: Run) -> _Fencing:
        """This schedule's state, copied to go on from: the learner's store and class twinned
        in their process (a store keeps its own clock there, copied with it), the ledger copied here."""
        twin = copy.copy(self)
        twin.run = run
        twin.made, twin.store = run.twin(self.made, self.store)
        twin.pc, twin.held, twin.holder, twin.sent = dict(self.pc), dict(self.held), dict(self.holder), dict(self.sent)
        return twin

    def fingerprint(self) -> Any:
        return (
            tuple(self.pc.items()),
            tuple(sorted(self.held.items())),
            tuple(sorted(self.sent.items())),
            self.newest,
            picture(self.made, self.store),
        )

    def broken(self) -> str | None:
        return self.problem

    def finished(self) -> str | None:
        return None

    def crashed(self, actor: str) -> None:
        pass

    def _claim(self, run: Run) -> str:
        who = run.current_actor
        self.pc[who] += 1
        called = run.call(self.store.claim, JOB, who)
        token = called.value
        if called.error is not None:
            self.problem = f"{who}'s claim of {JOB} raised {error_text(called.error)}: claim must hand out a token."
            return f"{who} claims {JOB}: {error_text(called.error)}"
        if type(token) is not int or token <= self.newest:
            self.problem = (
                f"{who}'s claim of {JOB} returned {describe(token)}, after token {self.newest} had been "
                "issued: each claim must return a whole number above every earlier token."
            )
            return f"{who} claims {JOB}: {describe(token)}"
        self.newest = self.held[who] = token
        self.holder[token] = who
        return f"{who} claims {JOB}: token {token}"

    def _write(self, run: Run) -> str:
        who = run.current_actor
        self.pc[who] += 1
        self.sent[who] = self.held[who]
        return self._judge(run, who, self.held[who])

    def _again(self, run: Run) -> str:
        who = run.current_actor
        token = self.sent.pop(who)
        return self._judge(run, who, token, again=True)

    def _judge(self, run: Run, who: str, token: int, *, again: bool = False) -> str:
        """The write arrives; the store's answer must follow the token alone. What the store
        holds is read just before and just after it, with the write, in one message (this
        world has no faults, so the write needs no `run.call` of its own)."""
        result = {"decision": f"by {who}", "token": token}
        write = ("complete", (JOB, result), {"token": token, "worker_id": who})
        kept_before, outcome, kept_after = around(self.made, self.store, write, *_KEPT)
        called = Called(*outcome)
        before, after = canonical(tuple(kept_before)), canonical(tuple(kept_after))
        what = f"{who}'s {'late copy of its ' if again else ''}write with token {token}"
        current = token == self.newest and token > 0
        if self._delegates():
            self.problem = _DELEGATES
            return f"{what}: decided by the kit's TokenFence"
        if called.error is None:
            said = f"{what}: accepted"
            if not current:
                self.problem = f"the store accepted {what}, {self._stale(token)}. Refuse every token but the newest."
            elif (held := kept_after[0]) != result:
                self.problem = f"the store accepted {what} but holds {describe(held)}: an accepted write is stored."
            return said
        said = f"{what}: refused ({type(called.error).__name__})"
        if current:
            self.problem = (
                f"the store refused {what}, the newest token, with {type(called.error).__name__}: only "
                "tokens other than the current one may be refused."
            )
        elif not isinstance(called.error, StaleTokenError):
            self.problem = (
                f"the store refused {what} with {type(called.error).__name__}, not StaleTokenError: "
                "raise StaleTokenError so the caller knows it lost ownership."
            )
        elif not self._names_both(called.error, token):
            newest = self.newest or None  # None before any claim, as current_token() says
            self.problem = (
                f"the store refused {what}, but its StaleTokenError said token="
                f"{called.error.token!r}, current={called.error.current!r}; it should say which "
                f"token the write carried and which one is current (token={token}, "
                f"current={newest}{', as current_token() says before any claim' if not newest else ''})."
            )
        elif after != before:
            self.problem = (
                f"the store refused {what}, but it now holds "
                f"{describe(kept_after[0])}: a refused write must change "
                "nothing. Decide before you write."
            )
        return said

    def _names_both(self, error: StaleTokenError, token: int) -> bool:
        """Does the refusal carry the write's token and the current one? Before any claim no
        token is current: None (what current_token() returns) or 0 both say so."""
        current = error.current
        if type(error.token) is not int or error.token != token:
            return False
        if self.newest == 0:
            return current is None or (type(current) is int and current == 0)
        return type(current) is int and current == self.newest

    def _delegates(self) -> bool:
        """Does the learner's store keep a TokenFence (the kit's own fencing rule) to decide for it?
        (A store in the learner's process is asked by watching the fence's code run: see `_run`.)"""
        if self.foreign:
            return False
        kept = [*vars(self.store).values(), *vars(type(self.store)).values()]
        return any(isinstance(value, TokenFence) for value in kept)

    def _stale(self, token: int) -> str:
        if self.newest == 0:
            return f"a token it never issued (nobody has claimed {JOB})"
        if token > self.newest or token < 1:
            return f"a token it never issued (the newest is {self.newest})"
        return (
            f"while token {self.newest} ({self.holder[self.newest]}'s claim) is the newest: a token older than "
            "the newest belongs to a claim that is over, whoever sends it and whatever is stored"
        )


# What the store holds for the job and who wrote it, read by the kit's own methods (the
# learner's class may override them to show something else), where the store lives.
_KEPT = ((NaiveResultStore.result, (JOB,)), (NaiveResultStore.written_by, (JOB,)))
_DELEGATES = (
    "the store hands the decision to the kit's TokenFence, which already implements this rule: compare "
    "the tokens in complete() yourself."
)
_FENCE = (TokenFence.__init__, TokenFence.claim, TokenFence.observe, TokenFence.current, TokenFence.check)


def scenario() -> Scenario:
    return Scenario(name="fenced store", bound=BOUND, start=_Fencing)


def ahead_scenario() -> Scenario:
    """A write under a token above every one issued (99), next to one claim."""
    return Scenario(name="a token from nowhere", bound=AHEAD_BOUND, start=lambda run: _Fencing(run, AHEAD))


def replay(store_class, schedule: str) -> Replayed:
    """Play one schedule (as the check's message writes it) on a fresh store of `store_class`:
    print it for the steps, or call .diagram() for the picture. A schedule with Y in it is
    one of the small search of a token above every one issued."""
    ahead = isinstance(schedule, str) and any(part.strip().startswith("Y ") for part in schedule.split("·"))
    return replay_schedule(ahead_scenario() if ahead else scenario(), store_class, schedule)


def _run(store_class) -> str:
    if not issubclass(store_class, NaiveResultStore):
        raise Wrong(
            f"{store_class.__name__} is not a subclass of NaiveResultStore: write "
            "class FencedResultStore(NaiveResultStore) and override complete(...)."
        )
    foreign = isinstance(store_class, ForeignAnswer)  # in the learner's process: watch the fence's own code run
    watch: contextlib.AbstractContextManager[set[str]] = (
        watching(store_class, *_FENCE) if foreign else contextlib.nullcontext(set())
    )
    with watch as fenced:
        found = explore(scenario(), store_class)
        ahead = explore(ahead_scenario(), store_class) if found.counterexample is None else None
    if fenced:  # said first, as the notebook says it at the first write
        raise Wrong(_DELEGATES)
    line = f'lab04.replay({named(store_class, "FencedResultStore")}, "{{schedule}}")'
    refuse(found, line)
    assert ahead is not None
    refuse(ahead, line)
    return (
        f"{found.summary}, and all {ahead.schedules} of {AHEAD_BOUND.words}: the store accepted exactly the "
        "writes under the newest token, refused every other with StaleTokenError naming both tokens, and "
        "changed nothing when it refused."
    )


exercise = Exercise(
    id="04.1",
    title="fence the result store",
    answer="FencedResultStore",
    run=_run,
    wants_class=True,
    hints=(
        "Which part of the system knows the newest token for a job? That is where the check must live.",
        "self.current_token(job_id) gives the newest token; StaleTokenError(what=..., token=..., current=...) "
        "is the error to raise; super().complete(...) does the actual write.",
        "Only one token may write: the newest the store has issued for that job. Anything else, older or never "
        "issued (before any claim there is none), is refused with the error that names both tokens, before anything "
        "is stored; the newest goes through to the store as before.",
    ),
)


# ------------------------------------------------------------------ knowledge check
# The labels `rejecting_control()` may return, one per control in the story.
CONTROLS = ("worker_lease_check", "lease_expiry", "store_token_check", "idempotency_key")


def _control(rejecting_control) -> str:
    label = plain(call_answer(rejecting_control))  # a str look-alike is judged by the text it holds
    if not isinstance(label, str) or label not in CONTROLS:
        raise Wrong(
            f"rejecting_control() returned {describe(label)}; return one of the labels in lab04.CONTROLS: "
            f"{', '.join(CONTROLS)}."
        )
    why_not = answers.load("lab04").WHY_NOT  # loaded to judge, never with the module
    if label in why_not:
        raise Wrong(f"{label!r} does not reject the stale completion: {why_not[label]}")
    return (
        "the authoritative store compares the stale worker's token 4 with its current token 5 at the moment "
        "of the write and refuses it, whatever the worker believes."
    )


knowledge = Exercise(
    id="04.2",
    title="which control rejects the stale completion",
    answer="rejecting_control",
    run=_control,
    hints=(
        "Ask of each control: where does it run, and does it run at the moment the stale write arrives?",
        "A paused worker checks nothing while it is paused, and a check inside the worker cannot help once it "
        "has woken up and decided to write: look for a check made by whoever receives the write.",
    ),
)


# Its quizzes (the right option and every explanation) are kept with the answer keys, loaded on
# first use (`checks.answers`): importing this module loads none of them.
__getattr__ = answers.lazy("lab04", ("PAYMENT_GUARD_QUIZ",))
