"""A claim written in SQL, played one statement at a time by real worker processes.

Lab 08's exercises 08.2 and 08.3: the learner writes `claim(db, worker_id, now, lease_seconds)`,
which takes one item of the `queue` table (a ready one, or one whose lease ran out) and returns
`(item_id, token)`, or None. Each worker process opens its own connection to the database and
runs the claim with a `Db` whose `execute(sql, params)` stops before every statement and goes
on only when the supervisor says so. So the supervisor decides the order in which two workers'
statements reach the database, statement by statement, on SQLite or PostgreSQL, and the
database itself (its locks, its isolation) decides what each one sees.

A statement that must wait for a lock another worker holds is seen to wait: on SQLite the
worker's connection does not wait (`busy_timeout` 0), it reports the lock and tries the
statement again when told (what SQLite's own busy handler does, one try at a time); on
PostgreSQL the statement waits inside the server, and the supervisor asks the server who
blocks it (`pg_blocking_pids`). When every worker left waits for another, the one that
waited longest gets the error a busy timeout (SQLite) or the deadlock detector (PostgreSQL)
would give it. On SQLite a claim runs in autocommit: it opens its own transaction if it
wants one (`BEGIN IMMEDIATE` … `COMMIT`); on PostgreSQL, as psycopg does by default, the
claim runs in one transaction that begins with its first statement and commits when the
claim returns (the commit is a step of its own).

`Bench` holds the worker processes of one check on one database and plays a `Plan`: who
steps when, and whom to SIGKILL where. Nothing here judges: the check does.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shopops_lab.chaos.steps import StepsError
from shopops_lab.chaos.worker import fork_worker
from shopops_lab.checks.base import NotAttempted, call_answer, error_text
from shopops_lab.checks.sealed import behind, seal

if TYPE_CHECKING:
    from multiprocessing.connection import Connection

__all__ = ["Bench", "Db", "Outcome", "Plan", "Row", "Step"]

TABLE = "queue"
SCHEMA = (
    f"CREATE TABLE {TABLE} (id TEXT PRIMARY KEY, state TEXT NOT NULL, worker_id TEXT, "
    "token INTEGER NOT NULL DEFAULT 0, expires_at DOUBLE PRECISION)"
)
MAX_STATEMENTS = 6  # a claim that runs more is stopped there: "more statements than a claim needs"
PATIENCE = 30.0  # seconds a worker may stay silent (not waiting on a lock) before the run is void
_WAIT_SLICE = 0.002  # how often the supervisor looks at a PostgreSQL statement that has not answered


@dataclass(frozen=True, slots=True)
class Row:
    """One row of the queue table, as the supervisor reads it."""

    id: str
    state: str
    worker_id: str | None
    token: int
    expires_at: float | None


@dataclass(frozen=True, slots=True)
class Step:
    """What one step did, in words: `actor` ran `what`, and `said` what came of it."""

    actor: str
    what: str
    said: str = ""

    def __str__(self) -> str:
        return f"{self.actor}: {self.what}" + (f" -> {self.said}" if self.said else "")


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a worker's claim ended: it returned `value`, or raised (`error`), or was killed;
    `open` when it returned on SQLite with its transaction still open (rolled back here)."""

    returned: bool = False
    value: Any = None
    error: str | None = None
    killed: bool = False
    open: bool = False


@dataclass(frozen=True)
class Plan:
    """One run: the rows the table starts with, the workers with what each runs (its name ->
    a function of the learner's, or of the kit's), the order in which they step (`choices`,
    extended by the first worker able to step when it runs out), and, if any, the worker
    killed (SIGKILL) once it has run `kill_after` statements."""

    rows: tuple[Row, ...]
    actors: tuple[tuple[str, Callable[..., Any]], ...]
    choices: tuple[str, ...] = ()
    kill: str | None = None
    kill_after: int = 0


@dataclass
class Played:
    """What a run did: each step in order, each worker's outcome, the table at the end, the
    choices it made, and the workers that could step at each choice (for the explorer)."""

    steps: list[Step] = field(default_factory=list)
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    rows: dict[str, Row] = field(default_factory=dict)
    choices: list[str] = field(default_factory=list)
    options: list[tuple[str, ...]] = field(default_factory=list)
    killed_after: dict[str, int] = field(default_factory=dict)  # who -> the statements it had run


class Db:
    """What a claim gets: `execute(sql, params=())` runs one SQL statement on this worker's own
    connection and returns the rows it gave back (a list of tuples; [] for none). Parameters
    as the database's driver writes them: `?` on SQLite, `%s` on PostgreSQL."""

    __slots__ = ("__weakref__",)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return behind(self).execute(sql, params)

    def __repr__(self) -> str:
        return f"<db: {behind(self).dialect}, execute(sql, params)>"


# ------------------------------------------------------------------ the worker's side
class _Worker:
    """A worker process's connection and its line to the supervisor. What it tells: ("at", n,
    words) when it stands before step n (a statement, or the commit); after "go": ("did", n,
    result), ("error", n, error) or, on SQLite, ("waits", n, lock); ("end", n, Outcome) when the
    claim is over; ("stub", n, "") when the learner's stub raised NotImplementedError."""

    def __init__(self, dialect: str, url: str, pipe: Connection) -> None:
        self.dialect, self.pipe = dialect, pipe
        self.statements = 0
        if dialect == "sqlite":
            import sqlite3

            self.conn: Any = sqlite3.connect(url, isolation_level=None, timeout=0)
            self.busy: tuple[type[BaseException], ...] = (sqlite3.OperationalError,)
            self.backend = 0
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=False)
            self.busy = ()
            # A session lock on its own pid, held until the server has ended this session (after
            # rolling back its transaction): the supervisor waits on it after a SIGKILL (`_gone`).
            self.backend = int(
                self.conn.execute("SELECT pg_backend_pid(), pg_advisory_lock(pg_backend_pid())").fetchone()[0]
            )
            self.conn.rollback()

    def execute(self, sql: str, params: Sequence[Any]) -> list[tuple[Any, ...]]:
        if not isinstance(sql, str):
            raise TypeError(f"execute() takes the SQL statement as a str, not {type(sql).__name__}")
        if self.statements >= MAX_STATEMENTS:
            raise RuntimeError(f"this claim ran more than {MAX_STATEMENTS} statements: a claim needs far fewer")
        self.statements += 1
        self._stop(_words(sql))
        while True:
            try:
                cursor = self.conn.execute(sql, tuple(params))
                answered = cursor.description is not None  # a statement that gives rows back (a SELECT, a RETURNING)
                rows = [tuple(row) for row in cursor.fetchall()] if answered else []
            except self.busy as error:  # SQLite: a lock another worker holds
                if "locked" not in str(error) and "busy" not in str(error):
                    self._tell("error", error_text(error))
                    raise
                self._tell("waits", str(error))
                if self._wait() == "fail":  # every worker waits for another: the busy timeout runs out
                    self._tell("error", error_text(error))
                    raise
                continue
            except Exception as error:
                self._tell("error", error_text(error))
                raise
            self._tell("did", _rows(rows) if answered else "done")
            return rows

    def _stop(self, words: str) -> None:
        self._tell("at", words)
        if self._wait() != "go":
            os._exit(3)

    def _tell(self, kind: str, words: Any) -> None:
        self.pipe.send((kind, self.statements, words))

    def _wait(self) -> str:
        word: str = self.pipe.recv()
        return word

    def claim(self, claim: Callable[..., Any], name: str, now: float, lease: float) -> Outcome:
        """Run `claim` once, from its first statement to its commit (PostgreSQL) or its return."""
        self.statements = 0
        db = seal(Db(), self)
        try:
            value = call_answer(claim, db, name, now, lease)
        except NotAttempted:
            self._rollback()
            raise
        except BaseException as error:  # noqa: BLE001 - the learner's code failed: that is the outcome
            self._rollback()
            return Outcome(error=error_text(error))
        if self.dialect == "postgresql":
            if self.conn.info.transaction_status != 0:  # 0: idle, nothing open
                self._stop(COMMIT)
                try:
                    self.conn.commit()
                except Exception as error:  # noqa: BLE001 - a deadlock, a serialization failure: the outcome
                    self._tell("error", error_text(error))
                    self._rollback()
                    return Outcome(error=error_text(error))
                self._tell("did", "committed")
            return Outcome(returned=True, value=value)
        left_open = bool(self.conn.in_transaction)
        self._rollback()
        return Outcome(returned=True, value=value, open=left_open)

    def _rollback(self) -> None:
        """Whatever is still open is rolled back: the next run starts clean."""
        try:
            self.conn.rollback()
        except Exception:  # noqa: BLE001, S110 - nothing was open
            pass


COMMIT = "COMMIT (the kit's, as the claim returns)"


def _life(dialect: str, url: str, claim: Callable[..., Any], name: str, pipe: Connection) -> None:
    """A worker process: connect, say ready, then one claim per word until told to exit."""
    sys.stdout = sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the parent's streams are not ours
    try:
        worker = _Worker(dialect, url, pipe)
    except BaseException as error:  # noqa: BLE001 - told to the supervisor, which voids the run
        pipe.send(("failed", 0, error_text(error)))
        return
    pipe.send(("ready", worker.backend, ""))
    while True:
        word = pipe.recv()
        if word[0] != "claim":
            os._exit(0)
        try:
            outcome = worker.claim(claim, name, word[1], word[2])
        except NotAttempted:
            pipe.send(("stub", worker.statements, ""))
            continue
        pipe.send(("end", worker.statements, outcome))


# ------------------------------------------------------------------ the supervisor's side
@dataclass
class _Actor:
    """A worker in a run: where it stands, before what, and how many statements it has run."""

    state: str = "at"  # "at": stopped before a step; "tried": a SQLite statement that waits, tried
    # since the last change; "waits": one that may try again; "blocked": a PostgreSQL statement
    # waiting in the server; "done"
    before: str = ""
    ran: int = 0


class Bench:
    """The worker processes of one check on one database (`url` as the driver takes it: a
    file path for SQLite, a conninfo URL for PostgreSQL), and the supervisor's own connection.
    `play(plan)` resets the table to the plan's rows and plays it."""

    def __init__(self, dialect: str, url: str, *, now: float, lease: float) -> None:
        self.dialect, self.url, self.now, self.lease = dialect, url, now, lease
        self.procs: dict[str, tuple[int, Connection, int, Callable[..., Any]]] = {}  # name -> pid, pipe, backend, fn
        if dialect == "sqlite":
            import sqlite3

            self.conn: Any = sqlite3.connect(url, isolation_level=None)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=OFF")
        else:
            import psycopg

            self.conn = psycopg.connect(url, autocommit=True)
            self.conn.execute(f"SET lock_timeout = {int(PATIENCE * 1000)}")
        self.conn.execute(SCHEMA)

    def close(self) -> None:
        for name in list(self.procs):
            self._kill(name)
        self.conn.close()

    def __enter__(self) -> Bench:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- one run
    def play(self, plan: Plan) -> Played:
        self._reset(plan.rows)
        played = Played()
        actors: dict[str, _Actor] = {}
        for name, function in plan.actors:
            self._ensure(name, function)
            self.procs[name][1].send(("claim", self.now, self.lease))
            actors[name] = _Actor()
            self._next(name, self._read(name), actors, played)
        while True:
            able = tuple(name for name, actor in actors.items() if actor.state in ("at", "waits"))
            if not able:
                stuck = [name for name, actor in actors.items() if actor.state in ("tried", "blocked")]
                if not stuck:
                    break
                self._starve(stuck, actors, played)
                continue
            step = len(played.choices)
            choice = plan.choices[step] if step < len(plan.choices) else able[0]
            if choice not in able:
                raise StepsError(
                    reason=f"the schedule asks {choice} to step, but only {', '.join(able)} can",
                    fix="copy the schedule from the check's message",
                )
            played.options.append(able)
            played.choices.append(choice)
            if plan.kill == choice and actors[choice].ran >= plan.kill_after:
                self._sigkill(choice, actors, played)
            else:
                self._step(choice, actors, played)
            for other, actor in actors.items():
                if actor.state == "tried" and other != choice:
                    actor.state = "waits"  # something changed: a statement that waits may try again
        played.rows = self.rows()
        return played

    def _step(self, name: str, actors: dict[str, _Actor], played: Played) -> None:
        actor = actors[name]
        what = actor.before + (" (again)" if actor.state == "waits" else "")
        self.procs[name][1].send("go")
        reply = self._answer(name)
        if reply is None:  # PostgreSQL: the statement waits inside the server for a lock
            played.steps.append(Step(name, what, "waits for a lock another worker holds"))
            actor.state = "blocked"
            return
        self._done(name, reply, what, actors, played)
        self._wake(name, actors, played)

    def _done(self, name: str, reply: tuple[Any, ...], what: str, actors: dict[str, _Actor], played: Played) -> None:
        """`name`'s step ended with `reply`: note it, and read where the worker stands next."""
        actor = actors[name]
        kind = reply[0]
        if kind == "waits":
            played.steps.append(Step(name, what, "waits: " + reply[2]))
            actor.state = "tried"
            return
        played.steps.append(Step(name, what, reply[2] if kind == "did" else f"raises {reply[2]}"))
        if kind == "did" and actor.before != COMMIT:
            actor.ran += 1
        self._next(name, self._read(name), actors, played)

    def _wake(self, mover: str, actors: dict[str, _Actor], played: Played) -> None:
        """After `mover`'s step: a PostgreSQL statement that waited may now run on by itself."""
        for name, actor in actors.items():
            if actor.state == "blocked" and name != mover:
                reply = self._answer(name)
                if reply is not None:
                    self._done(name, reply, actor.before, actors, played)

    def _starve(self, stuck: list[str], actors: dict[str, _Actor], played: Played) -> None:
        """Everyone left waits for someone: the first to have waited gets the error (SQLite: its
        busy timeout runs out; PostgreSQL: the server's deadlock detector picks one)."""
        name = stuck[0]
        if actors[name].state == "tried":
            self.procs[name][1].send("fail")
            played.steps.append(Step(name, actors[name].before, "gives up: its busy timeout runs out"))
            reply = self._read(name)
            self._next(name, self._read(name) if reply[0] == "error" else reply, actors, played)
            return
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            for who in stuck:
                if self.procs[who][1].poll(_WAIT_SLICE):
                    self._done(who, self.procs[who][1].recv(), actors[who].before, actors, played)
                    return
        raise StepsError(reason="two workers waited for each other and nothing ended it", fix="run it again")

    def _next(self, name: str, reply: tuple[Any, ...], actors: dict[str, _Actor], played: Played) -> None:
        """Where `name` stands after `reply`: before its next step, or done."""
        actor, kind = actors[name], reply[0]
        if kind == "at":
            actor.state, actor.before = "at", reply[2]
        elif kind == "end":
            actor.state = "done"
            played.outcomes[name] = reply[2]
        elif kind == "stub":
            raise NotAttempted()
        else:
            raise StepsError(reason=f"worker {name} said {kind!r} out of turn", fix="run it again")

    def _answer(self, name: str) -> tuple[Any, ...] | None:
        """The worker's answer to the step it was told to take; None while, on PostgreSQL, its
        statement waits for a lock that only workers standing still can release."""
        _, pipe, backend, _ = self.procs[name]
        deadline = time.monotonic() + PATIENCE
        while time.monotonic() < deadline:
            if self.dialect == "sqlite":
                return self._read(name)
            if pipe.poll(_WAIT_SLICE):
                reply: tuple[Any, ...] = pipe.recv()
                return reply
            blockers = set(self.conn.execute("SELECT pg_blocking_pids(%s)", (backend,)).fetchone()[0])
            if blockers and blockers <= {p[2] for n, p in self.procs.items() if n != name}:
                return None
        self._kill(name)
        raise StepsError(reason=f"worker {name} said nothing for {PATIENCE:g} s", fix="run it again")

    def _sigkill(self, name: str, actors: dict[str, _Actor], played: Played) -> None:
        n = actors[name].ran
        played.steps.append(Step(name, f"is killed (SIGKILL) after {n} statement{'s' if n != 1 else ''}"))
        played.killed_after[name] = n
        played.outcomes[name] = Outcome(killed=True)
        backend = self.procs[name][2]
        self._kill(name)  # on PostgreSQL the server rolls its transaction back once it sees the connection close:
        actors[name].state = "done"  # a statement waiting for one of its locks waits until then (`_answer`)
        if self.dialect == "postgresql":  # and the next step comes after it (SKIP LOCKED would skip a dying lock)
            self._gone(backend)

    def _gone(self, backend: int) -> None:
        """Wait, inside the server, until the killed worker's session is over: its session lock
        is released only once its transaction has been rolled back and its row locks with it."""
        try:
            self.conn.execute("SELECT pg_advisory_lock(%s), pg_advisory_unlock(%s)", (backend, backend))
        except Exception as error:  # lock_timeout: the server kept the session for PATIENCE seconds
            raise StepsError(reason=f"the server kept a killed worker's session: {error}", fix="run it again") from None

    # -------------------------------------------------------------- processes and the table
    def _ensure(self, name: str, function: Callable[..., Any]) -> None:
        if name in self.procs and self.procs[name][3] is function:
            return
        if name in self.procs:
            self._kill(name)
        pid, pipe = fork_worker(lambda conn: _life(self.dialect, self.url, function, name, conn))
        self.procs[name] = (pid, pipe, 0, function)
        ready = self._read(name)
        if ready[0] != "ready":
            self._kill(name)
            raise StepsError(reason=f"worker {name} could not start: {ready[2]}", fix="run it again")
        self.procs[name] = (pid, pipe, int(ready[1]), function)

    def _read(self, name: str) -> tuple[Any, ...]:
        _, pipe, _, _ = self.procs[name]
        try:
            if not pipe.poll(PATIENCE):
                self._kill(name)
                raise StepsError(reason=f"worker {name} said nothing for {PATIENCE:g} s", fix="run it again")
            reply: tuple[Any, ...] = pipe.recv()
        except (EOFError, OSError):
            self.procs.pop(name, None)
            raise StepsError(reason=f"worker {name} ended without a word", fix="run it again") from None
        return reply

    def _kill(self, name: str) -> None:
        pid, pipe, _, _ = self.procs.pop(name)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        pipe.close()

    def _reset(self, rows: tuple[Row, ...]) -> None:
        mark = "?" if self.dialect == "sqlite" else "%s"
        self.conn.execute(f"DELETE FROM {TABLE}")
        for row in rows:
            self.conn.execute(
                f"INSERT INTO {TABLE} (id, state, worker_id, token, expires_at) VALUES ({', '.join([mark] * 5)})",
                (row.id, row.state, row.worker_id, row.token, row.expires_at),
            )

    def rows(self) -> dict[str, Row]:
        found = self.conn.execute(f"SELECT id, state, worker_id, token, expires_at FROM {TABLE} ORDER BY id")
        return {r[0]: Row(r[0], r[1], r[2], int(r[3]), None if r[4] is None else float(r[4])) for r in found}


def _words(sql: str) -> str:
    """A statement in a line: its whitespace folded, cut at 60 characters."""
    flat = " ".join(sql.split())
    return flat if len(flat) <= 60 else flat[:57] + "..."


def _rows(rows: list[tuple[Any, ...]]) -> str:
    return (
        "no rows" if not rows else ", ".join(repr(tuple(row)) for row in rows[:3]) + (" ..." if len(rows) > 3 else "")
    )
