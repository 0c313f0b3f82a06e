"""Things to click: a queue playground, a TTL-and-heartbeat explorer, knowledge checks, the
help under a check (`help`), the course's progress.

Each widget is a plain logic class (tested without a browser) with a thin ipywidgets
layer on top, imported only when a widget is drawn: importing this package never
imports ipywidgets, so the logic runs anywhere, JupyterLite included. Its names load on
first use, so a check that asks a quiz (`widgets.quiz`) does not load the playground and
its pictures: the grader's start pays only for what a lab uses.
"""

from __future__ import annotations

from shopops_lab._lazy import lazy_names

__all__ = [
    "Feedback",
    "PlaygroundModel",
    "PlaygroundState",
    "ProgressView",
    "QueuePlayground",
    "Quiz",
    "TtlExplorer",
    "TtlReport",
    "evaluate_policy",
    "grade_policy",
]

_FROM = {
    "Feedback": "quiz",
    "PlaygroundModel": "playground",
    "PlaygroundState": "playground",
    "ProgressView": "progress",
    "QueuePlayground": "playground",
    "Quiz": "quiz",
    "TtlExplorer": "ttl",
    "TtlReport": "ttl",
    "evaluate_policy": "ttl",
    "grade_policy": "ttl",
}


__getattr__, __dir__ = lazy_names(__name__, _FROM)
