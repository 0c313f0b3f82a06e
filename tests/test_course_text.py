"""What the course text promises its learners and graders, read from the stored notebooks.

- No student notebook states a graded answer: no line of a model answer (the code between a
  master's solution markers, the text of a written answer) appears in the student copy, in its
  cells or in its stored outputs, unless the master also shows that line outside its answers.
- Every hand-graded written answer has a rubric: in the master's instructor notes (elements,
  a full-marks and a partial example) and in the cell's metadata, adding up to its points; the
  build keeps both out of the student copy.
- Every picture a notebook stores carries a text alternative a screen reader announces.
- Every lab maps its terms to the industry's, near its summary.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

import nbformat
import pytest

from shopops_lab.course import cells
from shopops_lab.course import source as src
from shopops_lab.course.build import build_student
from shopops_lab.course.metadata import validate_notebook

ROOT = Path(__file__).resolve().parent.parent
MASTERS = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
LABS = [path.name for path in MASTERS]
MIN_LINE = 16  # shorter lines ("pass", "return True") say nothing on their own
INSTRUCTOR_NOTES = "Instructor notes"


def read(path: Path):
    return nbformat.read(path, as_version=4)


def is_answer(cell) -> bool:
    return cell.metadata.get("nbgrader", {}).get("solution") is True


def is_written(cell) -> bool:
    meta = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "markdown" and meta.get("solution") is True and meta.get("grade") is True


def answer_text(cell) -> str:
    """The model answer in a master's answer cell: its solution regions, or the whole cell."""
    regions = re.findall(
        rf"{re.escape(src.BEGIN_SOLUTION)}\n(.*?){re.escape(src.END_SOLUTION)}", cell.source, flags=re.DOTALL
    )
    return "\n".join(regions) if regions else cell.source


def squeeze(text: str) -> str:
    """Text as compared: spaces and line breaks squeezed, markdown emphasis ignored."""
    return " ".join(text.replace("*", "").replace("`", "").split())


def normal(line: str) -> str:
    """An answer line as compared: its code comment dropped, then squeezed."""
    return squeeze(re.sub(r"\s+#.*$", "", line) if not line.lstrip().startswith("#") else "")


def secret_lines(master) -> set[str]:
    """Lines of the master's model answers that the master's other text does not show (an
    exercise's introduction may name the calls an answer makes)."""
    answers, public = set(), []
    for cell in master.cells:
        if is_answer(cell):
            answers |= {normal(line) for line in answer_text(cell).splitlines()}
            if answer_text(cell) != cell.source:
                public.append(src.replace_regions(cell.source, src.BEGIN_SOLUTION, src.END_SOLUTION, ())[0])
        else:
            public.append(cell.source)
    shown = squeeze("\n".join(public))
    return {line for line in answers if len(line) >= MIN_LINE and line not in shown}


def notebook_words(nb) -> str:
    """Everything a learner can read in a notebook: cell sources and stored outputs."""
    parts = []
    for cell in nb.cells:
        parts.append(cell.source)
        for output in cell.get("outputs", []):
            parts.append(str(output.get("text", "")))
            for key, value in output.get("data", {}).items():
                if key.startswith("text/") or key == "image/svg+xml":
                    parts.append(value if isinstance(value, str) else "".join(value))
    return squeeze("\n".join(parts))


def leaks(master, student) -> list[str]:
    words = notebook_words(student)
    return sorted(line for line in secret_lines(master) if line in words)


def pair(name: str):
    return read(ROOT / "solutions" / name), read(ROOT / "notebooks" / name)


# ---------------------------------------------------------------- no giveaways
@pytest.mark.parametrize("name", LABS)
def test_no_student_notebook_contains_a_model_answer(name):
    master, student = pair(name)
    assert secret_lines(master), f"{name}: no model answer found to look for"
    assert leaks(master, student) == []


def test_a_leaked_answer_line_is_found_in_a_cell_and_in_an_output():
    master, student = pair("04_fencing_tokens.ipynb")
    secret = sorted(secret_lines(master))[0]
    in_cell = copy.deepcopy(student)
    in_cell.cells[0].source += "\n" + secret
    in_output = copy.deepcopy(student)
    code = next(cell for cell in in_output.cells if cell.cell_type == "code")
    code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=f"look: {secret}\n")]
    assert leaks(master, in_cell) == [secret] and leaks(master, in_output) == [secret]


def test_a_written_answers_model_text_counts_as_secret():
    master, _ = pair("06_outbox.ipynb")
    written = next(cell for cell in master.cells if is_written(cell))
    assert normal(written.source.splitlines()[0]) in secret_lines(master)


def test_lab07s_closing_page_does_not_list_the_contract():
    """Exercise 7.2 asks which pieces make up the contract; the page after it must not say."""
    _, student = pair("07_burst_day.ipynb")
    closing = student.cells[-1].source
    assert "The course in one page" in closing
    named = [
        piece
        for piece in ("at least once", "idempotency key", "fencing token", "checkpoint")
        if piece in closing.lower().replace("-", " ")
    ]
    assert len(named) < 4, named


def test_lab08s_quiz_shows_no_way_to_write_08_1():
    """The crash quiz asks about a transaction in general: neither the student notebook nor
    the question and options it displays show a line of 08.1's answer."""
    from shopops_lab.checks import lab08

    _, student = pair("08_real_crashes.ipynb")
    quiz = " ".join([lab08.CRASH_QUIZ.question, *lab08.CRASH_QUIZ.options])
    assert "shop.ack(lease); shop.credit" not in notebook_words(student)
    assert "shop." not in quiz and "transaction()" not in quiz


# ---------------------------------------------------------------- rubrics
def written_cells():
    for path in MASTERS:
        for cell in read(path).cells:
            if is_written(cell):
                yield path.name, cell


def test_the_course_has_twelve_hand_graded_points_each_with_a_rubric():
    found = list(written_cells())
    assert sum(cell.metadata.nbgrader.points for _, cell in found) == 12
    for name, cell in found:
        rubric = cell.metadata.get("shopops_lab", {}).get("rubric")
        assert rubric, f"{name} {cell.id}: no rubric in metadata.shopops_lab.rubric"
        assert sum(entry["points"] for entry in rubric) == cell.metadata.nbgrader.points
        notes = cell.source.split(INSTRUCTOR_NOTES, 1)
        assert len(notes) == 2 and len(notes[0].strip()) > 100, f"{name}: model answer, then the notes"
        assert "*Full marks" in notes[1] and "*Partial" in notes[1] and "| points |" in notes[1], name


@pytest.mark.parametrize("name", LABS)
def test_no_student_notebook_carries_a_rubric_or_instructor_notes(name):
    master, student = pair(name)
    assert [cell.id for cell in master.cells] == [cell.id for cell in student.cells]
    for mine, theirs in zip(master.cells, student.cells):
        assert "rubric" not in theirs.metadata.get("shopops_lab", {})
        if is_written(mine):
            assert theirs.source == "\n".join(src.TEXT_STUB)
    assert INSTRUCTOR_NOTES not in notebook_words(student)
    assert validate_notebook(student, name, role="student") == []


def rubric_master(rubric, points=2):
    written = cells.written("Model answer.\n\n---\n**Instructor notes** ...", "why", points)
    written.metadata["shopops_lab"] = {"rubric": rubric}
    return cells.notebook([cells.md("# Lab 99"), written], lab="99", version="1", title="test")


def test_the_build_drops_the_rubric_and_a_student_copy_with_one_is_refused():
    master = rubric_master([{"points": 1, "element": "names the gap"}, {"points": 1, "element": "names the worker"}])
    student = build_student(master)
    assert "shopops_lab" not in student.cells[1].metadata and student.cells[1].source == "YOUR ANSWER HERE"
    assert master.cells[1].metadata.shopops_lab.rubric[0]["element"] == "names the gap"  # the master keeps it
    leaked = copy.deepcopy(student)
    leaked.cells[1].metadata["shopops_lab"] = {"rubric": master.cells[1].metadata.shopops_lab.rubric}
    assert [p.field for p in validate_notebook(leaked, "lab 99", role="student")] == ["metadata.shopops_lab.rubric"]


@pytest.mark.parametrize(
    "rubric, problem",
    [
        ([{"points": 1, "element": "only half"}], "adds up to 1 points, the cell is worth 2"),
        ([], "non-empty list"),
        ([{"points": 2, "element": " "}], "non-empty list"),
        ([{"points": 0, "element": "free"}, {"points": 2, "element": "all"}], "non-empty list"),
        ([{"points": 2, "element": "all", "note": "extra"}], "non-empty list"),
        ("2 points for the gap", "non-empty list"),
    ],
)
def test_a_bad_rubric_is_refused_by_name(rubric, problem):
    from shopops_lab.course.errors import NotebookInvalidError

    with pytest.raises(NotebookInvalidError, match=problem):
        rubric_master(rubric)


def test_a_rubric_belongs_on_a_written_answer_only():
    from shopops_lab.course.errors import NotebookInvalidError

    code = cells.code("x = 1")
    code.metadata["shopops_lab"] = {"rubric": [{"points": 1, "element": "x"}]}
    with pytest.raises(NotebookInvalidError, match="only a hand-graded written answer has a rubric"):
        cells.notebook([code], lab="99", version="1", title="test")


# ---------------------------------------------------------------- pictures a screen reader can name
IMG_TAG = re.compile(r"<img\b[^>]*>")
SVG_ROOT = re.compile(r"<svg\b[^>]*>")


def accessible_name(tag: str, attribute: str) -> str:
    found = re.search(rf'\s{attribute}="([^"]*)"', tag)
    return found.group(1).strip() if found else ""


def picture_problems(nb) -> list[str]:
    """Every picture output must reach the page as an <img alt> (or an inline <svg role="img"
    aria-label>): a notebook front end shows a bare image/png or image/svg+xml output through
    an <img> with no alt, and a <title> inside such an SVG is not announced."""
    problems = []
    for index, cell in enumerate(nb.cells):
        for output in cell.get("outputs", []):
            data = output.get("data", {})
            page = data.get("text/html", "")
            page = page if isinstance(page, str) else "".join(page)
            images = IMG_TAG.findall(page)
            inline = SVG_ROOT.findall(page)
            if ("image/png" in data or "image/svg+xml" in data) and not images and not inline:
                problems.append(f"cell {index}: an image output with no HTML <img alt> beside it")
            problems += [f"cell {index}: <img> without alt text" for tag in images if not accessible_name(tag, "alt")]
            problems += [
                f"cell {index}: inline <svg> without role=img and aria-label"
                for tag in inline
                if accessible_name(tag, "role") != "img" or not accessible_name(tag, "aria-label")
            ]
    return problems


@pytest.mark.parametrize("folder", ["solutions", "notebooks"])
@pytest.mark.parametrize("name", LABS)
def test_every_stored_picture_carries_an_accessible_name(folder, name):
    nb = read(ROOT / folder / name)
    assert picture_problems(nb) == []


def test_a_bare_picture_output_is_found():
    nb = nbformat.v4.new_notebook()
    bare = nbformat.v4.new_code_cell("x")
    bare.outputs = [nbformat.v4.new_output("display_data", data={"image/png": "iVBO", "text/plain": "<Figure>"})]
    no_alt = nbformat.v4.new_code_cell("y")
    page = '<img src="data:image/png;base64,iVBO">'
    no_alt.outputs = [nbformat.v4.new_output("display_data", data={"text/html": page, "image/png": "iVBO"})]
    silent = nbformat.v4.new_code_cell("z")
    silent.outputs = [nbformat.v4.new_output("display_data", data={"text/html": "<svg><title>t</title></svg>"})]
    nb.cells = [bare, no_alt, silent]
    assert picture_problems(nb) == [
        "cell 0: an image output with no HTML <img alt> beside it",
        "cell 1: <img> without alt text",
        "cell 2: inline <svg> without role=img and aria-label",
    ]


def test_the_labs_store_pictures_to_check():
    stored = sum(
        1
        for path in MASTERS
        for cell in read(path).cells
        for output in cell.get("outputs", [])
        if {"image/png", "image/svg+xml"} & set(output.get("data", {}))
    )
    assert stored >= 20


# ---------------------------------------------------------------- the industry's words
@pytest.mark.parametrize("name", LABS)
def test_every_lab_maps_its_terms_to_the_industry_near_its_summary(name):
    master = read(ROOT / "solutions" / name)
    titles = [cell.source.splitlines()[0] if cell.source else "" for cell in master.cells]
    table = titles.index("## Where the kit meets the industry")
    header = master.cells[table].source
    for system in ("SQS", "RabbitMQ", "Temporal", "PostgreSQL"):
        assert system in header
    summary = next(
        i for i, title in enumerate(titles) if title in ("## Summary", "## What a production system adds")
    )  # lab 07 closes the course
    assert 0 < summary - table <= 6, "the table sits just before the summary"


# ---------------------------------------------------------------- claims the course no longer makes
def markdown_of(name: str) -> str:
    return "\n".join(cell.source for cell in read(ROOT / "solutions" / name).cells if cell.cell_type == "markdown")


def test_labs_06_and_08_promise_effectively_once_not_exactly_once():
    for name in ("06_outbox.ipynb", "08_real_crashes.ipynb"):
        text = markdown_of(name).replace("\n", " ")
        assert "effectively once" in text, name
        assert re.findall(r"(?<!never )(?<!nobody can promise )(?<!delivers )exactly.once", text) == [], name


def test_the_course_map_lists_every_lab():
    course_map = next(cell.source for cell in read(MASTERS[0]).cells if cell.source.startswith("## The course map"))
    for path in MASTERS[1:]:
        assert f"**{path.name[:2]} " in course_map, path.name


def test_the_readme_states_each_labs_time_as_its_first_cell_does():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for master in MASTERS:
        first = "".join(nbformat.read(master, as_version=4).cells[0].source)
        (minutes,) = re.findall(r"about (\d+) minutes", first) or ["none stated"]
        row = re.search(rf"^\| \[[^]]+\]\(notebooks/{re.escape(master.name)}\) \| (\d+) min", readme, re.M)
        assert row is not None and row.group(1) == minutes, master.name
