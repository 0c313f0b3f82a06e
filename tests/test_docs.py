"""The docs hold what they show: every relative link in the README and the other pages leads to a
file (and a heading, by GitHub's anchor rules) that exists; every `shopops-lab` command in a code
block or in inline code parses with the kit's own parser, options spelled out in full; every
`make` target exists; every repository path in inline code exists; and the README's front door
(its two commands, its course table) and the engine's examples in docs/internals.md stay true.

A newcomer copies these first, so a broken one is a bug. The helpers are also run on broken
pages (`test_a_broken_*`), so this test fails when a doc does."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import shlex
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from urllib.parse import unquote

import pytest

from shopops_lab.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "tests" / "README.md", ROOT / "benchmarks" / "README.md"]
PAGES += [ROOT / ".binder" / "README.md"]
MAKEFILE = (ROOT / "Makefile").read_text(encoding="utf-8")
SHELL_LANGS = {"", "sh", "bash", "shell", "console"}

FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
INLINE = re.compile(r"(`+)((?:(?!\n[ \t]*\n).)+?)\1", re.S)  # a code span ends with its paragraph
LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)
HTML_LINK = re.compile(r"""\b(?:href|src)=["']([^"']+)["']""")
HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
HTML_ANCHOR = re.compile(r"""<a\s[^>]*\b(?:id|name)=["']([^"']+)["']""")
# the kit's command however a page writes it; not a path ending in shopops-lab, not shopops_lab.<module>
COMMAND = re.compile(
    r"(?<![\w/.~$-])(?:\.venv/bin/shopops-lab|shopops-lab|(?:[\w.~/-]*/)?python3? -m shopops_lab)(?=\s|$)"
)
COMMENT = re.compile(r"(?:^|\s)#")
SHELL_END = re.compile(r"\s(?:&&|\|\||\||;|>>?|2>|<|#)(?:\s|$)|;")
MAKE = re.compile(r"(?<![\w-])make[ \t]+([a-z][\w-]*)")
REPO_PATH = re.compile(r"(?:\.ci|\.binder|benchmarks|docs|notebooks|scripts|shopops_lab|solutions|tests)/[\w.*/-]*")


@dataclass
class Page:
    """A markdown page taken apart: its prose (code blocks blanked out), code blocks and code spans."""

    path: Path
    text: str
    prose: str = ""
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (language, source)
    spans: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path, text: str | None = None) -> Page:
        page = cls(path, path.read_text(encoding="utf-8") if text is None else text)
        prose: list[str] = []
        fence: str | None = None
        lang, body = "", []
        for line in page.text.splitlines():
            opened, bare = FENCE.match(line), line.strip()
            if fence is None and opened:
                fence, lang, body = opened.group(1), opened.group(2).lower(), []
                prose.append("")
            elif fence is not None and len(bare) >= len(fence) and bare == fence[0] * len(bare):  # its closing fence
                page.blocks.append((lang, "\n".join(body) + "\n"))
                fence = None
                prose.append("")
            elif fence is not None:
                body.append(line)
                prose.append("")
            else:
                prose.append(line)
        page.prose = "\n".join(prose)
        page.spans = [" ".join(span.split()) for _, span in INLINE.findall(page.prose)]
        return page

    def text_without_code(self) -> str:
        return INLINE.sub(" ", self.prose)

    def anchors(self) -> set[str]:
        """The anchors GitHub gives this page's headings (a repeated one gets -1, -2, ...), and explicit ones."""
        found: set[str] = set()
        seen: dict[str, int] = {}
        for line in self.prose.splitlines():
            heading = HEADING.match(line)
            if heading:
                base = slug(heading.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                found.add(base if count == 0 else f"{base}-{count}")
        return found | set(HTML_ANCHOR.findall(self.prose))

    def links(self) -> list[str]:
        prose = self.text_without_code()
        return LINK.findall(prose) + REFERENCE.findall(prose) + HTML_LINK.findall(prose)

    def commands(self) -> list[tuple[str, bool]]:
        """Every command of the kit shown: (its words after the program, whether it is a whole command).
        A code block's is whole; a span naming only a subcommand (`shopops-lab grade`) is a mention."""
        found = []
        for _, source in self.blocks:
            for line in source.replace("\\\n", " ").splitlines():
                line = COMMENT.split(line, 1)[0]  # a shell or Python comment is prose
                found += [(words, True) for words in command_words(line)]
        for span in self.spans:
            found += [(words, len(shlex.split(words)) > 1) for words in command_words(span)]
        return found

    def make_targets(self) -> list[str]:
        shell = [source for lang, source in self.blocks if lang in SHELL_LANGS]
        return [target for text in [*shell, *self.spans] for target in MAKE.findall(text)]

    def repo_paths(self) -> list[str]:
        return [span for span in self.spans if REPO_PATH.fullmatch(span)]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text as rendered, lowercased, punctuation dropped
    (letters, digits, `_`, `-` and spaces kept), each space a hyphen."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def command_words(line: str) -> list[str]:
    """The argument words of each kit command in `line`, up to the end of the shell command (a
    quote it started in, `&&`, `|`, `;`, a redirect or a comment). A bare program name is none."""
    found = []
    for match in COMMAND.finditer(line):
        rest = line[match.end() :]
        opener = line[match.start() - 1] if match.start() else ""
        if opener and opener in "'\"":
            rest = rest.split(opener, 1)[0]
        rest = " ".join(SHELL_END.split(rest, 1)[0].split())
        if rest:
            found.append(rest)
    return found


def parser_problem(words: str, whole: bool) -> str | None:
    """Why `shopops-lab <words>` does not parse (None when it does). Options must be spelled in
    full: the docs show what a reader types, and argparse would take an abbreviation."""
    try:
        argv = shlex.split(words)
    except ValueError as exc:
        return f"cannot be split as a shell line: {exc}"
    parser = build_parser()
    parsers = [parser]
    while parsers:  # argparse takes --ou for --out; the docs must not rely on that
        each = parsers.pop()
        each.allow_abbrev = False
        for action in each._actions:
            if isinstance(action, argparse._SubParsersAction):
                parsers += list(action.choices.values())
    if not whole:  # a mention: the subcommand must exist
        names = next(a.choices for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return None if argv[0] in names else f"{argv[0]!r} is not a subcommand of shopops-lab"
    errors = io.StringIO()
    with contextlib.redirect_stderr(errors), contextlib.redirect_stdout(io.StringIO()):
        try:
            parser.parse_args(argv)
        except SystemExit as exit:
            if exit.code not in (0, None):
                return errors.getvalue().strip() or f"exit status {exit.code}"
    return None


def link_problem(page: Path, target: str, cache: dict[Path, Page]) -> str | None:
    """Why a link on `page` leads nowhere (None when it leads to a file, and a heading if it names one)."""
    if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, mailto: ...: not this repository's
        return None
    path, _, anchor = target.partition("#")
    file = (page.parent / unquote(path)).resolve() if path else page
    if path and not file.exists():
        return f"{target}: no such file {file.relative_to(ROOT) if file.is_relative_to(ROOT) else file}"
    if not anchor:
        return None
    if file.suffix != ".md":
        return f"{target}: an anchor into a file that is not markdown"
    if file not in cache:
        cache[file] = Page.read(file)
    if unquote(anchor).lower() not in cache[file].anchors():
        return f"{target}: {file.name} has no heading with that anchor"
    return None


READ = {path: Page.read(path) for path in PAGES}


def test_the_pages_exist_and_hold_code_to_check():
    assert all(path.exists() for path in PAGES)
    assert sum(len(page.commands()) for page in READ.values()) > 40
    assert sum(len(page.links()) for page in READ.values()) > 40


@pytest.mark.parametrize("path", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_relative_link_leads_to_a_file_and_heading_that_exist(path):
    cache: dict[Path, Page] = {}
    problems = [problem for target in READ[path].links() if (problem := link_problem(path, target, cache))]
    assert problems == []


@pytest.mark.parametrize("path", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_command_of_the_kit_shown_parses(path):
    problems = [
        f"shopops-lab {words}: {problem}"
        for words, whole in READ[path].commands()
        if (problem := parser_problem(words, whole))
    ]
    assert problems == []


@pytest.mark.parametrize("path", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_make_target_shown_is_in_the_makefile(path):
    missing = [t for t in READ[path].make_targets() if not re.search(rf"^{re.escape(t)}:", MAKEFILE, re.M)]
    assert missing == []


@pytest.mark.parametrize("path", PAGES, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_repository_path_in_inline_code_exists(path):
    missing = [p for p in READ[path].repo_paths() if not (glob(str(ROOT / p)) if "*" in p else (ROOT / p).exists())]
    assert missing == []


# The checks themselves fail on a broken page.


def broken(text: str, name: str = "docs/broken.md") -> Page:
    return Page.read(ROOT / name, text)


def test_a_broken_link_a_missing_heading_and_a_bad_anchor_are_found():
    page = broken(
        "# Top\n\n## The engine: `shopops_lab`\n\nSee [hub](hub.md#4-sizing-the-hub), [gone](nothere.md),"
        " [x](#the-engine-shopops_lab), [y](#no-such-heading), [z](hub.md#no-such-heading),"
        " [web](https://example.com/x), ![pic](../README.md).\n\n```sh\n[not a link](nowhere.md)\n```\n"
    )
    cache = {page.path: page}
    problems = {target: link_problem(page.path, target, cache) for target in page.links()}
    assert [target for target, problem in problems.items() if problem] == [
        "nothere.md",
        "#no-such-heading",
        "hub.md#no-such-heading",
    ]


def test_github_anchor_rules():
    page = broken("# A\n\n## Grading a class with `shopops-lab grade`\n\n## 4. Sizing the hub\n\n## A\n\n## A\n")
    assert page.anchors() == {"a", "grading-a-class-with-shopops-lab-grade", "4-sizing-the-hub", "a-1", "a-2"}
    assert slug("The engine: `shopops_lab`") == "the-engine-shopops_lab"
    assert slug("Run a class: five steps (and **more**)") == "run-a-class-five-steps-and-more"


def test_a_bad_option_an_unknown_subcommand_and_an_abbreviation_are_found():
    page = broken(
        "Run `shopops-lab grade` and `shopops-lab grde`, then `shopops-lab grade x/ --ou y/`.\n\n```sh\n"
        ".venv/bin/shopops-lab grade submitted/ --key solutions/ --out grades/   # fine\n"
        ".venv/bin/shopops-lab grade submitted/ --keys solutions/\n"
        "python -m shopops_lab simulate burst_day --seed 7 && python -m shopops_lab.course.grade.key x\n"
        "shopops-lab lite build --out _site \\\n  --offlin\n"
        "```\n\n```python\nc.Spawner.cmd = ['sh', '-c', 'shopops-lab notebooks \"$HOME/x\" && exec \"$0\"']\n```\n"
    )
    verdicts = [(words, parser_problem(words, whole) is None) for words, whole in page.commands()]
    assert verdicts == [
        ("grade submitted/ --key solutions/ --out grades/", True),
        ("grade submitted/ --keys solutions/", False),
        ("simulate burst_day --seed 7", True),
        ("lite build --out _site --offlin", False),
        ('notebooks "$HOME/x"', True),
        ("grade", True),
        ("grde", False),
        ("grade x/ --ou y/", False),
    ]


def test_a_missing_make_target_and_path_are_found():
    page = broken("```sh\nmake lab\nmake tests   # no such target\n```\n\n`make doctor`, `tests/test_nothing.py`.\n")
    assert [t for t in page.make_targets() if not re.search(rf"^{t}:", MAKEFILE, re.M)] == ["tests"]
    assert [p for p in page.repo_paths() if not (ROOT / p).exists()] == ["tests/test_nothing.py"]


# The README, the front door


def test_the_two_commands_are_the_makefiles():
    readme = READ[README].text
    two = next(source for lang, source in READ[README].blocks if "make lab" in source)
    assert re.search(r"^make lab\b", two, re.M) and re.search(r"^make test\b", two, re.M)
    for target in ("lab", "test", "test-fast", "doctor", "setup", "clean"):
        assert re.search(rf"^{target}:", MAKEFILE, re.M), target
        assert f"make {target}" in readme, target
    for target in ("lab", "test"):  # "set up everything, then ..."
        assert re.search(rf"^{target}: setup$", MAKEFILE, re.M), target
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test" in ci


def test_the_readme_is_a_front_door():
    """About 250 lines: what the kit is, the two commands, the course, where to go next."""
    lines = READ[README].text.splitlines()
    assert len(lines) <= 260, len(lines)
    headings = [line for line in lines if line.startswith("## ")]
    assert headings[:3] == ["## Two commands", "## The course", "## In the browser"], headings
    assert "## Where to go next" in headings
    for page in ("docs/learners.md", "docs/instructors.md", "docs/hub.md", "docs/operators.md", "docs/internals.md"):
        assert f"]({page}" in READ[README].text, page


def test_the_course_table_gives_every_labs_points_as_its_master_does():
    from shopops_lab.course.grade.key import Key

    rows = re.findall(r"^\| \[[^]]+\]\(notebooks/(\d\d)_\w+\.ipynb\) \| \d+ min \| (\d+) \|", READ[README].text, re.M)
    masters = Key.load(ROOT / "solutions").masters
    assert dict(rows) == {lab: f"{master.max_points:g}" for lab, master in masters.items()}
    assert dict(rows)["09"] == "20"


# The engine's examples (docs/internals.md): a reader runs them first


INTERNALS = READ[ROOT / "docs" / "internals.md"]
PYTHON_BLOCKS = [source for lang, source in INTERNALS.blocks if lang == "python"]


def python_block(marker: str) -> str:
    (block,) = [source for source in PYTHON_BLOCKS if marker in source]
    return block


def run_block(source: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "docs/internals.md", "exec"), {"__name__": "docs"})
    return out.getvalue()


def test_the_engine_example_shows_one_email_and_a_rejected_stale_ack():
    out = run_block(python_block("InMemoryQueue(lease_seconds=30"))
    assert out.splitlines()[0] == "1 2"
    assert "acked" in out and "stale_rejected" in out


def test_the_simulator_example_names_the_double_contact_and_the_replay():
    out = run_block(python_block("from shopops_lab.sim import run"))
    assert "double_contact" in out
    assert "shopops-lab simulate burst_day --seed 7 --adapter naive" in out


def test_the_module_table_names_every_module_of_the_package_and_no_other():
    table = INTERNALS.text.split("What is where", 1)[1].split("\n\n", 2)[1]
    named = {name for row in table.splitlines()[2:] for name in re.findall(r"`([\w.]+)`", row.split("|")[1])}
    package = ROOT / "shopops_lab"
    modules = {path.stem for path in package.glob("*.py") if not path.stem.startswith("_")}
    modules |= {path.parent.name for path in package.glob("*/__init__.py")}
    assert {name.split(".")[0] for name in named} == modules
