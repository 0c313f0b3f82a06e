"""CSV as a spreadsheet reads it safely: a cell that would be taken for a formula (it starts
with = + - @, a tab or a carriage return: OWASP's list) is written after a `'`, which the
spreadsheet shows as text; reading the file back takes that `'` off again."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from shopops_lab.errors import BadArgumentError

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


def safe(text: str) -> str:
    """`text` as a cell a spreadsheet shows as text (a number, or `-` alone, stays as it is)."""
    if text.startswith(FORMULA_STARTS) and text != "-" and not NUMBER.match(text):
        return "'" + text
    return text


def unsafe(text: str) -> str:
    """A cell read back from a file `safe` wrote: the `'` it put first taken off."""
    return text[1:] if text.startswith("'") and text[1:].startswith(FORMULA_STARTS) else text


def csv_text(rows: Iterable[Sequence[str]]) -> str:
    """The rows as CSV text, every cell made `safe`."""
    stream = io.StringIO()
    writer = csv.writer(stream, lineterminator="\n")
    for row in rows:
        writer.writerow([safe(cell) for cell in row])
    return stream.getvalue()


def read_rows(path: str | Path, *, field: str, fix: str) -> csv.DictReader[str]:
    """The rows of a CSV file the instructor gives (UTF-8, a spreadsheet's BOM allowed);
    BadArgumentError naming `field` and `fix` if it cannot be read."""
    try:
        text = Path(path).read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadArgumentError(field=field, problem=f"cannot be read ({type(exc).__name__}: {exc})", fix=fix) from None
    return csv.DictReader(io.StringIO(text))
