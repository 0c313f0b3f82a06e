"""The Lite site's front page: the course's labs, each opened in the single-notebook view.

JupyterLite's own front page sends every visitor to its JupyterLab app, which shows the file
browser beside the notebook (a phone's 390 px leave no room for the notebook) and restores
every tab a learner opened before, each starting its own Pyodide kernel. From this page a lab
opens alone in the notebook app, one kernel per browser tab; the JupyterLab link is there for
those who want it, in a workspace of the lab's own, so other labs' tabs are not restored with
it. (Not `reset`: JupyterLite's reset drops `path` and shows an empty launcher.)
"""

from __future__ import annotations

import html
import json
import urllib.parse
from pathlib import Path

__all__ = ["front_page", "lab_title"]


def lab_title(notebook: Path) -> str:
    """The notebook's first top-level heading, else its file name."""
    cells = json.loads(notebook.read_text(encoding="utf-8")).get("cells", [])
    for cell in cells:
        if cell.get("cell_type") != "markdown":
            continue
        source = "".join(cell.get("source", ""))
        for line in source.splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return notebook.stem


def front_page(notebooks: list[Path], *, title: str = "ShopOps Lab") -> str:
    """The page, as HTML. It keeps JupyterLite's empty `jupyter-config-data` script, which the
    apps read from their parent folder's page, and loads no script of its own."""
    rows = "\n".join(_row(notebook) for notebook in notebooks)
    name = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{name}</title>
<script id="jupyter-config-data" type="application/json" data-jupyter-lite-root=".">{{}}</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0 auto; max-width: 46rem; padding: 1rem; line-height: 1.5; }}
ol {{ padding-left: 1.5rem; }}
li {{ margin: 0.6rem 0; }}
.also {{ font-size: 0.9rem; margin-left: 0.5rem; }}
</style>
</head>
<body>
<h1>{name}</h1>
<p>Python runs in this browser: open a lab, then <em>Run → Run All Cells</em>. Your edits stay in
this browser for this address; hand work in with <em>File → Download</em>.</p>
<ol class="labs">
{rows}
</ol>
</body>
</html>
"""


def _row(notebook: Path) -> str:
    path = urllib.parse.quote(notebook.name)
    workspace = urllib.parse.quote(notebook.stem)
    label = html.escape(lab_title(notebook))
    return (
        f'<li><a class="lab" href="notebooks/index.html?path={path}">{label}</a>'
        f'<a class="also" href="lab/index.html?path={path}&amp;workspace={workspace}">in JupyterLab</a></li>'
    )
