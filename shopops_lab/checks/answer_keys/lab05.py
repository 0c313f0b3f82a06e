"""Lab 05's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

INTENT_QUIZ = Quiz(
    "A run crashed after writing the intent O-1001:publish:v1. The restart finds the intent and no "
    "receipt. What should it do first?",
    [
        "Send the email again under a fresh key, to be sure it goes out.",
        "Mark publish as confirmed: the intent proves the email was sent.",
        "Look the operation up with the provider, under O-1001:publish:v1.",
        "Re-run summarize, then send the new summary.",
    ],
    2,
    [
        "A fresh key defeats the provider's dedupe: if the first email went out, Jordan gets two.",
        "The intent is written before the send: the worker may have died before sending anything.",
        "The intent says the email may have gone out; only the provider knows. Delivered: record the "
        "receipt. Not delivered: send under the same id.",
        "summary-v2 was never approved, and the question of the first email is still open.",
    ],
    hint="An intent without a receipt is a question, not an answer.",
)


CHECKPOINT_QUIZ = Quiz(
    "Which of these belongs in O-1001's checkpoint so a restart repeats nothing irreversible?",
    [
        "The full conversation with the model, so the agent can re-read it and decide again.",
        "The plan version, the confirmed steps with their artifacts, and intents and receipts.",
        "The worker's process id and the time it started.",
        "Only the last confirmed step: everything else can be recomputed.",
    ],
    1,
    [
        "A transcript explains a decision; resuming from it means deciding again, maybe differently.",
        "Those are the decisions: which plan, what is done, what it produced, what went out.",
        "A new worker resumes the job; the old worker's identity does not help it.",
        "Recomputing summarize makes summary-v2, which nobody approved; and the email needs its receipt.",
    ],
    hint="What would be different if the step ran a second time?",
)
