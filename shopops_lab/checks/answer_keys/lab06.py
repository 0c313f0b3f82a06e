"""Lab 06's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

CONFIRM_QUIZ = Quiz(
    "The broker confirmed out-0001 to the dispatcher. What does that confirm prove?",
    [
        "That the payments service applied the refund.",
        "That the broker has stored the message; nothing yet about the consumer.",
        "That out-0001 will be delivered exactly once.",
        "That the outbox entry is marked sent.",
    ],
    1,
    [
        "That would be the consumer's business, after the second boundary; the confirm comes from the broker.",
        "A publisher confirm covers one hand-over: publisher to broker.",
        "Brokers deliver at least once: a consumer crash before its ack means another delivery.",
        "Marking sent is the dispatcher's own write after the confirm; a crash can fall in between.",
    ],
    hint="Which two parties does the publisher confirm connect?",
)


ORDER_QUIZ = Quiz(
    "A consumer records out-0003 as processed, then calls the payments API, which times out. "
    "The broker delivers out-0003 again. What happens?",
    [
        "The refund is applied on the redelivery, as it should be.",
        "Jordan is refunded twice.",
        "The redelivery is skipped as a duplicate, so nobody ever finds out whether Jordan was refunded.",
        "The broker notices the timeout and cancels the message.",
    ],
    2,
    [
        "Not with this order: the id is already in processed, so the copy looks done and nothing is called again.",
        "Nothing calls the payments API a second time: the copy is skipped. The timed-out call itself may or may "
        "not have moved the money.",
        "A timeout is an unknown outcome (lab 05): the refund may or may not have happened, and the record written "
        "first makes the copy look done, so nobody looks it up. Record after the effect succeeded; after a timeout, "
        "look up what happened (or call again under the same idempotency key), then decide.",
        "The broker knows nothing about the payments API; it only sees acks.",
    ],
    hint="Where is the id written relative to the effect, and what does a timeout tell you about the effect?",
)
