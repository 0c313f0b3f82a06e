"""What a judge tells the grader (`messages.py`): every kind crosses as itself, and anything
off its shape is refused by name (a judge runs no learner code, so that is the grader's own
bug, never a verdict)."""

from __future__ import annotations

import json

import pytest

from shopops_lab.course.grade import messages as m

EVERY_KIND = [
    m.CellStarted(3),
    m.Verdict(4, "incorrect", "The key changes with the token.", ("schedule: W1 sends", "W2 sends")),
    m.CellStopped(6, "did not finish within 60 s"),
    m.Restarting(),
    m.Note("cell what-next called sys.exit(2)"),
    m.LearnerStarted(4242),
    m.GraderFailed("the learner's process could not take uid 12"),
    m.Done(),
]


@pytest.mark.parametrize("message", EVERY_KIND, ids=lambda message: message.KIND)
def test_every_kind_crosses_as_itself(message: m.Message) -> None:
    assert m.decode(m.encode(message)) == message


def test_every_kind_is_known_by_its_own_name() -> None:
    assert set(m.KINDS) == {message.KIND for message in EVERY_KIND}


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "not a JSON object"),
        (b'{"kind": "score", "points": 5}', "no known kind"),
        (b'{"index": 3}', "no known kind"),
        (b'{"kind": "cell"}', "cell: fields [], not ['index']"),
        (b'{"kind": "cell", "index": 3, "points": 5}', "cell: fields ['index', 'points'], not ['index']"),
        (b'{"kind": "cell", "index": "3"}', "cell: index is str, not int"),
        (b'{"kind": "cell", "index": true}', "cell: index is bool, not int"),
        (b'{"kind": "result", "index": 1, "mark": "correct", "message": "", "evidence": [1]}', "evidence is list"),
        (b'{"kind": "result", "index": 1, "mark": 1, "message": "", "evidence": []}', "mark is int, not str"),
        (b'{"kind": "note", "text": null}', "note: text is NoneType, not str"),
    ],
)
def test_a_message_off_its_shape_is_refused_by_name(data: bytes, said: str) -> None:
    with pytest.raises(m.MessageError) as refused:
        m.decode(data)
    assert said in str(refused.value)


def test_a_message_is_one_json_object_naming_its_kind() -> None:
    assert json.loads(m.encode(m.CellStopped(2, "died"))) == {"kind": "stopped", "index": 2, "cause": "died"}


def test_the_learner_links_vocabulary_is_the_one_the_code_speaks() -> None:
    """Every kind `LEARNER_LINK` documents is one the code sends or handles, and every kind the
    learner's side dispatches on is documented: the list cannot go out of date again."""
    import re
    from pathlib import Path

    grade = Path(m.__file__).parent
    code = "".join((grade / name).read_text() for name in ("learner.py", "remote.py", "wire.py", "judge.py"))
    spoken = set(re.findall(r'(?:kind == |message\[0\] == |\[)"([a-z]+)"', code))
    dispatched = set(
        re.findall(r'kind == "([a-z]+)"', (grade / "learner.py").read_text() + (grade / "wire.py").read_text())
    )
    assert set(m.LEARNER_LINK) <= spoken, sorted(set(m.LEARNER_LINK) - spoken)
    assert dispatched <= set(m.LEARNER_LINK), sorted(dispatched - set(m.LEARNER_LINK))
