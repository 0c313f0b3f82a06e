"""What the gradebook knows of a lab once its master is read: its title, version, graded
cells (points, kind, rubric) and due date. A later run writes every file from these, so a
gradebook holding several labs needs no master but those it grades again."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from shopops_lab.course.grade.key import Kind, Master, RubricElement


@dataclass(frozen=True, slots=True)
class Cell:
    """One graded cell of a lab, as the gradebook needs it."""

    grade_id: str
    kind: Kind
    points: float
    rubric: tuple[RubricElement, ...] = ()


@dataclass(frozen=True, slots=True)
class Sheet:
    """What one lab grades (from its master): title, version, graded cells; and its due date."""

    lab: str
    title: str
    version: str
    cells: tuple[Cell, ...]
    due: datetime | None = None

    @classmethod
    def of(cls, master: Master, due: datetime | None = None) -> Sheet:
        cells = tuple(Cell(cell.grade_id, cell.kind, cell.points, cell.rubric) for cell in master.graded)
        return cls(master.lab, master.title, master.version, cells, due)

    @property
    def max_points(self) -> float:
        return sum(cell.points for cell in self.cells)

    @property
    def hand_points(self) -> float:
        return sum(cell.points for cell in self.cells if cell.kind is Kind.MANUAL)

    @property
    def name(self) -> str:
        return f"Lab {self.lab}: {self.title}" if self.title else f"Lab {self.lab}"
