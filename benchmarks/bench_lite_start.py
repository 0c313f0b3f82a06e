"""How long a learner waits in the offline JupyterLite site: from opening a lab to its first
output, in headless Chromium, for the site as built and for a plain JupyterLite kernel with no
kit (the floor), cold (a fresh browser profile) and warm (the same profile, opened again);
a second lab opened in the same browser; what a browser tab costs in memory; and what each
attempt to lower the floor gives, all in one run.

What is timed: `notebooks/index.html?path=LAB` (the single-notebook view the front page opens)
is loaded, and the first code cell is run the moment it is on the page, as a learner pressing
Shift+Enter at once would: the clock stops when its first output appears (the kernel starts,
loads its packages, runs the cell). The sites:
- `course`: `shopops-lab lite build --offline` as shipped, lab 00 (its first cell imports the kit
  and runs a check);
- `floor`: the same build with the kit's packages taken out of the kernel's start list and one
  notebook whose first cell prints: what JupyterLite's Pyodide kernel costs on its own;
- `install at start` (attempt 1): the course site with the kit's packages out of the start list,
  lab 00's first cell preceded by `%pip install shopops-lab ipywidgets` (from the site's own lock),
  which is what the site did before it loaded them with the kernel.
Attempt 2 (Pyodide's memory snapshot) is timed on a bare page with the site's Pyodide: start
Pyodide, load the kernel's and the kit's packages and import the kit, against starting from a
snapshot taken after the same. Attempt 3 (one kernel shared by a session's labs) times lab 01's
first cell run in the kernel lab 00 already started (what a shared kernel leaves to wait for).

Per-tab memory: the resident memory (unique set) of the browser's processes with 1, 2 and 4
labs open, each tab's kernel started. Each timing is the median of --runs (3) with its range;
the machine's load is printed first: these are wall-clock times of a 2-core machine shared with
other work, so compare numbers from one run. Always exits 0.

The second lab is timed in both orders (lab 00 then 01, and 01 then 00), --runs pairs each.

Run: `.venv/bin/python benchmarks/bench_lite_start.py [--runs 3] [--only second]` (needs Chromium, Playwright,
npm and the Lite build's cache, as tests/test_browser.py).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil

from shopops_lab.course.lite import CORE_PACKAGES, KIT_PACKAGES

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"]
KERNEL_SETTINGS = "@jupyterlite/pyodide-kernel-extension:kernel"
MB = 1024 * 1024
WAIT_MS = 240_000  # a start that takes longer is counted as failed (its tab screenshot: bench-lite-*.png)
FAILED = float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--only", choices=("all", "second"), default="all", help="second: only the second lab against the first"
    )
    args = parser.parse_args()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print("needs Playwright: .venv/bin/pip install 'playwright>=1.40,<2' (and Chromium)")
        return 0
    if CHROMIUM is None:
        print("needs Chromium: sudo apt-get install chromium")
        return 0
    print(f"cores {os.cpu_count()}, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} (1, 5, 15 min)")
    with tempfile.TemporaryDirectory(prefix="bench-lite-") as scratch:
        sites = build_sites(Path(scratch), only_course=args.only == "second")
        with contextlib.ExitStack() as stack:
            urls = {name: stack.enter_context(serve(site)) for name, site in sites.items()}
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
                try:
                    if args.only == "second":
                        second_lab_report(browser, urls["course"], args.runs)
                    else:
                        report(browser, urls, sites, args.runs)
                finally:
                    browser.close()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


# ---------------------------------------------------------------------------- the sites
def build_sites(scratch: Path, only_course: bool = False) -> dict[str, Path]:
    """The course site as built; the floor as JupyterLite ships its kernel (wheels from PyPI, as
    they are) and compiled as the course's are; the course with its packages installed at start."""
    from shopops_lab.course import lite

    course_notebooks = scratch / "course-notebooks"
    shutil.copytree(ROOT / "notebooks", course_notebooks)
    (course_notebooks / "99_print.ipynb").write_text(json.dumps(_notebook(['print("first output")'])))
    course = scratch / "course"
    lite.build_site(course, offline=True, notebooks_dir=course_notebooks)
    if only_course:
        return {"course": course}
    floor_notebooks = scratch / "floor-notebooks"
    floor_notebooks.mkdir()
    (floor_notebooks / "00_floor.ipynb").write_text(json.dumps(_notebook(['print("first output")'])))
    compiled = scratch / "floor-compiled"
    lite.build_site(compiled, offline=True, notebooks_dir=floor_notebooks)
    _start_without(compiled, lite.KIT_PACKAGES)
    floor = scratch / "floor"
    precompile, lite._precompile = lite._precompile, lambda *args: None  # the kernel's wheels as they come
    try:
        lite.build_site(floor, offline=True, notebooks_dir=floor_notebooks)
    finally:
        lite._precompile = precompile
    _start_without(floor, lite.KIT_PACKAGES)
    late_notebooks = scratch / "late-notebooks"
    late_notebooks.mkdir()
    lab00 = json.loads((ROOT / "notebooks" / "00_start_here.ipynb").read_text())
    first = next(cell for cell in lab00["cells"] if cell["cell_type"] == "code")
    source = "".join(first["source"])
    (late_notebooks / "00_start_here.ipynb").write_text(
        json.dumps(_notebook([f"%pip install {' '.join(lite.KIT_PACKAGES)}\n{source}"]))
    )
    late = scratch / "late"
    lite.build_site(late, offline=True, notebooks_dir=late_notebooks)
    _start_without(late, lite.KIT_PACKAGES)
    return {"course": course, "floor": floor, "compiled": compiled, "late": late}


def _start_without(site: Path, packages: tuple[str, ...]) -> None:
    """Take `packages` out of the list the kernel loads as it starts (they stay in the lock)."""
    path = site / "jupyter-lite.json"
    config = json.loads(path.read_text())
    options = config["jupyter-config-data"]["litePluginSettings"][KERNEL_SETTINGS]["loadPyodideOptions"]
    options["packages"] = [name for name in options["packages"] if name not in packages]
    path.write_text(json.dumps(config, indent=2))


def _notebook(sources: list[str]) -> dict:
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"c{n}", "metadata": {}, "outputs": [], "source": s}
            for n, s in enumerate(sources)
        ],
        "metadata": {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }


@contextlib.contextmanager
def serve(site: Path) -> Iterator[str]:
    """`shopops-lab lite serve` on a free loopback port, stopped by its PID after."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [sys.executable, "-m", "shopops_lab", "lite", "serve", "--dir", str(site), "--port", str(port)]
    child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"lite serve did not start on {port}") from None
                time.sleep(0.2)
        yield url
    finally:
        child.terminate()
        child.wait(timeout=30)


# ---------------------------------------------------------------------------- timing
def first_output(context, url: str, notebook: str) -> tuple[float, object]:
    """Seconds from opening `notebook` in the single-notebook view to its first code cell's
    first output, the cell run as soon as it is on the page; and the page (still open)."""
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    start = time.monotonic()
    page.goto(f"{url}/notebooks/index.html?path={notebook}")
    cell = page.locator(".jp-Notebook .jp-CodeCell").first
    cell.locator(".cm-content").click()
    page.keyboard.press("Escape")
    run(page, cell)
    cell.locator(".jp-OutputArea-output").first.wait_for()
    return time.monotonic() - start, page


def run(page, cell) -> None:
    """Ctrl+Enter on `cell` until its prompt says it is queued or ran: a key pressed while the
    notebook is still being set up can be lost (pressed again each second, as a learner would)."""
    from playwright.sync_api import TimeoutError as Timeout

    queued = cell.locator(".jp-InputArea-prompt").filter(has_text=re.compile(r"\[(\*|\d+)\]"))
    for _ in range(WAIT_MS // 1000):
        page.keyboard.press("Control+Enter")
        try:
            queued.wait_for(timeout=1000)
            return
        except Timeout:
            continue


def timed(runs: int, once: Callable[[], float]) -> list[float]:
    return [once() for _ in range(runs)]


def cold(browser, url: str, notebook: str) -> float:
    context = browser.new_context()
    try:
        return guarded(lambda: first_output(context, url, notebook)[0], context, notebook)
    finally:
        context.close()


def guarded(measure: Callable[[], float], context, name: str) -> float:
    """`measure()`, or FAILED when the lab never shows its output within WAIT_MS (said, with a
    screenshot of the tab, so one stuck start does not cost the whole run)."""
    from playwright.sync_api import TimeoutError as Timeout

    try:
        return measure()
    except Timeout:
        shot = Path(tempfile.gettempdir()) / f"bench-lite-{name}-{time.monotonic_ns()}.png"
        with contextlib.suppress(Exception):
            context.pages[-1].screenshot(path=str(shot))
        print(f"  ({name}: no output within {WAIT_MS // 1000} s; counted as failed; {shot})")
        return FAILED


def warm(browser, url: str, notebook: str) -> Callable[[], float]:
    """A profile that opened `notebook` once; each call opens it again there (its tab closed first)."""
    context = browser.new_context()
    _, page = first_output(context, url, notebook)
    page.close()

    def again() -> float:
        def measure() -> float:
            seconds, page = first_output(context, url, notebook)
            page.close()
            return seconds

        return guarded(measure, context, notebook)

    return again


LAB00, LAB01 = "00_start_here.ipynb", "01_leases_and_redelivery.ipynb"


def second_lab(browser, url: str, first: str, then: str) -> tuple[float, float]:
    """`first` then `then` in one fresh profile, each in its own tab as the front page opens them."""
    context = browser.new_context()
    try:
        opened = guarded(lambda: first_output(context, url, first)[0], context, first)
        second = guarded(lambda: first_output(context, url, then)[0], context, then)
        return opened, second
    finally:
        context.close()


def second_lab_report(browser, url: str, runs: int) -> None:
    """The second lab against the first, in both orders (00 then 01, 01 then 00), alternating, so
    neither the two labs' own costs nor a load drifting over the run decide the verdict."""
    orders = ((LAB00, LAB01), (LAB01, LAB00))
    pairs: dict[tuple[str, str], list[tuple[float, float]]] = {order: [] for order in orders}
    for _ in range(runs):
        for order in orders:
            pairs[order].append(second_lab(browser, url, *order))
    ratios = []
    for (first, then), timed_pairs in pairs.items():
        line(f"course: {first[:2]} in a fresh profile", [p[0] for p in timed_pairs])
        line(f"course: then {then[:2]}, another tab of that profile", [p[1] for p in timed_pairs])
        ratios += [p[1] / p[0] for p in timed_pairs]
    faster = sum(r < 1 for r in ratios)
    ratio = median(ratios)
    print(
        f"  {'PASS' if ratio < 1 else 'FAIL'}: a second lab takes {ratio:.2f}x the first (median of "
        f"{len(ratios)} pairs, both orders; faster in {faster} of them; target < 1)"
    )


def shared_kernel(browser, url: str) -> float:
    """Lab 01's first cell run in the kernel lab 00 started (the kit already imported there)."""
    lab01 = json.loads((ROOT / "notebooks" / "01_leases_and_redelivery.ipynb").read_text())
    source = "".join(next(c for c in lab01["cells"] if c["cell_type"] == "code")["source"])
    context = browser.new_context()
    try:
        _, page = first_output(context, url, "00_start_here.ipynb")
        page.wait_for_function(RAN, arg=0)  # its first cell done: the kernel is free
        cell = page.locator(".jp-Notebook .jp-CodeCell").last
        cell.locator(".cm-content").click()
        page.keyboard.press("Escape")
        page.keyboard.press("b")  # a new cell below the last
        new = page.locator(".jp-Notebook .jp-CodeCell").last
        new.locator(".cm-content").click()
        page.keyboard.insert_text(source)
        start = time.monotonic()
        run(page, new)
        new.locator(".jp-OutputArea-output").first.wait_for()
        return time.monotonic() - start
    finally:
        context.close()


RAN = """(n) => /\\[\\d+\\]/.test(document.querySelectorAll(".jp-CodeCell .jp-InputArea-prompt")[n].textContent)"""
SNAPSHOT_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body><script type="module">
import { loadPyodide } from "./static/pyodide/pyodide.mjs";
const options = { lockFileURL: "./static/wheels/pyodide-lock.json",
                  packageBaseUrl: new URL("./static/wheels/", location.href).href };
const packages = %(packages)s;
const started = async (more) => {
  const start = performance.now();
  const py = await loadPyodide({ ...options, ...more });
  const booted = performance.now();
  await py.loadPackage(packages);
  py.runPython("import IPython, ipykernel, ipywidgets, shopops_lab.checks.lab00");
  return [(booted - start) / 1000, (performance.now() - start) / 1000];
};
window.plain = () => started({});
window.snapshot = async () => {
  const py = await loadPyodide({ ...options, _makeSnapshot: true });
  window.snap = py.makeMemorySnapshot();
  try {
    const loaded = await loadPyodide({ ...options, _makeSnapshot: true });
    await loaded.loadPackage(packages);
    loaded.makeMemorySnapshot();
    window.withPackages = "a snapshot after loading the packages works";
  } catch (error) {
    window.withPackages = "no snapshot after loading the packages: " + String(error).split("\\n")[0];
  }
  return [window.snap.length, window.withPackages];
};
window.restored = () => started({ _loadSnapshot: window.snap });
window.ready = true;
</script></body></html>"""


def snapshot_attempt(browser, url: str, site: Path, runs: int) -> tuple[list, list, str]:
    """Bare Pyodide from the site (boot, then the kernel's and kit's packages loaded and imported),
    started plainly and from a memory snapshot of a booted Pyodide: [boot s, total s] each."""
    page_path = site / "snapshot-bench.html"
    page_path.write_text(SNAPSHOT_PAGE % {"packages": json.dumps([*CORE_PACKAGES, *KIT_PACKAGES])})
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{url}/snapshot-bench.html")
        page.wait_for_function("window.ready === true")
        plain = [page.evaluate("window.plain()") for _ in range(runs)]
        try:
            size, packages = page.evaluate("window.snapshot()")
            restored = [page.evaluate("window.restored()") for _ in range(runs)]
            note = f"a {size / MB:.0f} MB snapshot of a booted Pyodide; {packages}"
        except Exception as error:  # noqa: BLE001 - an experimental API: say what it did
            restored, note = [], f"no snapshot: {str(error).splitlines()[0][:200]}"
        return plain, restored, note
    finally:
        context.close()


def tab_memory(browser, url: str) -> list[tuple[int, float]]:
    """(tabs open, MB unique to the browser's processes) with 1, 2 and 4 labs open, kernels started."""
    labs = sorted(p.name for p in (ROOT / "notebooks").glob("0*.ipynb"))[:4]
    context = browser.new_context()
    found = []
    try:
        for n, lab in enumerate(labs, 1):
            first_output(context, url, lab)
            if n in (1, 2, 4):
                found.append((n, browser_memory() / MB))
    finally:
        context.close()
    return found


def browser_memory() -> int:
    total = 0
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if "chrom" in process.name():
                total += process.memory_full_info().uss
    return total


# ---------------------------------------------------------------------------- the report
def report(browser, urls: dict[str, str], sites: dict[str, Path], runs: int) -> None:
    lab00 = "00_start_here.ipynb"
    # interleaved, so a load that drifts during the run weighs on every site alike
    opened = {
        "floor": (urls["floor"], "00_floor.ipynb"),
        "compiled": (urls["compiled"], "00_floor.ipynb"),
        "print": (urls["course"], "99_print.ipynb"),
        "course": (urls["course"], lab00),
    }
    colds: dict[str, list[float]] = {name: [] for name in opened}
    for _ in range(runs):
        for name, (url, notebook) in opened.items():
            colds[name].append(cold(browser, url, notebook))
    again = {name: warm(browser, url, notebook) for name, (url, notebook) in opened.items()}
    warms: dict[str, list[float]] = {name: [] for name in opened}
    for _ in range(runs):
        for name in opened:
            warms[name].append(again[name]())
    floor_cold, course_cold, compiled_cold = colds["floor"], colds["course"], colds["compiled"]
    floor_warm, course_warm, compiled_warm = warms["floor"], warms["course"], warms["compiled"]
    print("\nopening a lab to its first output, seconds (median, range):")
    line("floor, cold (JupyterLite's Pyodide kernel as it comes, no kit)", floor_cold)
    line("course, cold (lab 00, the site as built)", course_cold)
    line("floor, warm", floor_warm)
    line("course, warm", course_warm)
    for when, ours, floor in (("cold", course_cold, floor_cold), ("warm", course_warm, floor_warm)):
        added = median(ours) - median(floor)
        verdict = "PASS" if added <= 1.0 else "FAIL"
        print(f"  {verdict}: the site as built adds {added:+.1f} s to the floor, {when} (target <= 1 s)")
    line("floor compiled as the course is, cold (like for like)", compiled_cold)
    line("floor compiled as the course is, warm", compiled_warm)
    line("course site, a notebook that only prints, cold (the kit loaded, not used)", colds["print"])
    line("course site, a notebook that only prints, warm", warms["print"])
    for when, ours, floor in (("cold", course_cold, compiled_cold), ("warm", course_warm, compiled_warm)):
        print(f"  the kit itself adds {median(ours) - median(floor):+.1f} s, {when}")
    half = median(course_warm) / median(floor_warm)
    print(f"  the course warm takes {half:.2f}x the floor's warm time (the issue's stretch goal: 0.5)")
    second_lab_report(browser, urls["course"], runs)
    print("\nattempts to lower the floor:")
    print("  0. the kernel's and kit's wheels compiled to bytecode at build time (the site does it): see")
    print("     'floor compiled' against 'floor' above")
    late = timed(runs, lambda: cold(browser, urls["late"], lab00))
    line("1. kit installed at start (%pip), cold; the site preloads it", late)
    print(f"     preloading with the kernel saves {median(late) - median(course_cold):+.1f} s cold")
    plain, restored, note = snapshot_attempt(browser, urls["course"], sites["course"], runs)
    line("2. bare Pyodide booted (warm cache)", [p[0] for p in plain])
    line("   then the kernel's and kit's packages loaded and imported", [p[1] for p in plain])
    if restored:
        line("   booted from a memory snapshot", [r[0] for r in restored])
        line("   then the same packages loaded and imported", [r[1] for r in restored])
    print(f"   {note}")
    shared = timed(runs, lambda: shared_kernel(browser, urls["course"]))
    line("3. lab 01's first cell in lab 00's running kernel (a shared kernel)", shared)
    print("\nmemory of the browser's processes (unique set), labs open with their kernels started:")
    counts = tab_memory(browser, urls["course"])
    for n, mb in counts:
        print(f"  {n} tab{'s' if n > 1 else ''}: {mb:,.0f} MB")
    if len(counts) == 3:
        print(f"  about {(counts[2][1] - counts[0][1]) / 3:,.0f} MB per further tab")


def line(label: str, values: list[float]) -> None:
    done = [v for v in values if v == v]  # FAILED is NaN
    failed = f", {len(values) - len(done)} failed" if len(done) < len(values) else ""
    if not done:
        print(f"  {label:<62}   none finished")
        return
    print(f"  {label:<62} {statistics.median(done):6.1f}  ({min(done):.1f} to {max(done):.1f}{failed})")


def median(values: list[float]) -> float:
    done = [v for v in values if v == v]
    return statistics.median(done) if done else FAILED


if __name__ == "__main__":
    raise SystemExit(main())
