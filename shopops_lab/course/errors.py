"""Errors of the course wing. Like every ShopOpsError, each docstring is the message
template, so the author reads which notebook, which cell and what to change."""

from __future__ import annotations

from collections.abc import Iterable

from shopops_lab.errors import ShopOpsError


class NotebookInvalidError(ShopOpsError):
    """{notebook}: {count} problem(s); nothing was written.
    {details}"""

    problems: tuple[object, ...]

    @classmethod
    def of(cls, notebook: str, problems: Iterable[object]) -> NotebookInvalidError:
        """The error for `problems` found in `notebook` (count and details derived from them)."""
        found = tuple(problems)
        return cls(notebook=notebook, count=len(found), details="\n".join(map(str, found)), problems=found)


class NotebookExecutionError(ShopOpsError):
    """{notebook} cell {cell} ({grade_id}): {problem}. Fix: {fix}."""


class CourseToolsMissingError(ShopOpsError):
    """The course tools need the Python package {package}, which is not installed here. Fix: python -m pip install '{package}' (or reinstall the kit: it declares everything the course needs; `build-notebooks --execute` also wants the kit's `execute` extra)."""


class SubmissionInvalidError(ShopOpsError):
    """{submission}: {problem}. Fix: {fix}."""

    problem: str
    fix: str


class GradingEnvironmentError(ShopOpsError):
    """Lab {lab}'s master imports {module}, which this Python cannot import ({error}); nothing was graded. Fix: {fix}."""


class UnconfinedError(ShopOpsError):
    """Learner code cannot be confined here: {why}; nothing was graded. Fix: {fix}."""

    why: str
    fix: str


class LiteBuildError(ShopOpsError):
    """The JupyterLite site needs {what}, which could not be had from {where}; nothing was written. Fix: {fix}."""


class KitNotebooksMissingError(ShopOpsError):
    """This kit carries no student notebooks ({where} holds no NN_name.ipynb); nothing was copied. Fix: reinstall the kit from a wheel or a checkout that has them: {fix}."""
