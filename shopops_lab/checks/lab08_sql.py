"""Lab 08, exercises 08.2 and 08.3: the claim, written in SQL, judged by real worker processes.

The learner writes `claim_sqlite(db, worker_id, now, lease_seconds)` and
`claim_postgres(db, worker_id, now, lease_seconds)`: take one item of the `queue` table (the
first by id that is ready, or whose lease ran out by `now`), lease it to `worker_id` until
`now + lease_seconds` under a token one larger than the row's, and return `(item_id, token)`,
or None when nothing can be taken. `db.execute(sql, params)` runs one statement and returns
its rows (`shopops_lab.chaos.claims`).

The check runs the claim in worker processes, each with its own connection, and plays every
order of their statements within a small bound (`BOUND`), one statement at a time, the
database deciding what each one sees and when one must wait for a lock:

* two claimers, one ready item and one whose lease ran out (beside a finished item and a
  live lease), every interleaving of their statements;
* a stale writer: the ready item's lease ran out (W0, token 1), and W0's late completion
  (`UPDATE … WHERE id = … AND token = 1`) comes before, between or after the claim's statements;
* a kill: the claimer is SIGKILLed after each of its statements, and a second one then claims.

It judges what the claims returned and what the table holds, never the SQL's spelling: one
claimer per item, a token raised by one, the row saying what the claim returned, an
expired lease taken, a finished item or a live lease never taken, a stale completion
refused once the item was claimed again, and no claim left failing or holding its
transaction. PostgreSQL runs where `SHOPOPS_POSTGRES_URL` names a server (and psycopg is
installed); elsewhere 08.3 says it was not judged. `replay_claim` plays one schedule, and
`race` runs the lab's demonstration of a claim that reads without a lock.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from shopops_lab.chaos.claims import Bench, Plan, Played, Row
from shopops_lab.chaos.steps import StepsError
from shopops_lab.checks.base import Exercise, NotAttempted, NotJudged, Wrong, describe, is_stub, named

__all__ = ["BOUND", "postgres_available", "postgres_claim", "race", "replay_claim", "sqlite_claim"]

NOW, LEASE = 100.0, 30.0
READY = Row("item-0001", "ready", None, 0, None)
DONE = Row("item-0002", "done", "W8", 1, None)
LIVE = Row("item-0003", "leased", "W9", 1, 200.0)  # its lease runs to t=200: not to be taken at t=100
RAN_OUT = Row("item-0001", "leased", "W0", 1, 90.0)  # W0's lease ran out at t=90
EXPIRED = Row("item-0004", "leased", "W0", 1, 90.0)  # beside the ready one: a second item to claim
BOUND = (
    "two claimers, one ready item and one whose lease ran out (beside a finished item and a live lease), every "
    "order of their statements; a stale writer (W0, whose lease ran out) completing before, between or after a claim's "
    "statements; and a claimer SIGKILLed after each of its statements, another claiming after it"
)
_URL = "SHOPOPS_POSTGRES_URL"


def _complete_stale(db: Any, worker_id: str, now: float, lease_seconds: float) -> Any:
    """W0's late completion, the kit's: fenced by its token, 1."""
    placeholder = "?" if "sqlite" in repr(db) else "%s"
    rows = db.execute(
        f"UPDATE queue SET state = 'done' WHERE id = {placeholder} AND token = {placeholder} RETURNING id",
        ("item-0001", 1),
    )
    return bool(rows)


@dataclass(frozen=True)
class _Scope:
    """One of the bound's three searches: its name in a schedule, its rows and its workers."""

    name: str
    rows: tuple[Row, ...]


TWO = _Scope("two claimers", (READY, DONE, LIVE, EXPIRED))
STALE = _Scope("a stale writer", (RAN_OUT, DONE, LIVE))
KILL = _Scope("a kill", (READY, DONE, LIVE))


def postgres_available() -> bool:
    """Can 08.3 run here: a server named by SHOPOPS_POSTGRES_URL, and psycopg to reach it?"""
    if not os.environ.get(_URL):
        return False
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def _bench(dialect: str) -> Iterator[Bench]:
    """A fresh database for one check: an SQLite file in a folder of its own, or a schema of its
    own on the PostgreSQL server (dropped afterwards)."""
    if dialect == "sqlite":
        folder = tempfile.mkdtemp(prefix="shopops-claim-")
        try:
            with Bench("sqlite", os.path.join(folder, "queue.db"), now=NOW, lease=LEASE) as bench:
                yield bench
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        return
    import psycopg

    url = os.environ[_URL]
    schema = f"shopops_claim_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {schema}")
    try:
        joined = "&" if "?" in url else "?"
        with Bench("postgresql", f"{url}{joined}options=-csearch_path%3D{schema}", now=NOW, lease=LEASE) as bench:
            yield bench
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


def _orders(bench: Bench, plan: Plan) -> Iterator[Played]:
    """Every order in which the plan's workers can take their steps, each played on the plan's
    rows (stateless: a run is replayed from the start for each order)."""
    stack = [plan.choices]
    while stack:
        prefix = stack.pop()
        played = bench.play(Plan(plan.rows, plan.actors, prefix, plan.kill, plan.kill_after))
        yield played
        for i in range(len(prefix), len(played.choices)):
            options, chosen = played.options[i], played.choices[i]
            stack.extend(tuple(played.choices[:i]) + (alt,) for alt in options[options.index(chosen) + 1 :])


def _searches(bench: Bench, claim: Callable[..., Any]) -> Iterator[tuple[_Scope, Played]]:
    """The bound, search by search: every order of two claimers, every order of a claim beside
    the stale writer, then a kill after each statement the claim runs."""
    two = (("P1", claim), ("P2", claim))
    for played in _orders(bench, Plan(TWO.rows, two)):
        yield TWO, played
    for played in _orders(bench, Plan(STALE.rows, (("P1", claim), ("W0", _complete_stale)))):
        yield STALE, played
    alone = bench.play(Plan(KILL.rows, (("P1", claim),)))
    steps = alone.outcomes["P1"]
    statements = len([s for s in alone.steps if not s.what.startswith("COMMIT (the kit")])
    if steps.returned or steps.error:
        for after in range(1, statements + (bench.dialect == "postgresql")):
            plan = Plan(KILL.rows, two, ("P1",) * (after + 1), kill="P1", kill_after=after)
            yield KILL, bench.play(plan)


def _judge(scope: _Scope, played: Played) -> str | None:
    """What broke in this run, decisive fact first; None if nothing did."""
    before = {row.id: row for row in scope.rows}
    claims: dict[str, tuple[str, int]] = {}
    for who, outcome in sorted(played.outcomes.items()):
        if who == "W0" or outcome.killed:
            continue
        if outcome.error is not None:
            return f"{who}'s claim raised {outcome.error}.{_why_it_failed(outcome.error)}"
        if outcome.open:
            return (
                f"{who}'s claim returned with its transaction still open: it holds the database's write lock, so "
                "no other worker can claim anything until it commits. End the transaction before you return."
            )
        value = outcome.value
        if value is None:
            continue
        if (
            not isinstance(value, (tuple, list))
            or len(value) != 2
            or not isinstance(value[0], str)
            or type(value[1]) is not int
        ):
            return f"{who}'s claim returned {describe(value)}: return (item_id, token), or None when nothing was taken."
        claims[who] = (value[0], value[1])
    taken: dict[str, str] = {}
    for who, (item, _) in claims.items():
        if item in taken:
            first, second = sorted((taken[item], who), key=lambda w: (claims[w][1], _first_step(played, w)))
            tokens = f"tokens {claims[first][1]} and {claims[second][1]}"
            if _first_step(played, second) < _last_step(played, first):  # it started before the other had finished
                return (
                    f"{first} and {second} both claimed {item} ({tokens}): {second}'s claim picked the row before "
                    f"{first}'s claim had committed, and nothing made it keep off or look again. A claim must read "
                    "the row under a lock that keeps every other claim off it until it commits."
                )
            return (
                f"{second} claimed {item} under token {claims[second][1]} while {first}'s claim of it (token "
                f"{claims[first][1]}, until t={NOW + LEASE:g}) was live: a claim takes ready items and items whose "
                "lease ran out, never a live lease."
            )
        taken[item] = who
    for who, (item, token) in claims.items():
        row, was = played.rows.get(item), before.get(item)
        if was is None or row is None:
            return f"{who}'s claim returned {item!r}, which is not an item of the queue."
        if was.state == "done":
            return f"{who} claimed {item}, which was done: a claim takes ready items, and items whose lease ran out."
        if was.state == "leased" and was.expires_at is not None and was.expires_at > NOW:
            return (
                f"{who} claimed {item}, whose lease ({was.worker_id}, token {was.token}) ran until "
                f"t={was.expires_at:g}, past now (t={NOW:g}): a live lease is not to be taken."
            )
        if token != was.token + 1:
            return (
                f"{who}'s claim of {item} returned token {token}, but the token was {was.token} before it: a claim "
                f"raises the token by one ({was.token + 1}), so every write under an older one is refused."
            )
        if (row.state, row.worker_id, row.token) != ("leased", who, token):
            return (
                f"{who}'s claim returned ({item!r}, {token}), but the table says {item} is {row.state}"
                + (f", held by {row.worker_id} under token {row.token}" if row.worker_id else "")
                + ": the claim must leave the row saying what it returned (did it commit?)."
            )
        if row.expires_at != NOW + LEASE:
            return (
                f"{who}'s claim of {item} leased it until t={row.expires_at}, not until now + lease_seconds "
                f"(t={NOW + LEASE:g})."
            )
    if scope is STALE:
        stale = played.outcomes.get("W0")
        accepted = stale is not None and stale.returned and stale.value is True
        if accepted and "P1" in claims:
            return "W0, whose lease had run out, completed item-0001 under token 1, and P1 claimed it too: " + (
                "P1's claim left the token at 1, so W0's stale write still matched it."
                if claims["P1"][1] == 1
                else "P1's claim and W0's completion both went through."
            )
        if not accepted and "P1" not in claims:
            return (
                "item-0001's lease had run out (W0, token 1, at t=90), and W0's late completion was refused, yet "
                "P1 claimed nothing: a claim takes ready items and items whose lease ran out."
            )
        return None
    if scope is KILL:
        left = played.rows["item-0001"]
        if left.state == "ready" or ("P2" not in claims and left.worker_id != "P1"):
            return (
                f"P1 was killed after {played.killed_after.get('P1', 0)} statement(s), and then P2 claimed nothing, "
                f"though item-0001 was {left.state}: a claim that dies before it commits must leave nothing behind."
            )
        return None
    for item in ("item-0001", "item-0004"):
        idle = [who for who in ("P1", "P2") if who not in claims and not played.outcomes[who].killed]
        if item not in taken and idle:
            was = before[item]
            why = "it was ready" if was.state == "ready" else f"its lease ({was.worker_id}, token 1) ran out at t=90"
            return (
                f"{idle[0]} claimed nothing, though {item} could be taken ({why}): a claim takes ready items and "
                "items whose lease ran out."
            )
    return None


def _first_step(played: Played, who: str) -> int:
    return next((n for n, step in enumerate(played.steps) if step.actor == who), len(played.steps))


def _last_step(played: Played, who: str) -> int:
    return max((n for n, step in enumerate(played.steps) if step.actor == who), default=-1)


def _why_it_failed(error: str) -> str:
    if "locked" in error or "busy" in error:
        return (
            " Its transaction read the table first and asked for the write lock only after another worker had "
            "written: SQLite cannot let it wait its way out (what it read is already stale), so it fails. Take "
            "the write lock before you read, or claim in one statement."
        )
    if "deadlock" in error.lower():
        return " Two claims each held a row the other wanted: lock the row you take before anything else."
    return ""


def _words(scope: _Scope, played: Played) -> str:
    """The schedule as the check names it: its search, then who stepped, in order."""
    if scope is KILL:
        return f"{scope.name}: P1 killed after {played.killed_after.get('P1', 0)}"
    return f"{scope.name}: {' '.join(played.choices)}"


def _story(played: Played) -> list[str]:
    lines = [f"{n}. {step}" for n, step in enumerate(played.steps, 1)]
    for who, outcome in sorted(played.outcomes.items()):
        if outcome.killed:
            continue
        what = (
            f"raised {outcome.error}"
            if outcome.error
            else f"returned {outcome.value!r}"
            if who != "W0"
            else f"completed item-0001: {'accepted' if outcome.value else 'refused, no row matched'}"
        )
        still = " (with its transaction still open: rolled back)" if outcome.open else ""
        lines.append(f"   {who}'s {'claim' if who != 'W0' else 'late completion'} {what}{still}")
    return lines


def _run(claim: Any, dialect: str, name: str) -> str:
    if is_stub(claim):
        raise NotAttempted()
    counts = {TWO.name: 0, STALE.name: 0, KILL.name: 0}
    try:
        with _bench(dialect) as bench:
            for scope, played in _searches(bench, claim):
                counts[scope.name] += 1
                problem = _judge(scope, played)
                if problem:
                    words = _words(scope, played)
                    raise Wrong(
                        f"{problem} The schedule: {words}. Replay it: "
                        f"print(lab08.replay_claim({named(claim, name)}, {words!r}, database={dialect!r}))",
                        _story(played),
                    )
    except StepsError as void:
        raise NotJudged(f"this run is void, so nothing was judged: {void}") from None
    where = "SQLite (one file, WAL)" if dialect == "sqlite" else "PostgreSQL (READ COMMITTED)"
    kills = counts[KILL.name]
    return (
        f"checked on {where}, in real worker processes, all {counts[TWO.name]} orders of two claimers' statements, "
        f"all {counts[STALE.name]} of a claim beside a stale writer, and {kills} SIGKILL{'s' if kills != 1 else ''} "
        "of a claim between its statements: one claimer per item, each token raised by one, an expired lease "
        "taken and a live one left alone, the stale write refused once the item was claimed again, and nothing "
        "left locked or failing."
    )


def _sqlite(claim_sqlite: Any) -> str:
    if sys.platform == "emscripten" or not hasattr(os, "fork"):
        raise NotJudged(_NO_PROCESSES)
    return _run(claim_sqlite, "sqlite", "claim_sqlite")


def _postgres(claim_postgres: Any) -> str:
    if sys.platform == "emscripten" or not hasattr(os, "fork"):
        raise NotJudged(_NO_PROCESSES)
    if is_stub(claim_postgres):
        raise NotAttempted()
    if not postgres_available():
        raise NotJudged(
            "this check needs a PostgreSQL server: set SHOPOPS_POSTGRES_URL to one (a throwaway one: sh "
            "scripts/postgres.sh start /tmp/pg) and install psycopg (pip install 'psycopg[binary]'), then run it "
            "again. Nothing was judged here."
        )
    return _run(claim_postgres, "postgresql", "claim_postgres")


_NO_PROCESSES = (
    "this check needs real processes: run it in JupyterLab (your machine, JupyterHub or Binder). A browser-only "
    "notebook (JupyterLite) cannot start them, so nothing was judged here."
)


def replay_claim(claim: Any, schedule: str, database: str = "sqlite") -> str:
    """The story of one schedule the check plays (as its message names it): each statement, in
    the order the workers ran them, what it gave back, and what each claim returned."""
    scope = next((s for s in (TWO, STALE, KILL) if isinstance(schedule, str) and schedule.startswith(s.name)), None)
    if scope is None or ":" not in schedule:
        return "name a schedule as the check writes it, e.g. 'two claimers: P1 P2 P1 P2'."
    if database not in ("sqlite", "postgresql"):
        return "database is 'sqlite' or 'postgresql'."
    if database == "postgresql" and not postgres_available():
        return "this replay needs a PostgreSQL server: set SHOPOPS_POSTGRES_URL (see the check's message)."
    moves = schedule.split(":", 1)[1].split()
    with _bench(database) as bench:
        if scope is KILL:
            after = int(moves[-1]) if moves and moves[-1].isdigit() else 1
            plan = Plan(scope.rows, (("P1", claim), ("P2", claim)), ("P1",) * (after + 1), kill="P1", kill_after=after)
        else:
            other = ("W0", _complete_stale) if scope is STALE else ("P2", claim)
            plan = Plan(scope.rows, (("P1", claim), other), tuple(moves))
        played = bench.play(plan)
    problem = _judge(scope, played)
    return "\n".join([*_story(played), f"broken: {problem}" if problem else "nothing broken."])


def race(claim: Callable[..., Any], database: str = "sqlite", schedule: str = "P1 P2 P1 P2") -> str:
    """Two workers run `claim` on one ready item, their statements in the order `schedule` says:
    each statement, what each claim returned, and what the table holds after."""
    with _bench(database) as bench:
        played = bench.play(Plan((READY,), (("P1", claim), ("P2", claim)), tuple(schedule.split())))
    row = played.rows["item-0001"]
    return "\n".join(
        [*_story(played), f"   the table: item-0001 {row.state}, held by {row.worker_id} under token {row.token}"]
    )


def frozen_holder(claim: Callable[..., Any], database: str = "sqlite") -> str:
    """A worker that holds the lock and then stops answering (frozen, or on a machine that died
    without closing its connection) keeps its lock: the next claim waits. SIGKILLed on a live
    machine, its connection closes, and the lock goes at once."""
    with _bench(database) as bench:
        played = bench.play(Plan((READY,), (("P1", claim), ("P2", claim)), ("P1", "P2", "P1"), "P1", 1))
    if "P1" not in played.killed_after:  # it was done before it could stand still holding the lock
        return (
            "your claim takes the lock and lets it go within one statement: there is no moment in between for a "
            "worker to freeze in while it holds the lock."
        )
    return "\n".join(_story(played))


sqlite_claim = Exercise(
    id="08.2",
    title="the claim in SQL, on SQLite",
    answer="claim_sqlite",
    run=_sqlite,
    hints=(
        "Two workers run your statements at the same time, one statement each in turn. Between your read "
        "of the row and your write to it, what stops the other worker from reading the same row?",
        "On SQLite, db.execute('BEGIN IMMEDIATE') takes the database's write lock at once, and a second "
        "BEGIN IMMEDIATE waits for it; 'COMMIT' releases it. UPDATE … RETURNING gives back the rows it "
        "changed, and a subquery in its WHERE can pick the row. The claimable rows: state 'ready', or "
        "'leased' with expires_at <= now.",
        "Take the lock before you look, then pick and lease the row in one write that also raises its token, "
        "and hand back what that write returned; commit before you return. Nothing in between may let "
        "another claim read the row.",
    ),
)

postgres_claim = Exercise(
    id="08.3",
    title="the claim in SQL, on PostgreSQL",
    answer="claim_postgres",
    run=_postgres,
    hints=(
        "At READ COMMITTED, a plain SELECT locks nothing: two workers can read the same free row before "
        "either writes. What must the read do so that a second claim passes that row by?",
        "SELECT … FOR UPDATE locks the rows it returns until your transaction ends; adding SKIP LOCKED makes "
        "another claim pass a locked row by instead of waiting for it. Your claim runs in one transaction, "
        "committed when it returns. Use %s for parameters.",
        "Read the first claimable row with a lock that makes other claims skip it, then lease that row and "
        "raise its token in a write that returns what it wrote; return None when the read found nothing.",
    ),
)
