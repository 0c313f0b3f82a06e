"""Going on from twins (copies of the learner's copies, taken in its process as they are
now) searches exactly what replaying every prefix does: behind the grader's process
boundary the explorer forks a schedule's state instead of replaying it, and for right and
wrong answers of labs 04, 05 and 06 it finds the same schedules, through the same states,
and the same shortest counterexample as the replaying search in one process. Where a
learner's copy holds an object of the check's that has no counterpart (a cached env), the
search replays, and still finds the same."""

from __future__ import annotations

import inspect

import grade_fixtures as fx
import pytest
import test_check_accuracy_lab02 as lab02_answers

from shopops_lab.checks import lab02, lab04, lab06, recovery_world
from shopops_lab.checks.answer_keys.model_answers import MODEL_ANSWERS
from shopops_lab.course.grade.remote import CheckRun, Learner
from shopops_lab.effects import ProviderFault
from shopops_lab.explore import Run, explore

IMPORTS = """
from shopops_lab.checkpoint import Receipt
from shopops_lab.effects import SendStatus
from shopops_lab.errors import EffectFailedError, StaleTokenError
from shopops_lab.fencing import NaiveResultStore
"""
WRONG = """
class WritesFirst(NaiveResultStore):          # the check after the write: a refused write changed the store
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)
        current = self.current_token(job_id)
        if token != current:
            raise StaleTokenError(what=f"job {job_id}", token=token, current=current)

class RemembersWriters(NaiveResultStore):     # keeps the newest token it saw in a class attribute
    newest = {}
    def complete(self, job_id, result, *, token, worker_id=None, now=None):
        if token < type(self).newest.get(job_id, 0):
            raise StaleTokenError(what=f"job {job_id}", token=token, current=type(self).newest[job_id])
        type(self).newest[job_id] = token
        super().complete(job_id, result, token=token, worker_id=worker_id, now=now)

ENVS = []

def run_keeping_env(job_id, env):              # right, but keeps the env it was handed: no counterpart
    ENVS.append(env)
    return run(job_id, env)

class Outcome:                                  # a result of its own class: not plain data
    def __init__(self, value):
        self.value = value

class AcksWithAnObject:
    def __init__(self, env):
        self._env = env
    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._env, name)
    def ack(self, job_id, *, token, result=None):
        self._env.ack(job_id, token=token, result=Outcome(result))

def run_acking_an_object(job_id, env):          # right; a crash after its ack is played by running it again
    return run(job_id, AcksWithAnObject(env))

SEEN = set()

def handle_in_memory(delivery, processed, apply):   # duplicates remembered in the process, not the table
    if delivery.message_id in SEEN:
        return False
    apply(delivery)
    SEEN.add(delivery.message_id)
    return True

def handle_records_first(delivery, processed, apply):   # recorded before the refund: a crash loses it
    if delivery.message_id in processed:
        return False
    processed.add(delivery.message_id)
    apply(delivery)
    return True
"""
IN_MEMORY = fx.IN_FLIGHT.replace("def run(", "def run_in_memory(")  # what it sent, kept in memory
LAB02 = ["acquires_and_acks_by_hand", "stops_at_the_first_failure", "never_gives_a_failure_back", "storms_inside_a_try"]
CELLS = "\n\n".join(
    [
        IMPORTS,
        MODEL_ANSWERS["02.1"],
        MODEL_ANSWERS["04.1"],
        MODEL_ANSWERS["05.3"],
        MODEL_ANSWERS["06.2"],
        IN_MEMORY,
        WRONG,
        *(inspect.getsource(getattr(lab02_answers, name)) for name in LAB02),
    ]
)
LOST_REPLY = (ProviderFault.DROP_REPLY,)
SCENARIOS = {
    "02": lab02.scenario,
    "04": lab04.scenario,
    "05": lambda: recovery_world.scenario("a lost reply", LOST_REPLY, "O-1001"),
    "06": lab06.scenario,
}
CASES = [
    ("02", "replay_and_drain", False),
    ("02", "acquires_and_acks_by_hand", False),  # passes leases back, calls the handler itself
    ("02", "stops_at_the_first_failure", True),
    ("02", "never_gives_a_failure_back", True),
    ("02", "storms_inside_a_try", True),
    ("04", "FencedResultStore", False),
    ("04", "WritesFirst", True),
    ("04", "RemembersWriters", True),
    ("05", "run", False),
    ("05", "run_in_memory", True),
    ("05", "run_keeping_env", False),
    ("05", "run_acking_an_object", False),
    ("06", "handle", False),
    ("06", "handle_in_memory", True),
    ("06", "handle_records_first", True),
]


@pytest.fixture(scope="module")
def learner(tmp_path_factory: pytest.TempPathFactory):
    scratch = str(tmp_path_factory.mktemp("twins"))
    config = {"scratch": scratch, "lock": scratch, "uid": None, "hide": [], "memory_mb": 1024, "cpu_seconds": 300}
    process = Learner({**config, "imports": ["shopops_lab.checks.base"]}, announce=lambda pid: None)
    process.start()
    assert process.run(CELLS, "<cell twins>") is None
    yield process
    process.stop()


@pytest.fixture()
def run(learner):
    check = CheckRun(learner)
    yield check
    check.close()


def _here(name: str):
    namespace: dict = {"__name__": "__main__"}
    exec(compile(CELLS, "<cell twins>", "exec"), namespace)
    return namespace[name]


def _found(exploration) -> tuple:
    counter = exploration.counterexample
    return exploration.schedules, exploration.states, None if counter is None else (counter.words, counter.problem)


def _requests(peer, sent: list[str]):
    original = peer.request
    return lambda message, *rest: sent.append(message[0]) or original(message, *rest)


WORLDS = {"02": lab02._Replay, "04": lab04._Fencing, "05": recovery_world.RecoveryWorld, "06": lab06._Refunds}


def _searched(run, lab: str, name: str, *, replayed: bool) -> tuple[tuple, list[str]]:
    """The search behind the boundary, and the requests it sent; `replayed`: with the
    world's clone taken away, so every prefix is played again."""
    sent: list[str] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run.channel(), "request", _requests(run.channel(), sent))
        if replayed:
            patch.setattr(WORLDS[lab], "clone", None)
        found = explore(SCENARIOS[lab](), run.answer(name))
    return _found(found), sent


@pytest.mark.parametrize(("lab", "name", "wrong"), CASES, ids=[f"{lab}-{name}" for lab, name, _ in CASES])
def test_twins_search_what_replaying_searches(run, lab, name, wrong) -> None:
    forked, sent = _searched(run, lab, name, replayed=False)
    replayed, _ = _searched(run, lab, name, replayed=True)
    assert forked == replayed
    here = _found(explore(SCENARIOS[lab](), _here(name)))  # in one process: replayed, the same verdict
    assert forked[0] == here[0] and forked[2] == here[2] and (here[2] is not None) == wrong
    if not wrong and lab != "02":  # a whole search went on from twins (lab 02's R needs none: one run drains)
        assert "twins" in sent
    if name == "run_keeping_env":  # a kept env has no counterpart: every fork after the first run is refused
        assert sent.count("twins") * 2 < sent.count("restartcall")


def test_twins_cost_fewer_requests_than_replaying(run) -> None:
    """The point of twins: lab 04's master searched with forks against the same search replayed."""
    _, forked = _searched(run, "04", "FencedResultStore", replayed=False)
    _, replayed = _searched(run, "04", "FencedResultStore", replayed=True)
    assert len(forked) < 0.6 * len(replayed), (len(forked), len(replayed))


@pytest.mark.parametrize(
    ("lab", "name"), [("02", "replay_and_drain"), ("02", "acquires_and_acks_by_hand"), ("05", "run"), ("06", "handle")]
)
def test_a_crashed_copy_replays_the_recorded_kit_calls_instead_of_the_learner(run, lab, name) -> None:
    """A crash inside a learner call leaves nothing of its process's memory, so the copy of a
    step that crashes at its n-th kit call is the clean call's first n kit calls, replayed
    on the copy's facades: labs 02's, 05's and 06's answers searched so, and with their facades
    recording nothing (every crashed copy runs the learner's code again), find the same
    with fewer calls of the learner's code."""
    recorded = _searched(run, lab, name, replayed=False)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Run, "facade", lambda self, **handed: None)  # nothing is recorded
        rerun = _searched(run, lab, name, replayed=False)
    assert recorded[0] == rerun[0]
    calls = [sum(kind in ("call", "restartcall") for kind in sent) for _, sent in (recorded, rerun)]
    assert calls[0] < 0.8 * calls[1], calls  # the learner's code runs a fifth less (lab 05: 44 calls, not 144)


def test_a_value_of_the_learners_own_in_a_kit_call_is_played_by_running_the_learner(run) -> None:
    """`ack(result=<an object of the learner's class>)` cannot be passed again without the
    learner's process: a crash in a run that made that call runs the learner's code again."""
    plain = _searched(run, "05", "run", replayed=False)
    acking = _searched(run, "05", "run_acking_an_object", replayed=False)
    assert plain[0][0] == acking[0][0] and acking[0][2] is None
    calls = [sum(kind in ("call", "restartcall") for kind in sent) for _, sent in (plain, acking)]
    assert calls[1] > calls[0], calls
