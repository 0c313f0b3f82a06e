"""Loading ipywidgets only when a widget is drawn, so the logic runs anywhere."""
from __future__ import annotations

from types import ModuleType


def ipywidgets() -> ModuleType | None:
    """The ipywidgets module, or None when it is not installed."""
    try:
        import ipywidgets as module
    except ImportError:
        return None
    return module


def show(obj: object) -> None:
    """Display `obj` in the notebook (IPython is always there when a cell runs)."""
    from IPython.display import display

    display(obj)


NO_WIDGETS = ("Sliders and buttons need ipywidgets (`pip install ipywidgets`); "
              "everything below still works by calling the methods directly.")
