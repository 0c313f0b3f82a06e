"""The Lite site's front page: the course's labs, each opened in the single-notebook view, with
what it teaches, its time and points, and the exercises this browser has passed.

JupyterLite's own front page sends every visitor to its JupyterLab app, which shows the file
browser beside the notebook (a phone's 390 px leave no room for the notebook) and restores
every tab a learner opened before, each starting its own Pyodide kernel. From this page a lab
opens alone in the notebook app, one kernel per browser tab; the JupyterLab link is there for
those who want it, in a workspace of the lab's own, so other labs' tabs are not restored with
it. (Not `reset`: JupyterLite's reset drops `path` and shows an empty launcher.)

The goals, minutes and points come from the course map the kit ships (`catalogue`); a lab the
map does not know shows its title alone. Progress is what the labs' checks recorded in this
browser (`shopops_lab.progress`: the IndexedDB database `shopops-lab`), read by the page's one
inline script; without it the page is the same, less the ticks.
"""

from __future__ import annotations

import html
import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def front_page(notebooks: list[Path], *, title: str = "ShopOps Lab", course: Mapping[str, Any] | None = None) -> str:
    """The page, as HTML. It keeps JupyterLite's empty `jupyter-config-data` script, which the
    apps read from their parent folder's page. `course`: the course map (`catalogue`)."""
    labs = {lab["file"]: lab for lab in (course or {}).get("labs", [])}
    rows = "\n".join(_row(notebook, labs.get(notebook.name)) for notebook in notebooks)
    minutes = sum(labs[n.name]["minutes"] for n in notebooks if n.name in labs)
    total = f" About {minutes // 60} hours {minutes % 60} minutes in all." if minutes else ""
    name = html.escape(title)
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{name}</title>
<link rel="icon" href="data:,">
<script id="jupyter-config-data" type="application/json" data-jupyter-lite-root=".">{{}}</script>
<style>
body {{ font-family: system-ui, sans-serif; margin: 0 auto; max-width: 46rem; padding: 1rem; line-height: 1.5; }}
ol {{ padding-left: 0; list-style: none; }}
li.lab-row {{ margin: 1.2rem 0; border-top: 1px solid #ccc; padding-top: 0.6rem; }}
h2 {{ font-size: 1.2rem; margin: 0; }}
.facts {{ margin: 0.2rem 0; color: #333; }}
.goals {{ margin: 0.2rem 0; padding-left: 1.2rem; }}
.done {{ font-weight: 600; }}
</style>
</head>
<body>
<main>
<h1>{name}</h1>
<p>Python runs in this browser: open a lab, then <em>Run → Run All Cells</em>. Your edits stay in
this browser for this address; hand work in with <em>File → Download</em>.{total} A check that says
<em>correct</em> ticks its exercise here.</p>
<p id="progress" role="status" aria-live="polite"></p>
<ol class="labs">
{rows}
</ol>
</main>
<script>{_SCRIPT}</script>
</body>
</html>
"""


def _row(notebook: Path, lab: Mapping[str, Any] | None) -> str:
    path = urllib.parse.quote(notebook.name)
    workspace = urllib.parse.quote(notebook.stem)
    title = html.escape(lab["title"] if lab else lab_title(notebook))
    also = f'<a class="also" href="lab/index.html?path={path}&amp;workspace={workspace}">{title} in JupyterLab</a>'
    heading = f'<h2><a class="lab" href="notebooks/index.html?path={path}">{title}</a></h2>'
    if lab is None:
        return f'<li class="lab-row">{heading}<p class="facts">Or open {also}.</p></li>'
    checked = [g for g in lab["graded"] if g["checked"]]
    points = sum(g["points"] for g in lab["graded"])
    goals = "".join(f"<li>{html.escape(goal)}</li>" for goal in lab["goals"])
    exercises = " ".join(g["id"] for g in checked)
    count = f"{len(checked)} exercise{'s' if len(checked) != 1 else ''} checked as you go"
    return (
        f'<li class="lab-row">{heading}'
        f'<p class="facts">About {lab["minutes"]} minutes · {points:g} points · '
        f'<span class="done" data-exercises="{exercises}">{count}</span></p>'
        f'<p class="facts">You will be able to:</p><ul class="goals">{goals}</ul>'
        f'<p class="facts">Or open {also} (the full app, with the file browser).</p></li>'
    )


_SCRIPT = """(() => {
  if (!window.indexedDB) return;
  const open = indexedDB.open("shopops-lab", 1);
  open.onupgradeneeded = () => open.result.createObjectStore("passed");
  open.onsuccess = () => {
    const keys = open.result.transaction("passed", "readonly").objectStore("passed").getAllKeys();
    keys.onsuccess = () => {
      const passed = new Set(keys.result.map(String));
      let done = 0, all = 0;
      for (const span of document.querySelectorAll(".done[data-exercises]")) {
        const ids = span.dataset.exercises.split(" ").filter(Boolean);
        const mine = ids.filter((id) => passed.has(id));
        done += mine.length; all += ids.length;
        if (ids.length) span.textContent = (mine.length === ids.length ? "✅ " : "") +
          `${mine.length} of ${ids.length} exercises passed in this browser`;
      }
      document.getElementById("progress").textContent =
        `In this browser you have passed ${done} of the course's ${all} checked exercises.`;
    };
  };
})();"""
