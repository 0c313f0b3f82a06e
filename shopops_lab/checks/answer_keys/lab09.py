"""Lab 09's quizzes: each one's right option and explanations (loaded by `checks.answers`)."""

from __future__ import annotations

from shopops_lab.widgets.quiz import Quiz

SHAPE_QUIZ = Quiz(
    "The simulator runs twenty of your workers on one thread. Why must every kit call be awaited?",
    [
        "So the calls run faster.",
        "Each await is where your worker waits for the answer, so the driver can run the other workers, kill "
        "this one, or let its lease run out, between two of its calls.",
        "Because Python forbids plain calls inside an async def.",
        "So the kit can use threads.",
    ],
    1,
    [
        "An await adds no speed: it is a place to stop.",
        "One thread, many workers: each stops at its awaits and the driver chooses who goes on. The explorer "
        "stops a worker there to crash it; a real process is SIGKILLed there.",
        "Plain calls are allowed; but a kit call that is not awaited never happens (the kit says so).",
        "No threads anywhere: that is why it also runs in the browser.",
    ],
    hint="What can happen to a worker between two of its kit calls, and who decides?",
)


KILL_QUIZ = Quiz(
    "Your worker saved its intent, sent the email, and was SIGKILLed before it saved the confirmation. What "
    "does the next delivery do?",
    [
        "Sends again under the same key: the provider dedupes it.",
        "Acks at once: the intent proves the email went out.",
        "Looks the key up: if the email went out, it saves the confirmation and acks; if not, it sends under the "
        "same key.",
        "Sends under a new key, since the first attempt failed.",
    ],
    2,
    [
        "A resend built from a new draft is a different request: the provider refuses it, and a provider that "
        "forgets keys sends it. Ask, do not guess.",
        "An intent says an email may have gone out, not that it did: the request may have been lost.",
        "The intent is a question, and the provider knows the answer.",
        "A new key is a new email: the customer hears twice.",
    ],
    hint="What does an intent without a confirmation tell the next delivery?",
)
