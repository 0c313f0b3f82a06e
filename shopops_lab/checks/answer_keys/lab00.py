"""Lab 00's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

LEASE_RUNS_OUT_QUIZ = Quiz(
    "W1 emailed Jordan about O-1001, then crashed before its ack. What does the queue do when W1's lease runs out?",
    [
        "It marks O-1001 done, because the email went out.",
        "It makes the item ready again, so another worker runs it.",
        "It deletes the item, because its worker is gone.",
        "It waits for W1 to restart and finish.",
    ],
    answer_index=1,
    explanations=[
        "The queue never saw the email. Only an ack tells it the work is finished.",
        "A lease that runs out gives the work back. That is how no case gets lost, and also why the same work "
        "can run twice.",
        "Deleting would lose Jordan's case. The point of a lease is that the work outlives the worker.",
        "The queue cannot know whether W1 will ever come back; waiting for it could stall the case forever.",
    ],
)
