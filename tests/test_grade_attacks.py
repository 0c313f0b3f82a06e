"""Attacks on the grader from inside a wrong answer: each must score 0 on its exercise,
while the right answer, graded in the same run, scores full.

The judge (checks, kit world, verdict) runs in a process that never runs learner code; the
answer runs in a process of its own, confined: as root another uid with the key, the
gradebook folder and the submissions hidden, and as any user walled in by Landlock. An
attack that reports what it saw does so by the `sys.exit(...)` its cell ends with, which the
grader notes (Landlock leaves it no folder to write to but its own). Each attack below
worked, or would work, against a grader that runs the answer and the check in one process
(a few are shown to, at the end).
Timeouts are 2 s per cell; nothing here measures time."""

from __future__ import annotations

import re
from pathlib import Path

import grade_fixtures as fx
import nbformat
import pytest

from shopops_lab.checks import lab01, lab02
from shopops_lab.checks.base import Verdict
from shopops_lab.course.grade import confinement, landlock
from shopops_lab.course.grade.judge import Limits
from shopops_lab.course.grade.results import Mark, Status
from shopops_lab.course.grade.run import grade

LIMITS = Limits(cell_seconds=60.0, notebook_seconds=600.0, memory_mb=512)  # no attack here hangs
# Held by another uid (root), or by Landlock with its scoping of signals (ABI 6, Linux 6.12) as any user.
HELD = confinement.can_drop() or landlock.abi() >= 6
CONFINED = pytest.mark.skipif(
    not HELD, reason="needs root on Linux, or Landlock ABI 6 (Linux 6.12 or later) to confine an ordinary user's run"
)

WRONG = fx.KEY_FROM_TOKEN.strip("\n")  # a key per delivery: the redelivery emails the customer twice

# Each attack is appended to the wrong answer; `inside` ones run while the check calls it.
FLIP_VERDICT = """
from shopops_lab.checks.base import Verdict
Verdict.INCORRECT._value_ = "correct"
"""
REPLACE_CHECK = """
import shopops_lab.course.grade.judge as _judge
def _always(self, step):
    self.send(["result", step.index, "correct", "fine", []])
_judge._Runner._check = _always
from shopops_lab.checks.base import Exercise, Result, Verdict
Exercise.result = lambda self, *a: Result(exercise="x", verdict=Verdict.CORRECT, message="fine")
"""
GETFRAME = """
_wrong = send_followup
def send_followup(lease, adapter):
    import json, struct, sys
    frame = sys._getframe()
    while frame is not None:
        for value in list(frame.f_locals.values()):
            for name in ("send", "sock", "connection"):
                target = getattr(value, name, None)
                try:
                    if callable(target):
                        target(["result", 0, "correct", "fine", []])
                    elif hasattr(target, "sendall"):
                        data = json.dumps(["result", 0, "correct", "fine", []]).encode()
                        target.sendall(struct.pack(">I", len(data)) + data)
                except Exception:
                    pass
        frame = frame.f_back
    return _wrong(lease, adapter)
"""
SEND_BYTES = """
import multiprocessing.connection as _connection, socket as _socket
_send_bytes, _sendall = _connection.Connection.send_bytes, _socket.socket.sendall
def _flipped(data):
    return bytes(data).replace(b"incorrect", b"correct")
_connection.Connection.send_bytes = lambda self, data, *a: _send_bytes(self, _flipped(data), *a)
_socket.socket.sendall = lambda self, data, *a: _sendall(self, _flipped(data), *a)
"""
SETPROFILE = """
import sys
def _rewrite(frame, event, arg):
    if event == "call":
        for value in list(frame.f_locals.values()):
            if isinstance(value, list) and value[:1] == ["result"] and len(value) > 3:
                value[2:4] = ["correct", "fine"]
sys.setprofile(_rewrite)
"""
GC_FLIP = """
import gc
from shopops_lab.checks.base import Result, Verdict
_wrong = send_followup
def _flip():
    gc.unfreeze()
    for thing in gc.get_objects():
        if isinstance(thing, Result):
            object.__setattr__(thing, "verdict", Verdict.CORRECT)
        elif isinstance(thing, list) and thing[:1] == ["incorrect"]:
            thing[0] = "correct"
def send_followup(lease, adapter):
    _flip()
    return _wrong(lease, adapter)
_flip()
"""
READ_MASTERS = """
import glob, json, os, shopops_lab
_kit = os.path.dirname(os.path.dirname(os.path.abspath(shopops_lab.__file__)))
for _path in glob.glob(os.path.join(_kit, "solutions", "01_*.ipynb")) + glob.glob("/**/solutions/01_*.ipynb"):
    try:
        for _cell in json.load(open(_path))["cells"]:
            if _cell["metadata"].get("nbgrader", {}).get("grade_id") == "send-followup":
                exec("".join(_cell["source"]))
    except Exception:
        pass
"""
GARBLE_WIRE = """
import gc, socket
_wrong = send_followup
def send_followup(lease, adapter):
    for thing in gc.get_objects():
        if isinstance(thing, socket.socket):
            try:
                thing.sendall(b"\\x00\\x00\\x00\\x05{bad}")
            except OSError:
                pass
    return _wrong(lease, adapter)
"""
KILL_PARENTS = """
import os, signal
for _pid in [os.getppid(), 1] + [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    if _pid != os.getpid():
        try:
            os.kill(_pid, signal.SIGSTOP)
        except OSError:
            pass
"""
MEMORY_OF_THE_JUDGE = """
import os
for _pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        with open(f"/proc/{_pid}/mem", "r+b") as _mem:
            _mem.write(b"correct")
    except OSError:
        pass
"""


# What only the grader's memory holds: another learner's answer, and a hidden test of the key.
ANOTHER_LEARNER = "# marker of another learner: 7f3c9a"
NEEDLES = """[
        "".join(["marker of another ", "learner: 7f3c9a"]),
        "".join(["exercise.grade(send_followup)\\n", "### END HIDDEN TESTS"]),
    ]"""
SCAN = f"""
def _secrets_in_memory():
    import gc
    gc.unfreeze()  # what a fork inherited frozen is walked too
    needles = {NEEDLES}
    wanted = [*needles, *(needle.encode() for needle in needles)]
    found = set()
    for thing in gc.get_objects():
        for value in gc.get_referents(thing):
            if type(value) in (str, bytes) and len(value) >= 20:
                for number, needle in enumerate(wanted):
                    if value is not needle and type(value) is type(needle) and needle in value:
                        found.add(number % len(needles))
    return sorted(found)
"""


MEMORY_SPY = f"""{SCAN}
import sys
sys.exit(f"seen {{_secrets_in_memory()!r}}")
"""  # looks through its own process's memory for what only the grader holds, and says what it saw

ESCAPEE = """
import os, sys
_read, _write = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(_write, str(os.getpid()).encode().ljust(16))
        while True:
            __import__("time").sleep(60)
    os._exit(0)
sys.exit(f"escaped {int(os.read(_read, 16))}")
"""  # a process that leaves its group and its parent, and would outlive the submission


def said(result, word: str) -> str:
    """What an attack's cell said it saw (its `sys.exit`, noted by the grader)."""
    found = [m.group(1) for note in result.notes if (m := re.search(rf"sys\.exit\('{word} (.*?)'\)", note))]
    assert found, result.notes  # the attack ran, and its cell ended as it says
    return found[0]


def scribbler(out: Path) -> str:
    return f"""
import os
for _name in ("grades.csv", "grades.json"):
    try:
        with open(os.path.join({str(out)!r}, _name), "w") as handle:
            handle.write("submission,points\\nscribbler_lab01,3\\n")
    except OSError:
        pass
"""


ALWAYS_EQUAL = """
class _Same(str):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = str.__hash__
def where_does_it_end(deliveries, max_attempts):
    return _Same("ready")
"""

ATTACKS = {
    "flip_verdict": FLIP_VERDICT,
    "flip_verdict_inside": WRONG.replace(
        "def send_followup(lease, adapter):",
        "def send_followup(lease, adapter):\n" + "\n".join("    " + line for line in FLIP_VERDICT.strip().splitlines()),
    ),
    "replace_check": REPLACE_CHECK,
    "getframe": GETFRAME,
    "send_bytes": SEND_BYTES,
    "setprofile": SETPROFILE,
    "gc_flip": GC_FLIP,
    "read_masters": READ_MASTERS,
    "garble_wire": GARBLE_WIRE,
    "kill_parents": KILL_PARENTS,
    "judge_memory": MEMORY_OF_THE_JUDGE,
}


def attacked(attack: str) -> nbformat.NotebookNode:
    source = attack if attack.lstrip().startswith("def send_followup") else WRONG + "\n" + attack
    return fx.submission("01", {"send-followup": source, "what-next": fx.RIGHT})


@pytest.fixture(scope="module")
def graded(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("attacks")
    out = root / "out"
    for name, attack in ATTACKS.items():
        if name not in NEEDS_CONFINEMENT or HELD:  # unconfined they would reach the run itself
            fx.write(attacked(attack), root / "class" / f"{name}_lab01.ipynb")
    fx.write(attacked(ESCAPEE), root / "class" / "escapee_lab01.ipynb")
    fx.write(attacked(scribbler(out)), root / "class" / "scribbler_lab01.ipynb")
    fx.write(
        fx.submission("02", {"where-does-it-end": ALWAYS_EQUAL, "replay-and-drain": fx.RIGHT}),
        root / "class" / "alwaysequal_lab02.ipynb",
    )
    fx.write(fx.all_right("01"), root / "class" / "right_lab01.ipynb")
    fx.write(attacked(MEMORY_SPY), root / "class" / "memoryspy_lab01.ipynb")
    marked = fx.submission("01", {"send-followup": WRONG + "\n" + ANOTHER_LEARNER, "what-next": fx.RIGHT})
    fx.write(marked, root / "class" / "marked_lab01.ipynb")
    report = grade([str(root / "class")], key=fx.SOLUTIONS, out=out, jobs=2, limits=LIMITS)
    return {result.submission.name: result for result in report.results}, out


def points(result) -> dict[str, float | None]:
    return {e.grade_id: e.points for e in result.exercises}


# Stopped by another uid and hidden folders (root), or Landlock (any user).
NEEDS_CONFINEMENT = {"read_masters", "kill_parents", "judge_memory"}


@pytest.mark.parametrize(
    "attack",
    [
        pytest.param(name, marks=CONFINED) if name in NEEDS_CONFINEMENT else name
        for name in [*ATTACKS, "escapee", "scribbler", "memoryspy"]
    ],
)
def test_a_wrong_answer_that_attacks_the_grader_scores_zero(graded, attack: str) -> None:
    rows, _ = graded
    result = rows[f"{attack}_lab01"]
    assert points(result)["send-followup-test"] == 0, [(e.grade_id, e.mark, e.message) for e in result.exercises]
    assert points(result)["what-next-test"] == 1  # the honest exercise next to it is still graded


def test_the_right_answer_in_the_same_run_scores_full(graded) -> None:
    rows, _ = graded
    assert rows["right_lab01"].points == 4 and rows["right_lab01"].status is Status.GRADED


def test_a_value_that_equals_everything_arrives_as_the_plain_string_it_holds(graded) -> None:
    rows, _ = graded
    result = rows["alwaysequal_lab02"]
    assert points(result) == {"replay-and-drain-test": 2, "where-does-it-end-test": 0}
    (knowledge,) = [e for e in result.exercises if e.grade_id == "where-does-it-end-test"]
    assert knowledge.mark is Mark.INCORRECT and "'ready'" in knowledge.message


def test_garbage_on_the_wire_stops_that_exercise_as_an_error(graded) -> None:
    rows, _ = graded
    result = rows["garble_wire_lab01"]
    (stopped,) = [e for e in result.exercises if e.grade_id == "send-followup-test"]
    assert stopped.mark is Mark.ERROR and "sent something it should not have" in stopped.message


@CONFINED
def test_no_process_of_a_submission_outlives_it(graded) -> None:
    rows, _ = graded
    pid = int(said(rows["escapee_lab01"], "escaped"))  # the escapee did start, and left its process group
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        state = "gone"
    assert state in ("gone", "Z", "X")


def test_the_learners_process_holds_nothing_of_the_key_or_of_other_submissions(graded) -> None:
    """The learner's process is forked from a zygote that never read the key or a submission
    (and, where fork is missing, is a fresh interpreter): a walk of its whole heap finds
    neither another learner's answer nor a hidden test, which the grader's own memory holds."""
    rows, _ = graded
    assert said(rows["memoryspy_lab01"], "seen") == "[]"  # the spy ran, and saw nothing


def test_the_memory_spy_finds_what_a_process_holding_the_key_holds() -> None:
    """The spy's walk is real: run where the key and the other learner's answer are loaded
    (here, this test process, as a fork of the grader would be), it finds both."""
    from shopops_lab.course.grade.key import Key

    key = Key.load(fx.SOLUTIONS, labs={"01"})
    other = fx.submission("01", {"send-followup": WRONG + "\n" + ANOTHER_LEARNER})
    assert key and other
    assert _define(SCAN, "_secrets_in_memory")() == [0, 1]


def test_the_gradebook_is_the_graders_own(graded) -> None:
    rows, out = graded
    text = (out / "grades.csv").read_text()
    assert "scribbler_lab01,3" not in text and text.startswith("submission,student,lab,status")
    assert rows["scribbler_lab01"].points == 1


# --- the attacks are real: in one process they pass a wrong answer ------------------------------


def _define(source: str, name: str, namespace: dict | None = None):
    namespace = {} if namespace is None else namespace
    exec(compile(source, "<answer>", "exec"), namespace)
    return namespace[name]


def test_flipping_the_verdict_fools_a_check_run_in_the_answers_process() -> None:
    wrong = _define(WRONG, "send_followup")
    result = lab01.exercise.result(wrong)
    assert str(result.verdict.value) == "incorrect"
    try:
        exec(compile(FLIP_VERDICT, "<answer>", "exec"), {})
        assert str(lab01.exercise.result(wrong).verdict.value) == "correct"
    finally:
        Verdict.INCORRECT._value_ = "incorrect"
    assert str(lab01.exercise.result(wrong).verdict.value) == "incorrect"


def test_reading_the_masters_gives_the_right_answer_where_they_can_be_read() -> None:
    honest = _define(READ_MASTERS, "send_followup", {"send_followup": _define(WRONG, "send_followup")})
    assert lab01.exercise.result(honest).correct


def test_a_value_that_equals_everything_is_refused_in_the_answers_process_too() -> None:
    assert not lab02.knowledge.result(_define(ALWAYS_EQUAL, "where_does_it_end")).correct  # exact types compared
