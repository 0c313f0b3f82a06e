"""Lab 03's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

HEARTBEAT_FALSE_QUIZ = Quiz(
    "W1 is drafting Jordan's email and its heartbeat just returned False. What should it do?",
    [
        "Heartbeat again until it returns True, then carry on.",
        "Send the email quickly and ack before anyone notices.",
        "Stop: no send, no ack, no write. The case belongs to someone else now.",
        "Acquire the item again so it gets a fresh lease.",
    ],
    2,
    [
        "False is final for this lease: it expired, or a newer claim exists. Retrying cannot bring it back.",
        "Someone else may be sending the same email right now, and the queue will refuse the ack anyway.",
        "The lease is gone, so any effect now races the new owner. Dropping the draft wastes a little work; "
        "going on risks a duplicate.",
        "The case is held by another worker, so acquire will not hand it back; and the draft would be redone anyway.",
    ],
)


LONGER_TTL_QUIZ = Quiz(
    "You keep heartbeats every 15 s and raise the TTL from 45 s to 90 s. What gets worse?",
    [
        "Healthy 120 s drafts lose their lease more often.",
        "A crashed worker's case waits up to twice as long before anyone retries it.",
        "The queue receives twice as many heartbeats.",
        "Nothing: a longer lease is always safer.",
    ],
    1,
    [
        "A longer TTL only makes spurious expiry rarer: more heartbeats can be lost before the deadline passes.",
        "The worst-case wait after a crash is the TTL itself: 45 s becomes 90 s.",
        "The load depends on the interval (4 per minute per worker here), not on the TTL.",
        "Safer against lost heartbeats, yes; but slower to notice a dead worker. Every lease choice trades these two.",
    ],
)
