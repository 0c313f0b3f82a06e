"""Lab 07's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

DOUBLE_POOL_QUIZ = Quiz(
    "Burst day, no backpressure. To finish sooner, someone doubles the pool from 20 to 40 workers. The "
    "gateway still serves 10 calls at full speed. What happens?",
    [
        "The day finishes about twice as fast: twice the workers, twice the throughput.",
        "About the same throughput; every call gets slower, more calls time out, and approvals take longer.",
        "Nothing changes: the queue only hands out as many items as the gateway can take.",
        "Throughput doubles during the spike only, when the extra workers absorb the slow calls.",
    ],
    1,
    [
        "Throughput is set by the gateway: capacity / latency. More callers make each call slower, not more "
        "calls finish.",
        "Forty calls share hardware for ten, so each takes four times as long: the same throughput, four times "
        "the latency, a fatter tail past the timeout, and every timeout is work done twice. A real gateway "
        "can even lose throughput, as retries pile onto abandoned calls.",
        "The queue hands an item to every worker that asks; it knows nothing about the gateway. Only a "
        "policy that reads the gateway's signals can hold workers back.",
        "During the spike every call is slower still; extra callers make it worse, not better.",
    ],
)


VITAL_SIGNS_QUIZ = Quiz(
    "Read the vital signs printed above for the day with no backpressure. Which of them says the trouble is the "
    "gateway, not the queue or the workers?",
    [
        "Time in queue: its p95 is counted in hours.",
        "The gateway's timeouts next to the redeliveries: a large share of the items that went round again went "
        "round because their model call timed out.",
        "DLQ age: items sit in the dead-letter queue.",
        "The attempts histogram: most items were delivered once.",
    ],
    1,
    [
        "On burst day the queue is the buffer: thousands of items at about one a second take hours whatever the "
        "gateway does. A long time in queue says the day is big, not that anything is broken; what matters is who "
        "waits.",
        "Each timeout held a worker for the whole timeout and sent its item round again, so timeouts show up as "
        "redeliveries (and as 2s in the attempts histogram); the rest are the day's crashes and lost acks, whose "
        "leases expired. Redeliveries that rise with the gateway's timeouts are the gateway melting; on a calm "
        "gateway they are crashes, or a lease too short for the model (lab 03).",
        "The dead-letter queue holds the poison payloads, a few items that fail the same way every time. Their age "
        "says how long nobody has looked at them, which calls for an alert, not backpressure.",
        "Most items delivered once is the healthy part of the histogram. The tail at 2 and more is where the "
        "trouble shows, and the timeouts explain it.",
    ],
)


# A knowledge check's key.
CONTRACT = frozenset({"at_least_once_delivery", "idempotency_keys", "fencing_tokens", "checkpoints"})

WHY_NOT = {
    "exactly_once_delivery": (
        "no broker can promise it across crash domains: to the queue, a worker that "
        "died after the send and before the ack looks exactly like one that died "
        "before sending, so the item must be handed out again, and the send may repeat."
    ),
    "retry_until_success": (
        "a poison payload fails the same way every time; retrying it for ever is a retry "
        "storm. It goes to the dead-letter queue after max_attempts (lab 02)."
    ),
    "long_leases": (
        "a long lease only delays the redelivery after a crash, and a frozen worker can outlive "
        "any lease (lab 03); it makes duplicates rarer, never impossible."
    ),
}

# What goes wrong without a missing piece: the failure, never the piece's name, nor the lab
# whose title would name it.
MISSING = {
    "at_least_once_delivery": "without it, the case held by a worker that died is simply lost",
    "idempotency_keys": "without it, every redelivery after a send is a second email to the customer",
    "fencing_tokens": "without it, a worker that wakes up stale overwrites its successor's record",
    "checkpoints": (
        "without it, a redelivered case redoes steps that were already done, and an effect "
        "whose outcome is unknown is repeated instead of looked up"
    ),
}
