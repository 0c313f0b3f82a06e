"""Things to click: a queue playground, a TTL-and-heartbeat explorer, knowledge checks.

Each widget is a plain logic class (tested without a browser) with a thin ipywidgets
layer on top, imported only when a widget is drawn: importing this package never
imports ipywidgets, so the logic runs anywhere, JupyterLite included.
"""

from shopops_lab.widgets.playground import (
    PlaygroundModel,
    PlaygroundState,
    QueuePlayground,
)
from shopops_lab.widgets.quiz import Feedback, Quiz
from shopops_lab.widgets.ttl import (
    TtlExplorer,
    TtlReport,
    evaluate_policy,
    grade_policy,
)

__all__ = [
    "Feedback",
    "PlaygroundModel",
    "PlaygroundState",
    "QueuePlayground",
    "Quiz",
    "TtlExplorer",
    "TtlReport",
    "evaluate_policy",
    "grade_policy",
]
