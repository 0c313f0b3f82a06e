"""Lab 01's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

SAME_KEY_QUIZ = Quiz(
    "W1 emailed Jordan with key O-1001:email:3 and crashed. W7 now sends with the same key through "
    "the idempotent adapter. What does W7's send return?",
    [
        "A new message id: the email goes out again.",
        "The first message id, and Jordan receives nothing new.",
        "An error, because the key was already used.",
        "Nothing yet: the adapter waits until W1 acks.",
    ],
    answer_index=1,
    explanations=[
        "That is the naive adapter's behaviour, the double contact you watched above.",
        "The adapter recognises the key and returns msg-0001. W7 can carry on as if it had sent the email itself.",
        "An error would leave W7 unsure whether Jordan was emailed. Returning the first result answers that question.",
        "W1 is dead and will never ack; the adapter does not know about leases at all, only keys.",
    ],
)


# The knowledge check's key (01.3): what can happen after W1's lease runs out, and why the rest cannot.
CAN_HAPPEN = frozenset({"redelivered", "late_ack_refused", "w1_still_sends"})
WHY_NOT = {
    "w1_stopped": "a lease is a record in the queue, not a signal to the worker: nothing interrupts W1's code.",
    "case_blocked": "the lease is over, so the case is free: that is the whole point of a lease that expires.",
    "straight_to_dlq": "this was attempt 1 of 5: an item reaches the DLQ only after its last allowed attempt.",
}
