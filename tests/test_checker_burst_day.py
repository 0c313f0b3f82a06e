"""The checker catches a real bug in a full burst day: the naive adapter's double contacts,
each named with its offending case, and nothing at all with the idempotent adapter."""

from __future__ import annotations

from collections import Counter

import pytest

from shopops_lab.checker import check
from shopops_lab.events import EventKind
from shopops_lab.sim import run


@pytest.fixture(scope="module")
def naive_day():
    return run("burst_day", seed=7, adapter="naive")


def test_every_doubly_contacted_case_is_named_with_its_evidence(naive_day):
    sends = Counter((e.case_id, e.info["idem_key"]) for e in naive_day.log.where(EventKind.CONTACT_SENT))
    offended = sorted(case for (case, _), count in sends.items() if count > 1)
    assert naive_day.items == 10_000 and offended  # the chaos really produced duplicates
    result = check(naive_day.log)
    assert result.valid is False
    named = result.of("double_contact")
    assert sorted(a.case_id for a in named) == offended
    for anomaly in named:
        contacts = [e for e in anomaly.evidence if e.kind is EventKind.CONTACT_SENT]
        assert len(contacts) >= 2 and {e.case_id for e in contacts} == {anomaly.case_id}
        assert anomaly.case_id in anomaly.message


def test_the_idempotent_adapter_leaves_nothing_to_report():
    report = run("burst_day", seed=7, adapter="idempotent")
    result = check(report.log)
    assert result.valid is True and result.anomalies == ()
    assert report.lost == 0 and report.double_contacts == 0
