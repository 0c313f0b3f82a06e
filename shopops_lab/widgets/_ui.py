"""Loading ipywidgets only when a widget is drawn, so the logic runs anywhere."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from shopops_lab import live


def ipywidgets() -> ModuleType | None:
    """The ipywidgets module, or None when it is not installed."""
    try:
        import ipywidgets as module
    except ImportError:
        return None
    return module


def show(widget: object | None, static_html: Callable[[str], str], label: str) -> None:
    """Display a live widget, or, without ipywidgets, its static picture.

    A saved notebook keeps no widget state, so the live widget travels with a static HTML
    copy and a one-line text: that is what a reader sees before running the cell (the
    course build stores only those two), and what nbval compares."""
    from IPython.display import display

    if widget is None:
        display({"text/html": static_html(NO_WIDGETS), "text/plain": label}, raw=True)
        return
    # the page's announcer, before the widget: it says the widget's results and names its sliders
    display({"text/html": live.script(), "text/plain": ""}, raw=True)
    bundle = dict(widget._repr_mimebundle_())  # type: ignore[attr-defined]
    bundle["text/html"] = static_html(RUN_ME)
    bundle["text/plain"] = label
    display(bundle, raw=True)


NO_WIDGETS = (
    "Sliders and buttons need ipywidgets (`pip install ipywidgets`); "
    "everything below still works by calling the methods directly."
)
RUN_ME = "A saved copy: run this cell to get the buttons and sliders."


class LiveWidget:
    """What every kit widget shares: its ipywidgets box is built once, on first display,
    and travels with a static HTML copy (`static_html(note)`) and a one-line `label()`.
    Subclasses say how to build the box (`build(w)`, given the ipywidgets module)."""

    _box: Any = None

    def build(self, w: ModuleType) -> Any:
        raise TypeError(f"{type(self).__name__} must define build(w)")

    def static_html(self, note: str) -> str:
        raise TypeError(f"{type(self).__name__} must define static_html(note)")

    def label(self) -> str:
        return type(self).__name__

    def widget(self) -> Any:
        """The ipywidgets box (built once), or None without ipywidgets."""
        w = ipywidgets()
        if w is None:
            return None
        if self._box is None:
            self._box = self.build(w)
        return self._box

    def display(self) -> None:
        show(self.widget(), self.static_html, self.label())

    def _ipython_display_(self) -> None:
        self.display()
