"""Lab 04's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

PAYMENT_GUARD_QUIZ = Quiz(
    "The result store now refuses W1's token 4. Still stale, W1 asks the payment provider to refund "
    "Jordan's 40 EUR. What prevents a refund on top of W7's voucher?",
    [
        "The result store's token check.",
        "An idempotency key on the refund call.",
        "The queue, because it refused W1's ack.",
        "Only a check of ownership where the payment happens: a token the provider compares, or a go-between "
        "that checks W1's token before it calls the provider.",
        "W1's lease expiry at t=10.",
    ],
    3,
    [
        "The store checks writes to the store. The payment call never passes through it.",
        "Nobody asked for this refund before: W1's key is new to the provider, so the money moves. A key limits "
        "how many times a request takes effect, not who may send it.",
        "The ack comes after the work; by then the refund has been requested.",
        "A token protects only what compares it, so the payment needs a check of ownership of its own. Keep an "
        "idempotency key on it too: it stops a retried go-between from paying twice, which the token does not.",
        "The expiry let W7 in; it did nothing to stop W1, which never noticed it.",
    ],
)


# A knowledge check's key.
WHY_NOT = {
    "worker_lease_check": (
        "the stale worker's look at its own lease deadline happened in its own memory, "
        "before the pause; when it wakes it writes without looking again, and nothing "
        "outside it stops the write."
    ),
    "lease_expiry": (
        "the expiry let the new worker claim the job, but it stops nothing: the stale worker "
        "never hears that its lease ended, and a store that does not compare tokens accepts "
        "its write."
    ),
    "idempotency_key": (
        "a key makes a repeated operation return the first result; it does not know who owns "
        "the job, and the stale worker's completion is a different write, not a repeat."
    ),
}
