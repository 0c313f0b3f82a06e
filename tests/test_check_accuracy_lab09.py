"""The specification of lab 09's three judges of one worker: the explorer (every schedule of
four settings), the simulator (a burst day of 3,000 cases) and real processes (SIGKILLs
and freezes on a plan). Three right workers, written unlike the master and unlike each
other, pass all three; each plausible wrong worker is refused, with its evidence, by every
judge that can see its mistake, and by at least one (`test_every_wrong_worker_is_refused_by_a_judge`).
"""

from __future__ import annotations

import re

import pytest
from check_accuracy import Spec, accuracy_tests, refused, replay_tests
from store_backends import POSTGRES_ENV, postgres_url

from shopops_lab.checks import lab09, worker_processes
from shopops_lab.checks.base import Verdict, Wrong
from shopops_lab.effects import SendStatus

# ---------------------------------------------------------------------------- shared by the workers below


async def _draft(kit):
    """The joined chunks, heartbeating after each; None once a heartbeat says no."""
    chunks = []
    while (chunk := await kit.next_chunk()) is not None:
        chunks.append(chunk)
        if not await kit.heartbeat():
            return None
    return "".join(chunks)


async def _settled(kit, key, result):
    """The message id of a send's `result`, an unknown outcome looked up; raises if nothing went out."""
    if result.status is SendStatus.UNKNOWN:
        result = await kit.lookup(key)
    if result.status is not SendStatus.OK:
        raise RuntimeError(f"nothing went out under {key} ({result.status.value})")
    return result.message_id


async def _left_by_earlier(kit, key):
    """What an earlier delivery left: the message id if the email certainly went out, else None."""
    saved = await kit.load() or {}
    if saved.get("sent"):
        return saved["sent"]
    if saved.get("intent") == key:
        found = await kit.lookup(key)
        if found.status is SendStatus.OK:
            return found.message_id
    return None


async def _finish(kit, key, message_id):
    await kit.save({"intent": key, "sent": message_id})
    await kit.ack()


async def _unsent_draft(kit):
    """The draft, unless an earlier delivery confirmed the email (then the case is acked here)."""
    saved = await kit.load() or {}
    if saved.get("sent"):
        await kit.ack()
        return None
    return await _draft(kit)


async def _emailed(lease, kit, key):
    """The whole delivery, right, under `key`: the wrong workers below differ in the key alone."""
    message_id = await _left_by_earlier(kit, key)
    if message_id is None:
        body = await _draft(kit)
        if body is None:
            return
        await kit.save({"intent": key})
        message_id = await _settled(kit, key, await kit.send(key, body))
    await _finish(kit, key, message_id)


# ---------------------------------------------------------------------------- right, written differently


async def worker_in_phases(lease, kit):
    """A phase per row of lab 05's table, the draft in a helper coroutine, `return await` for the ack."""
    key = lease.payload.get("idem_key")
    if key is None:
        raise LookupError(f"{lease.case_id}: a payload without its key is poison")
    state = await kit.load() or {"phase": "new"}
    if state["phase"] == "sent":
        return await kit.ack()
    if state["phase"] == "intended":
        reply = await kit.lookup(key)
        if reply.status is SendStatus.OK:
            await kit.save({"phase": "sent", "message": reply.message_id})
            return await kit.ack()
    body = await _draft(kit)
    if body is None:
        return None
    await kit.save({"phase": "intended"})
    message = await _settled(kit, key, await kit.send(key, body))
    await kit.save({"phase": "sent", "message": message})
    return await kit.ack()


class LeaseGone(Exception):
    """The heartbeat said no: the delivery ends here."""


async def worker_keeping_its_draft(lease, kit):
    """Keeps the draft in the checkpoint (a redelivery sends the same words), raises on a refused
    heartbeat, and names the poison payload before anything else."""
    if "idem_key" not in lease.payload:
        raise ValueError(f"poison payload for {lease.case_id}: no idempotency key")
    key = lease.payload["idem_key"]
    memo = dict(await kit.load() or {})
    if "message_id" not in memo and "intent" in memo:
        found = await kit.lookup(key)
        if found.status is SendStatus.OK:
            memo["message_id"] = found.message_id
    if "message_id" not in memo:
        if "body" not in memo:
            pieces = []
            while (piece := await kit.next_chunk()) is not None:
                pieces.append(piece)
                if await kit.heartbeat() is False:
                    raise LeaseGone(lease.case_id)
            memo["body"] = "".join(pieces)
        memo["intent"] = key
        await kit.save(memo)
        memo["message_id"] = await _settled(kit, key, await kit.send(key, memo["body"]))
        await kit.save(memo)
    await kit.ack()


async def worker_asking_the_provider_first(lease, kit):
    """No checkpoint at all: the provider is asked first on every delivery, and is the record."""
    key = lease.payload.get("idem_key") or ""
    if not key:
        raise KeyError("idem_key")
    if (await kit.lookup(key)).status is not SendStatus.OK:
        body = await _draft(kit)
        if body is None:
            return
        await _settled(kit, key, await kit.send(key, body))
    await kit.ack()


RIGHT = (worker_in_phases, worker_keeping_its_draft, worker_asking_the_provider_first)


# ---------------------------------------------------------------------------- wrong: the mistakes learners make


async def acks_before_the_email(lease, kit):
    """Acknowledges first, then does the work: a crash in between loses the case."""
    key = lease.payload["idem_key"]
    await kit.ack()
    body = await _draft(kit)
    if body is not None:
        await _settled(kit, key, await kit.send(key, body))


async def ignores_a_refused_heartbeat(lease, kit):
    """Heartbeats, but drafts on whatever the queue says."""
    key = lease.payload["idem_key"]
    message_id = await _left_by_earlier(kit, key)
    if message_id is None:
        chunks = []
        while (chunk := await kit.next_chunk()) is not None:
            chunks.append(chunk)
            await kit.heartbeat()
        await kit.save({"intent": key})
        message_id = await _settled(kit, key, await kit.send(key, "".join(chunks)))
    await _finish(kit, key, message_id)


async def key_from_the_attempt(lease, kit):
    """Every attempt its own key: the provider cannot tell a redelivery from new work."""
    await _emailed(lease, kit, f"{lease.case_id}:email:{lease.attempt}")


async def key_from_the_token(lease, kit):
    """The key made from the lease's fencing token, which changes with every claim."""
    await _emailed(lease, kit, f"{lease.case_id}:{lease.token}")


async def key_from_the_words(lease, kit):
    """The key made from the draft: a redrafted email gets a new key, and goes out again."""
    body = await _draft(kit)
    if body is None:
        return
    key = f"{lease.case_id}:{sum(map(ord, body))}"
    saved = await kit.load() or {}
    if saved.get("sent"):
        await kit.ack()
        return
    await kit.save({"intent": key})
    await _finish(kit, key, await _settled(kit, key, await kit.send(key, body)))


async def intent_after_the_send(lease, kit):
    """Records the intent once the send returned: a crash during the send leaves no trace."""
    key = lease.payload["idem_key"]
    message_id = await _left_by_earlier(kit, key)
    if message_id is None:
        body = await _draft(kit)
        if body is None:
            return
        result = await kit.send(key, body)
        await kit.save({"intent": key})
        message_id = await _settled(kit, key, result)
    await _finish(kit, key, message_id)


async def never_looks_up(lease, kit):
    """Records the intent, but a redelivery that finds it sends again instead of asking."""
    key = lease.payload["idem_key"]
    body = await _unsent_draft(kit)
    if body is None:
        return
    await kit.save({"intent": key})
    result = await kit.send(key, body)
    if result.status is not SendStatus.OK:
        raise RuntimeError("no answer from the provider")
    await _finish(kit, key, result.message_id)


async def retries_without_limit(lease, kit):
    """Catches every failure and tries the whole delivery again, forever."""
    key = lease.payload.get("idem_key", lease.case_id)
    while True:
        try:
            body = await _draft(kit)
            if body is None:
                return
            await kit.save({"intent": key})
            result = await kit.send(key, body)
            if result.status is SendStatus.OK:
                break
        except Exception:  # noqa: BLE001 - the mistake under test
            continue
    await _finish(kit, key, result.message_id)


SENT: dict[str, str] = {}


async def remembers_in_memory(lease, kit):
    """Keeps what it sent in a module-level dict instead of the checkpoint: a crash forgets it."""
    key = lease.payload["idem_key"]
    if key not in SENT:
        body = await _draft(kit)
        if body is None:
            return
        SENT[key] = await _settled(kit, key, await kit.send(key, body))
    await kit.ack()


async def swallows_every_error(lease, kit):
    """Wraps the delivery in `except Exception` and acknowledges whatever happened."""
    key = lease.payload["idem_key"]
    try:
        message_id = await _left_by_earlier(kit, key)
        if message_id is None:
            body = await _draft(kit)
            if body is None:
                return
            await kit.save({"intent": key})
            message_id = await _settled(kit, key, await kit.send(key, body))
        await kit.save({"sent": message_id})
    except Exception:  # noqa: BLE001 - the mistake under test
        pass
    await kit.ack()


async def confirms_before_the_send(lease, kit):
    """Saves the email as sent before sending it: a crash in between, and the next delivery acks."""
    key = lease.payload["idem_key"]
    body = await _unsent_draft(kit)
    if body is None:
        return
    await kit.save({"intent": key, "sent": True})
    await _settled(kit, key, await kit.send(key, body))
    await kit.ack()


async def unknown_means_sent(lease, kit):
    """Takes a send with no answer for a sent one."""
    key = lease.payload["idem_key"]
    message_id = await _left_by_earlier(kit, key)
    if message_id is None:
        body = await _draft(kit)
        if body is None:
            return
        await kit.save({"intent": key})
        result = await kit.send(key, body)
        if result.status is SendStatus.FAILED:
            raise RuntimeError("refused")
        message_id = result.message_id or "unknown"
    await _finish(kit, key, message_id)


async def poison_returns_quietly(lease, kit):
    """Right for every sound case; a poison payload is skipped without a word."""
    key = lease.payload.get("idem_key")
    if key is not None:
        await _emailed(lease, kit, key)


def not_a_coroutine(lease, kit):
    """Written as a plain function: its kit calls are made and never awaited."""
    kit.heartbeat()
    kit.ack()


async def heartbeat_without_await(lease, kit):
    """Forgets one await: the heartbeat is never made, and its answer never read."""
    key = lease.payload["idem_key"]
    if not kit.heartbeat():
        return
    await kit.send(key, "hello")
    await kit.ack()


# ---------------------------------------------------------------------------- the specifications

SECRETS = ('kit.save({"intent"', "saved.get(", "result.status is SendStatus.UNKNOWN")
_SETTING = re.compile(r'lab09\.replay\(work, "(?P<setting>[^"]+)", ')


def _replayed(answer, schedule, message):
    return lab09.replay(answer, _SETTING.search(message)["setting"], schedule)


EXPLORED = Spec(
    exercise=lab09.explored,
    right=RIGHT,
    wrong=(
        refused(
            lab09.naive_work,
            "Jordan was emailed 2 times about O-1001: msg-0001 by W1 under key O-1001:attempt-1, msg-0002",
            "W1 send, then dies · W1's lease runs out · W1 takes O-1001",
        ),
        refused(
            acks_before_the_email,
            "W1 acknowledged O-1001, but Jordan was never emailed",
            "(2 steps): W1 takes O-1001 · W1 ack.",
        ),
        refused(
            ignores_a_refused_heartbeat,
            "W1's heartbeat was refused",
            "yet it then called kit.next_chunk(): a refused heartbeat means stop at once",
            "W1's lease runs out while it works · W1 heartbeat",
        ),
        refused(key_from_the_attempt, "Jordan was emailed 2 times", "under key O-1001:email:2", "W1 send, then dies"),
        refused(key_from_the_token, "Jordan was emailed 2 times", "under key O-1001:2"),
        refused(
            key_from_the_words, "Jordan was emailed 2 times", "msg-0002 by W1 under key O-1001:", "W1 send, then dies"
        ),
        refused(
            intent_after_the_send,
            "W1 sent under O-1001:email:1 again without looking it up first: W1's delivery of attempt 1 had sent "
            "under that key before this one began",
        ),
        refused(never_looks_up, "without looking it up first", "W1 send, then dies"),
        refused(retries_without_limit, "without looking it up first", "W1 send, then dies"),
        refused(remembers_in_memory, "without looking it up first", "W1 send, then dies"),
        refused(swallows_every_error, "W1 acknowledged O-1001, but Jordan was never emailed"),
        refused(
            confirms_before_the_send,
            "W1 acknowledged O-1001, but Jordan was never emailed",
            "W1 save, then dies · W1's lease runs out · W1 takes O-1001",
        ),
        refused(unknown_means_sent, "W1 acknowledged O-1001, but Jordan was never emailed", "W1 send (request lost)"),
        refused(
            poison_returns_quietly,
            "W1's delivery of P-2001 returned quietly, though the case cannot be drafted",
            'lab09.replay(work, "a poison case", "W1 takes P-2001")',
            "(1 step)",
        ),
        refused(not_a_coroutine, "work(lease, kit) returned None instead of a coroutine", "async def work"),
        refused(heartbeat_without_await, "kit.heartbeat() was used as a value without `await`"),
    ),
    secrets=SECRETS,
    replay=_replayed,
)

AT_SCALE = Spec(
    exercise=lab09.at_scale,
    right=RIGHT,
    wrong=(
        refused(
            lab09.naive_work,
            "on burst day (seed 3, 3,000 cases, 20 workers running your work): ",
            "customer(s) were emailed more than once: case O-1016 was emailed 2 times",
            "under key O-1016:attempt-2",
            "by t=599 s; the day was cut there, at its first broken promise",
            "See the whole day: print(lab09.day(work, seed=3))",
        ),
        refused(key_from_the_attempt, "customer(s) were emailed more than once", "under key O-1016:email:2"),
        refused(
            acks_before_the_email,
            "case(s) were acknowledged, yet their customer was never emailed",
            "customers emailed twice: 0; acknowledged but never emailed:",
        ),
        refused(
            intent_after_the_send,
            "dead letter(s) not explained by a poison payload: case O-1016 (its payload is sound; last error: "
            "IdempotencyConflictError",
        ),
        refused(never_looks_up, "dead letter(s) not explained by a poison payload", "IdempotencyConflictError"),
        refused(remembers_in_memory, "dead letter(s) not explained by a poison payload"),
        refused(
            poison_returns_quietly,
            "dead letter(s) not explained by a poison payload",
            "its last attempt only ran out of lease",
        ),
        refused(not_a_coroutine, "a worker misused its kit", "returned None instead of a coroutine"),
    ),
    secrets=SECRETS,
)

IN_PROCESSES = Spec(
    exercise=lab09.in_processes,
    right=RIGHT,
    wrong=(
        refused(lab09.naive_work, "in real worker processes on ", ": order", "customer was emailed 2 times"),
        refused(
            acks_before_the_email, "order O-1001 was acknowledged, but its customer was never emailed (schedule run)"
        ),
        refused(key_from_the_attempt, "customer was emailed 2 times (schedule kill@"),
        refused(intent_after_the_send, "ended in the dead-letter queue", "IdempotencyConflictError"),
        refused(retries_without_limit, "KitMisuseError: your worker made 30 kit calls in one delivery"),
        refused(
            poison_returns_quietly,
            "poison order P-",
            "died of expired leases, with no reason a person could act on",
        ),
        refused(not_a_coroutine, "returned None instead of a coroutine"),
    ),
    secrets=SECRETS,
)

(
    test_a_right_answer_written_differently_is_accepted,
    test_a_plausible_wrong_answer_is_refused_with_its_evidence,
    test_the_specification_has_enough_right_and_wrong_answers,
) = accuracy_tests(EXPLORED, AT_SCALE, IN_PROCESSES)

test_the_schedule_a_refusal_shows_replays_to_the_same_problem = replay_tests(EXPLORED)

WRONG = {case.answer for spec in (EXPLORED, AT_SCALE, IN_PROCESSES) for case in spec.wrong}


def test_every_wrong_worker_is_refused_by_a_judge() -> None:
    """At least ten plausible wrong workers, each refused by at least one judge (a worker the
    simulator and the processes let through is refused by the explorer: its mistake needs a
    schedule a sample rarely holds, such as a stall right before a heartbeat)."""
    names = {getattr(answer, "__name__", "") for answer in WRONG} - {"naive_work"}
    assert len(names) >= 10, sorted(names)
    assert {case.answer for case in EXPLORED.wrong} >= WRONG - {lab09.naive_work}


def test_the_stub_is_not_attempted_by_every_judge() -> None:
    async def work(lease, kit):
        raise NotImplementedError()

    verdicts = lab09.verdicts(work)
    assert [result.verdict for result in verdicts.results] == [Verdict.NOT_ATTEMPTED] * 3
    assert "not attempted" in str(verdicts)


def test_the_last_hint_is_the_learners_own_counterexample(capsys: pytest.CaptureFixture[str]) -> None:
    lab09.exercise.hint(4, key_from_the_attempt)
    said = capsys.readouterr().out
    assert said.startswith("Hint 4 of 4: in the setting 'a crash', this schedule breaks your worker")
    assert "1. W1 takes O-1001 (attempt 1, token 1)" in said and "emailed 2 times" in said
    lab09.exercise.hint(4)
    assert "Pass your worker" in capsys.readouterr().out


def test_on_postgres_the_processes_judge_the_same_way(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where SHOPOPS_POSTGRES_URL names a server, the worker processes share a schema of their own
    there (dropped afterwards) and reach the verdicts they reach on SQLite."""
    monkeypatch.setenv(POSTGRES_ENV, postgres_url())  # skips (or, in CI, fails) without a server
    assert "on PostgreSQL" in worker_processes.judged(worker_keeping_its_draft)
    with pytest.raises(Wrong, match=r"on PostgreSQL: order O-\d+'s customer was emailed 2 times \(schedule kill@"):
        worker_processes.judged(key_from_the_attempt)


def test_a_server_named_without_psycopg_to_reach_it_is_judged_on_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    """SHOPOPS_POSTGRES_URL set where psycopg is not installed (an nbgrader venv, a learner who
    set the variable for lab 08 only): the processes judge runs on an SQLite file, as lab 08's
    08.3 decides, and still judges."""
    import sys

    monkeypatch.setenv(POSTGRES_ENV, "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg fails here
    assert "on an SQLite file" in worker_processes.judged(worker_keeping_its_draft)
