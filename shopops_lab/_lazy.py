"""Names a package hands out from its modules, each module loaded on first use (PEP 562), so
importing the package loads none of them: `shopops-lab grade` starts without the front
door's engine, a check's quiz without the playground, the grader's layout without the CLI."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose name N is `package.<where[N]>.N`."""

    def __getattr__(name: str) -> Any:
        if name in where:
            return getattr(import_module(f"{package}.{where[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*vars(import_module(package)), *where})

    return __getattr__, __dir__
