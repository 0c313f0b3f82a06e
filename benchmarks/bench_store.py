"""How fast is the queue on a real database, next to peers measured in the same run?

1. SQLite: enqueue + acquire + ack cycles per second, every operation its own committed
   transaction, against litequeue (put + pop + done) and persist-queue's SQLiteAckQueue
   (put + get + ack) on the same disk. All three run in WAL mode at the same `synchronous`
   setting, printed with each row: NORMAL (a commit survives a killed process, the failure
   this course is about; litequeue's own default) and FULL (it survives a power cut too;
   every commit waits for the disk, so all three are bounded by fsync). Target: at least as
   fast as litequeue at equal durability (both settings), while also giving leases, fencing
   tokens, per-case exclusivity, attempts and an event log that litequeue does not have. The
   floor row runs three bare one-row commits per cycle: no queue that commits every
   operation can beat it on this disk.
2. PostgreSQL (when SHOPOPS_POSTGRES_URL names a server): round trips to the server per
   cycle (enqueue + acquire + ack, each its own committed transaction), beside the floor: a
   plain `FOR UPDATE SKIP LOCKED` queue, one autocommitted statement per operation (3 round
   trips, no lease, token, per-case rule or event), measured in the same run, with both
   speeds, and procrastinate (a PostgreSQL task queue: defer, fetch_job, finish_job) when it is
   installed (optional, for this benchmark only: if it is missing the bench says how to get it
   and goes on); the ratios are of speeds measured in the same run. Target: the floor's 3
   round trips. Then cycles per second with 1 and 8 worker processes on one database, and the
   scaling ratio. Informational: on a machine with fewer cores than workers the server and the
   workers share them.
3. The three ratios side by side, the in-memory queue's against queue.Queue's cycle measured
   in the same run (bench_queue.py says more about it).

Run: `.venv/bin/pip install -r benchmarks/requirements.txt`, then
`python benchmarks/bench_store.py`. Prints numbers and PASS/FAIL for each target and always
exits 0: benchmarks inform, tests decide.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import multiprocessing
import os
import sys
import tempfile
from pathlib import Path
from time import perf_counter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, installed or not

import bench_queue  # noqa: E402  (the memory queue's cycle, for the three ratios)

from shopops_lab.clock import SystemClock  # noqa: E402
from shopops_lab.worker.queue import Queue  # noqa: E402

CYCLES = 2_000
REPEATS = 3
CASES = 50
PG_CYCLES = 400  # per worker process
TARGET = 1.0  # x litequeue, at equal durability
PG_TARGET = 3  # round trips per cycle: the SKIP LOCKED floor's
PAYLOAD = {"idem_key": "O-1001:email:3", "template": "delay_apology", "order_total": 129}


def ours(folder: Path, synchronous: str, n: int) -> float:
    q = Queue(store=f"sqlite:///{folder / 'shopops.db'}?synchronous={synchronous}", clock=SystemClock())
    cases = [f"O-{1000 + i}" for i in range(CASES)]
    start = perf_counter()
    for i in range(n):
        q.enqueue(case_id=cases[i % CASES], tenant_id="store_northline", kind="contact_send", payload=PAYLOAD)
        q.ack(q.acquire("W1"))
    seconds = perf_counter() - start
    q.store.close()
    return seconds


def litequeue_cycles(folder: Path, synchronous: str, n: int) -> float:
    from litequeue import LiteQueue

    q = LiteQueue(str(folder / "litequeue.db"))
    q.conn.execute(f"PRAGMA synchronous = {synchronous}")  # it sets NORMAL itself; the same for all
    start = perf_counter()
    for _ in range(n):
        q.put("O-1001:email:3")
        q.done(q.pop().message_id)
    seconds = perf_counter() - start
    q.close()
    return seconds


def persistqueue_cycles(folder: Path, synchronous: str, n: int) -> float:
    from persistqueue import SQLiteAckQueue

    q = SQLiteAckQueue(str(folder / "persistqueue"), auto_commit=True)
    q._getter.execute(f"PRAGMA synchronous = {synchronous}")
    if q._putter is not q._getter:
        q._putter.execute(f"PRAGMA synchronous = {synchronous}")
    start = perf_counter()
    for _ in range(n):
        q.put(PAYLOAD)
        q.ack(q.get())
    seconds = perf_counter() - start
    return seconds


def per_cycle(folder: Path, n: int = 200) -> dict[str, tuple[float, float]]:
    """Statements sent and WAL frames (database pages written) per cycle, ours and litequeue's:
    what the time above is spent on. Counted on a short untimed run with no checkpoint in it."""
    from litequeue import LiteQueue

    def count(connection, cycle) -> tuple[float, float]:
        wal = Path(connection.execute("PRAGMA database_list").fetchone()[2] + "-wal")
        connection.execute("PRAGMA wal_autocheckpoint = 0")
        cycle()  # the tables exist and WAL mode is on
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = connection.execute("PRAGMA page_size").fetchone()[0]
        statements: list[str] = []
        connection.set_trace_callback(statements.append)
        for _ in range(n):
            cycle()
        connection.set_trace_callback(None)
        # A trigger's steps are traced again with the text of the statement that ran them (its
        # values bound): a statement sent through the driver is counted once.
        sent = sum(1 for before, now in zip([None, *statements], statements, strict=False) if now != before)
        return sent / n, wal.stat().st_size / (page + 24) / n

    q = Queue(store=f"sqlite:///{folder / 'count.db'}?synchronous=normal", clock=SystemClock())

    def ours_cycle() -> None:
        q.enqueue(case_id="O-1001", tenant_id="store_northline", kind="contact_send", payload=PAYLOAD)
        q.ack(q.acquire("W1"))

    lq = LiteQueue(str(folder / "count-litequeue.db"))

    def litequeue_cycle() -> None:
        lq.put("O-1001:email:3")
        lq.done(lq.pop().message_id)

    counts = {
        "shopops Queue (sqlite)": count(q.store._connection, ours_cycle),
        "litequeue": count(lq.conn, litequeue_cycle),
    }
    q.store.close()
    lq.close()
    return counts


def bare_commits(folder: Path, synchronous: str, n: int) -> float:
    """Not a queue: a floor under any design that commits each operation. A cycle is three
    one-statement transactions on one small row (insert, update, update), with no index, no
    lease, no event and no Python around them."""
    import sqlite3

    db = sqlite3.connect(folder / "bare.db", isolation_level=None)
    db.execute("PRAGMA journal_mode = WAL")
    db.execute(f"PRAGMA synchronous = {synchronous}")
    db.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data TEXT NOT NULL, state INTEGER NOT NULL)")
    execute = db.execute
    start = perf_counter()
    for _ in range(n):
        rowid = execute("INSERT INTO t (data, state) VALUES ('O-1001:email:3', 0)").lastrowid
        execute("UPDATE t SET state = 1 WHERE id = ?", (rowid,))
        execute("UPDATE t SET state = 2 WHERE id = ?", (rowid,))
    seconds = perf_counter() - start
    db.close()
    return seconds


PEERS = {
    "shopops Queue (sqlite)": ours,
    "litequeue": litequeue_cycles,
    "persist-queue SQLiteAckQueue": persistqueue_cycles,
    "(floor) 3 bare one-row commits": bare_commits,
}


def sqlite_round(synchronous: str, n: int) -> dict[str, float]:
    """Best cycles/s of each, interleaved, every run on a fresh file in the same folder."""
    best = dict.fromkeys(PEERS, 0.0)
    for _ in range(REPEATS):
        for name, run in PEERS.items():
            with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
                best[name] = max(best[name], n / run(Path(folder), synchronous, n))
    return best


def _pg_worker(url: str, name: str, ready, go, seconds) -> None:
    q = Queue(store=url, clock=SystemClock())
    cases = [f"{name}-C{i}" for i in range(CASES)]
    ready.wait()
    go.wait()
    start = perf_counter()
    for i in range(PG_CYCLES):
        q.enqueue(case_id=cases[i % CASES], tenant_id="store_northline", kind="contact_send", payload=PAYLOAD)
        lease = q.acquire(name)
        while lease is None:  # another process holds what is ready; ours comes next
            lease = q.acquire(name)
        q.ack(lease)
    seconds.put(perf_counter() - start)


def _schema(url: str, name: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{name}"


def _pg_ours(url: str, n: int) -> tuple[float, float]:
    """Round trips per cycle and seconds of the kit's queue (a round trip is one exchange with
    the server: a pipeline of several statements is one)."""
    q = Queue(store=url, clock=SystemClock())
    store, trips = q.store, [0]
    execute = store._execute

    def counted(sql, params=()):
        trips[0] += 1
        return execute(sql, params)

    store._execute = counted
    start = perf_counter()
    for i in range(n):
        q.enqueue(case_id=f"O-{1000 + i % CASES}", tenant_id="store_northline", kind="contact_send", payload=PAYLOAD)
        q.ack(q.acquire("W1"))
    seconds = perf_counter() - start
    store.close()
    return trips[0] / n, seconds


def _pg_floor(url: str, n: int) -> tuple[float, float]:
    """Not a queue: one autocommitted statement per operation, no lease, token or event."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("CREATE TABLE floor (id BIGSERIAL PRIMARY KEY, payload TEXT NOT NULL, state TEXT NOT NULL)")
        start = perf_counter()
        for _ in range(n):
            db.execute("INSERT INTO floor (payload, state) VALUES (%s, 'ready')", ("O-1001:email:3",))
            (taken,) = db.execute(
                "UPDATE floor SET state = 'leased' WHERE id = (SELECT id FROM floor"
                " WHERE state = 'ready' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1)"
                " RETURNING id"
            ).fetchone()
            db.execute("UPDATE floor SET state = 'done' WHERE id = %s", (taken,))
        return 3.0, perf_counter() - start


def _pg_procrastinate(url: str, n: int) -> tuple[float | None, float]:
    """procrastinate's cycle through its own sync connector (a one-connection pool, as it
    configures it) and its own SQL functions: defer (the public API), then fetch_job and
    finish_job, the two calls its worker makes per job. Round trips are not counted."""
    import logging

    import procrastinate
    from procrastinate import sql

    logging.getLogger("procrastinate").setLevel(logging.ERROR)  # "App is instantiated in the main module"
    connector = procrastinate.SyncPsycopgConnector(conninfo=url, min_size=1, max_size=1)
    app = procrastinate.App(connector=connector)

    @app.task(name="contact_send", queue="emails")
    def contact_send(**payload) -> None:
        """Never run: the bench fetches and finishes the job itself, as a worker does around it."""

    with app.open():
        app.schema_manager.apply_schema()
        worker = connector.execute_query_one(query=sql.queries["register_worker"])["worker_id"]
        start = perf_counter()
        for _ in range(n):
            contact_send.defer(**PAYLOAD)
            job = connector.execute_query_one(query=sql.queries["fetch_job"], queues=None, worker_id=worker)
            connector.execute_query(
                query=sql.queries["finish_job"], job_id=job["id"], status="succeeded", delete_job=False
            )
        return None, perf_counter() - start


HOW_TO_GET_PROCRASTINATE = (
    "procrastinate: skipped (not installed). It is an optional peer of this benchmark only: "
    ".venv/bin/pip install 'procrastinate>=3,<4', then run this again."
)


def pg_round_trips(url: str, n: int = 200) -> dict[str, tuple[float | None, float]]:
    """Round trips per cycle and best cycles/s of ours, the floor queue and procrastinate (if
    installed), interleaved REPEATS times, each run on a fresh schema."""
    import psycopg

    peers = {"shopops Queue (postgresql)": _pg_ours, "(floor) FOR UPDATE SKIP LOCKED": _pg_floor}
    if importlib.util.find_spec("procrastinate") is not None:
        peers["procrastinate " + importlib.metadata.version("procrastinate")] = _pg_procrastinate
    found: dict[str, tuple[float | None, float]] = {}
    with psycopg.connect(url, autocommit=True) as admin:
        for repeat in range(REPEATS):
            for number, (name, run) in enumerate(peers.items()):
                schema = f"bench_rt_{os.getpid()}_{repeat}_{number}"
                admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
                admin.execute(f"CREATE SCHEMA {schema}")
                try:
                    trips, seconds = run(_schema(url, schema), n)
                finally:
                    admin.execute(f"DROP SCHEMA {schema} CASCADE")
                found[name] = (trips, max(found.get(name, (None, 0.0))[1], n / seconds))
    return found


def pg_cycles(url: str, workers: int) -> float:
    """Cycles per second of `workers` processes on one fresh schema."""
    import psycopg

    schema = f"bench_{os.getpid()}_{workers}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.execute(f"CREATE SCHEMA {schema}")
        try:
            target = _schema(url, schema)
            Queue(store=target).store.close()  # set the schema up once, before the clock starts
            ctx = multiprocessing.get_context("spawn")
            ready, go, seconds = ctx.Barrier(workers + 1), ctx.Barrier(workers + 1), ctx.Queue()
            procs = [
                ctx.Process(target=_pg_worker, args=(target, f"W{n}", ready, go, seconds))
                for n in range(1, workers + 1)
            ]
            for proc in procs:
                proc.start()
            ready.wait()
            start = perf_counter()
            go.wait()
            for proc in procs:
                proc.join()
            wall = perf_counter() - start
            return workers * PG_CYCLES / wall
        finally:
            admin.execute(f"DROP SCHEMA {schema} CASCADE")


def main() -> int:
    print(
        f"Python {sys.version.split()[0]}; SQLite {__import__('sqlite3').sqlite_version}; best of {REPEATS} x "
        f"{CYCLES:,} cycles, each operation its own committed transaction, WAL, files under {Path.cwd()}"
    )
    ratios: dict[str, float] = {}
    for synchronous in ("normal", "full"):
        n = CYCLES if synchronous == "normal" else CYCLES // 4
        best = sqlite_round(synchronous, n)
        print(
            f"synchronous={synchronous.upper()}: "
            + (
                "a commit survives a killed process (not a power cut)"
                if synchronous == "normal"
                else "a commit survives a power cut: each one waits for fsync"
            )
        )
        for name, speed in best.items():
            print(f"  {name:<30}: {speed:>9,.0f} cycles/s")
        ratio = best["shopops Queue (sqlite)"] / best["litequeue"]
        ratios[synchronous] = ratio
        verdict = "PASS" if ratio >= TARGET else "FAIL"
        print(f"  {'ratio vs litequeue':<30}: {ratio:9.2f}   target >= {TARGET:g} (equal durability)  {verdict}")
        floor = best["(floor) 3 bare one-row commits"] / best["litequeue"]
        print(f"  {'floor vs litequeue':<30}: {floor:9.2f}   (what no queue that commits every operation can beat)")
        if synchronous == "normal":
            with tempfile.TemporaryDirectory(dir=Path.cwd()) as folder:
                for name, (statements, frames) in per_cycle(Path(folder)).items():
                    print(f"  {name:<30}: {statements:9.1f} statements, {frames:4.1f} pages written per cycle")
    url = os.environ.get("SHOPOPS_POSTGRES_URL")
    trips = None
    if url:
        trips = postgres(url)
    else:
        print(
            "PostgreSQL: skipped. Start a server (sh scripts/postgres.sh start /tmp/shopops-pg) and set "
            "SHOPOPS_POSTGRES_URL to the URL it prints."
        )
    ours, peer, _ = bench_queue.throughput()
    print("The three ratios, measured in this run:")
    if trips is not None:
        print(f"  PostgreSQL round trips per cycle    : {trips:5.2f}   (the floor: {PG_TARGET}; target <= {PG_TARGET})")
    print(
        f"  SQLite vs litequeue                 : {ratios['normal']:5.2f} at NORMAL, {ratios['full']:.2f} at FULL"
        f"   (target >= {TARGET:g} at each)"
    )
    print(f"  memory vs queue.Queue's cycle       : {ours / peer:5.2f}   (target >= {bench_queue.CYCLE_TARGET:g})")
    return 0


def postgres(url: str) -> float:
    """The PostgreSQL part: round trips and speed beside the floor and procrastinate, then
    scaling. Returns the kit's round trips per cycle."""
    print(
        f"PostgreSQL, one process, best of {REPEATS} x 200 cycles (enqueue + acquire + ack), each run in the "
        "same order on a fresh schema:"
    )
    trips = pg_round_trips(url)
    for name, (per_cycle_trips, speed) in trips.items():
        counted = f"{per_cycle_trips:5.1f}" if per_cycle_trips is not None else "  n/a"
        print(f"  {name:<32}: {counted} round trips, {speed:>9,.0f} cycles/s")
    ours_trips, ours_speed = trips["shopops Queue (postgresql)"]
    floor_trips, floor_speed = trips["(floor) FOR UPDATE SKIP LOCKED"]
    assert ours_trips is not None and floor_trips is not None  # both are counted
    print(
        f"  {'ratio to the floor':<32}: {ours_trips / floor_trips:5.2f} x the round trips, "
        f"{ours_speed / floor_speed:.2f} x the speed   target <= 1 x ({PG_TARGET} round trips)  "
        f"{'PASS' if ours_trips <= PG_TARGET else 'FAIL'}"
    )
    peer = next((name for name in trips if name.startswith("procrastinate")), None)
    if peer is None:
        print(f"  {HOW_TO_GET_PROCRASTINATE}")
    else:
        ratio = ours_speed / trips[peer][1]
        print(
            f"  {'ratio to procrastinate':<32}: {ratio:5.2f} x the speed   target >= 1 (faster)  "
            f"{'PASS' if ratio >= 1 else 'FAIL'}"
        )
    one, eight = pg_cycles(url, 1), pg_cycles(url, 8)
    print(f"PostgreSQL, {PG_CYCLES} cycles per process, {os.cpu_count()} cores on this machine:")
    print(f"  1 worker process   : {one:>9,.0f} cycles/s")
    print(f"  8 worker processes : {eight:>9,.0f} cycles/s")
    print(
        f"  scaling ratio      : {eight / one:9.2f}   (information; bounded by the cores the server and workers share)"
    )
    return ours_trips


if __name__ == "__main__":
    sys.exit(main())
