"""Channel adapters, the provider's faults and the contact ledger: what the customer sees."""

from __future__ import annotations

import dataclasses

import pytest

from shopops_lab.clock import FakeClock
from shopops_lab.effects import (
    Contact,
    ContactLedger,
    EmailAdapter,
    NaiveEmailAdapter,
    NaiveSmsAdapter,
    Provider,
    ProviderFault,
    SendResult,
    SendStatus,
    SmsAdapter,
)
from shopops_lab.errors import BadArgumentError
from shopops_lab.events import EventKind, EventLog

KEY = "O-1001:email:3"


def test_a_repeated_key_returns_the_first_message_id_and_reaches_the_customer_once():
    log = EventLog()
    email = EmailAdapter(log=log)
    first = email.send(KEY, case_id="O-1001", to="jordan@example.com", worker_id="W1")
    again = email.send(KEY, case_id="O-1001", to="jordan@example.com", worker_id="W7")
    assert first == SendResult(status=SendStatus.OK, op_id=KEY, message_id="msg-0001", deduped=False)
    assert again == SendResult(status=SendStatus.OK, op_id=KEY, message_id="msg-0001", deduped=True)
    assert len(email.ledger) == 1 and email.ledger.duplicates() == {}
    assert [(e.kind, e.worker_id, e.info["message_id"]) for e in log] == [
        (EventKind.CONTACT_SENT, "W1", "msg-0001"),
        (EventKind.CONTACT_DEDUPED, "W7", "msg-0001"),
    ]


def test_different_keys_are_different_messages_numbered_in_order():
    email = EmailAdapter()
    ids = [email.send(f"O-1001:email:{n}", case_id="O-1001").message_id for n in range(3)]
    assert ids == ["msg-0001", "msg-0002", "msg-0003"]


def test_sms_adapters_use_their_own_channel_and_numbering():
    sms = SmsAdapter()
    result = sms.send("O-1001:sms:1", case_id="O-1001", to="+15550100")
    (contact,) = sms.ledger.contacts()
    assert (result.message_id, contact.channel, contact.to) == ("sms-0001", "sms", "+15550100")
    naive = NaiveSmsAdapter()
    assert naive.send("k", case_id="O-1").message_id == "sms-0001"


def test_adapters_sharing_one_provider_dedupe_across_workers():
    provider = Provider("email")
    on_w1, on_w7 = EmailAdapter(provider), EmailAdapter(provider)
    assert on_w1.send(KEY, case_id="O-1001").message_id == on_w7.send(KEY, case_id="O-1001").message_id
    assert len(provider.ledger) == 1


def test_a_naive_adapter_ignores_the_key_and_the_ledger_shows_the_duplicate():
    email = NaiveEmailAdapter()
    first = email.send(KEY, case_id="O-1001", worker_id="W1")
    second = email.send(KEY, case_id="O-1001", worker_id="W7")
    assert (first.op_id, first.message_id, second.op_id, second.message_id) == (
        f"{KEY}#1",
        "msg-0001",
        f"{KEY}#2",
        "msg-0002",
    )
    assert not second.deduped
    assert email.ledger.duplicates() == {("O-1001", KEY): email.ledger.contacts()}
    assert [c.worker_id for c in email.ledger.contacts()] == ["W1", "W7"]


def test_a_fail_fault_delivers_nothing_and_a_retry_with_the_same_key_then_delivers():
    log = EventLog()
    email = EmailAdapter(log=log)
    email.provider.inject(ProviderFault.FAIL)
    failed = email.send(KEY, case_id="O-1001")
    assert failed == SendResult(status=SendStatus.FAILED, op_id=KEY)
    assert len(email.ledger) == 0 and email.lookup(KEY).status is SendStatus.FAILED
    assert log.last.kind is EventKind.EFFECT_FAILED
    retry = email.send(KEY, case_id="O-1001")
    assert (retry.status, retry.message_id, retry.deduped) == (SendStatus.OK, "msg-0001", False)
    assert len(email.ledger) == 1


def test_inject_times_applies_the_fault_to_that_many_deliveries():
    email = EmailAdapter()
    email.provider.inject("fail", times=2)
    statuses = [email.send(f"k{n}", case_id="O-1").status for n in range(3)]
    assert statuses == [SendStatus.FAILED, SendStatus.FAILED, SendStatus.OK]


def test_a_dropped_reply_is_unknown_and_lookup_reconciles_it_without_a_second_message():
    log = EventLog()
    email = EmailAdapter(log=log)
    email.provider.inject(ProviderFault.DROP_REPLY)
    unknown = email.send(KEY, case_id="O-1001")
    assert unknown == SendResult(status=SendStatus.UNKNOWN, op_id=KEY)
    assert len(email.ledger) == 1  # the customer did get it: only the reply was lost
    assert [e.kind for e in log] == [EventKind.CONTACT_SENT, EventKind.EFFECT_UNKNOWN]
    assert email.lookup(unknown.op_id) == SendResult(status=SendStatus.OK, op_id=KEY, message_id="msg-0001")
    retry = email.send(KEY, case_id="O-1001")  # retrying under the same key is safe too
    assert (retry.message_id, retry.deduped) == ("msg-0001", True)
    assert len(email.ledger) == 1


def test_a_dropped_reply_retried_without_a_key_reaches_the_customer_twice():
    email = NaiveEmailAdapter()
    email.provider.inject(ProviderFault.DROP_REPLY)
    unknown = email.send(KEY, case_id="O-1001")
    assert email.lookup(unknown.op_id).message_id == "msg-0001"
    email.send(KEY, case_id="O-1001")
    assert len(email.ledger.duplicates()[("O-1001", KEY)]) == 2


def test_lookup_of_an_operation_never_delivered_is_failed():
    assert EmailAdapter().lookup("never-sent") == SendResult(status=SendStatus.FAILED, op_id="never-sent")


def test_contacts_record_the_time_from_the_clock_or_now():
    clock = FakeClock(100)
    email = EmailAdapter(clock=clock)
    email.send("k1", case_id="O-1001", to="jordan@example.com", worker_id="W1")
    email.send("k2", case_id="O-1001", now=250)
    assert email.ledger.contacts() == [
        Contact(
            message_id="msg-0001",
            channel="email",
            case_id="O-1001",
            to="jordan@example.com",
            idem_key="k1",
            time=100.0,
            worker_id="W1",
        ),
        Contact(
            message_id="msg-0002",
            channel="email",
            case_id="O-1001",
            to="customer",
            idem_key="k2",
            time=250,
            worker_id=None,
        ),
    ]


def test_ledger_filters_by_case_and_lists_duplicates_sorted_by_intent():
    ledger = ContactLedger()
    email = NaiveEmailAdapter(ledger=ledger)
    for case_id, key in [("O-2", "b"), ("O-1", "a"), ("O-2", "b"), ("O-1", "a"), ("O-3", "c")]:
        email.send(key, case_id=case_id)
    assert [c.message_id for c in ledger.contacts("O-1")] == ["msg-0002", "msg-0004"]
    assert list(ledger.duplicates()) == [("O-1", "a"), ("O-2", "b")]
    assert len(ledger) == 5
    assert repr(ledger) == "ContactLedger(5 contacts, 2 duplicated intents)"
    assert repr(email) == "NaiveEmailAdapter(5 contacts)"


def test_the_ledger_says_when_any_case_was_contacted_twice_under_any_key():
    ledger = ContactLedger()
    email = NaiveEmailAdapter(ledger=ledger)
    assert not ledger.any_case_twice()
    for case_id, key in [("O-1", "a"), ("O-2", "b"), ("O-3", "c")]:
        email.send(key, case_id=case_id)
    assert not ledger.any_case_twice()
    email.send("another key", case_id="O-2")  # the same customer, a second message
    assert ledger.any_case_twice()


def test_results_and_contacts_are_frozen():
    result = EmailAdapter().send(KEY, case_id="O-1001")
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.message_id = "msg-9999"  # type: ignore[misc]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"idem_key": "", "case_id": "O-1001"}, "idem_key"),
        ({"idem_key": None, "case_id": "O-1001"}, "idem_key"),
        ({"idem_key": 3, "case_id": "O-1001"}, "idem_key"),
        ({"idem_key": KEY, "case_id": ""}, "case_id"),
        ({"idem_key": KEY, "case_id": None}, "case_id"),
        ({"idem_key": KEY, "case_id": "O-1001", "to": ""}, "to"),
    ],
)
@pytest.mark.parametrize("adapter_class", [EmailAdapter, NaiveEmailAdapter])
def test_bad_send_arguments_name_the_field_and_send_nothing(adapter_class, kwargs, field):
    log = EventLog()
    adapter = adapter_class(log=log)
    with pytest.raises(BadArgumentError) as err:
        adapter.send(**kwargs)
    assert err.value.field == field and str(err.value).startswith(f"{field} is ")
    assert len(adapter.ledger) == 0 and len(log) == 0
    assert adapter.send(KEY, case_id="O-1001").message_id == "msg-0001"  # nothing was used up


@pytest.mark.parametrize(
    "fault, times, field", [("explode", 1, "fault"), ("fail", 0, "times"), ("fail", True, "times")]
)
def test_inject_names_a_bad_fault_or_count(fault, times, field):
    provider = Provider()
    with pytest.raises(BadArgumentError) as raised:
        provider.inject(fault, times)
    assert raised.value.field == field
    adapter = EmailAdapter(provider=provider)
    assert adapter.send("O-1:email:1", case_id="O-1").status is SendStatus.OK  # nothing was queued
