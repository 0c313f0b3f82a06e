"""Lab 02's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

AUTO_REPLAY_QUIZ = Quiz(
    "To save the on-call engineer's time, someone proposes a job that replays the whole DLQ every "
    "5 minutes. What happens to a payload that no handler can read yet?",
    [
        "The retries fix it eventually.",
        "It fails max_attempts times every 5 minutes, for ever, and nobody is told.",
        "It is handled once and acked.",
        "The queue refuses to replay an item twice.",
    ],
    answer_index=1,
    explanations=[
        "Retries help with bad luck, not bad data: the same payload fails the same way every time.",
        "Automatic replay turns the DLQ back into a retry storm, just slower, and hides the problem that needs "
        "a person.",
        "Nothing about the payload or the handler changed, so nothing about the outcome changes.",
        "The queue replays an item as often as it is told to (watch the replays count); the judgement has to be human.",
    ],
)
