"""Facades that hand the learner methods, never a path to what the check judges.

A facade's methods must reach the database (or the world) they act on, but the learner's
code must not: a handler that finds `shop._store`, or the refunds list in a closure cell,
can write the evidence itself. So a facade object keeps nothing: it is a slotted instance
with no attributes, its methods are plain functions of its class (no closures), and what
it acts on is kept here, keyed by the facade, in a table no facade refers to. `vars()`,
`__closure__`, `__self__` and `gc.get_referents` on what the learner is handed find nothing
but the facade and its class. (Python in one process hides nothing from a determined
search of every object, module or stack frame: in a notebook the check's own frames sit
above the learner's call. The grader's process boundary closes that: there the learner's
process holds only handles, and the judge's frames and records live in another process.)
"""

from __future__ import annotations

import weakref
from typing import Any

_BEHIND: weakref.WeakKeyDictionary[Any, Any] = weakref.WeakKeyDictionary()


def seal(facade: Any, behind: Any) -> Any:
    """Keep `behind` (what `facade`'s methods act on) out of the facade; return the facade."""
    _BEHIND[facade] = behind
    return facade


def behind(facade: Any) -> Any:
    """What `facade` acts on (for the facade's own methods)."""
    return _BEHIND[facade]
