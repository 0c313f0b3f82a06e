"""Lab 08's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

CRASH_QUIZ = Quiz(
    "A worker opens one transaction, moves its item to done and writes an audit row in it, and is SIGKILLed "
    "after the audit row, before the transaction commits. What does the database hold, and what happens next?",
    [
        "The item is done and the audit row is lost.",
        "Neither write: the item is still leased to the dead worker, its lease runs out, and another worker takes "
        "it and does the work again.",
        "Both: the database keeps whatever a dead worker had written.",
        "The audit row, and the item goes to the dead-letter queue.",
    ],
    1,
    [
        "Inside one transaction nothing is kept until it commits; the item's move was not committed either.",
        "A transaction that never committed left no trace, so the redelivery starts from a clean slate.",
        "A database rolls back every transaction whose connection dies before COMMIT.",
        "Nothing was committed, and one killed delivery is far from max attempts.",
    ],
    hint="When does anything inside a transaction become visible to another worker?",
)
