"""The course in a real browser: JupyterLab 4 in headless Chromium runs lab 00 top to bottom,
the live widgets render (no "Error displaying widget"), and clicking them drives the engine.

Needs Chromium and Playwright's Python package; CI installs both (`.ci/run`). Elsewhere the
test skips and says how to get them. Playwright's own browser download is not used: it
drives the system Chromium.
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
playwright = pytest.importorskip(
    "playwright.sync_api",
    reason="the browser test needs Playwright: .venv/bin/pip install playwright (and Chromium: "
           "sudo apt-get install chromium)")
if CHROMIUM is None:
    pytest.skip("the browser test needs Chromium: sudo apt-get install chromium (Debian/Ubuntu)",
                allow_module_level=True)

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync"]
WAIT_MS = int(os.environ.get("SHOPOPS_BROWSER_WAIT_MS", 120_000))  # generous: a cold JupyterLab and kernel on a busy 2-core machine


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab_server(tmp_path_factory):
    """JupyterLab on loopback, serving copies of the student notebooks (the browser may save them)."""
    root = tmp_path_factory.mktemp("lab")
    for notebook in sorted((ROOT / "notebooks").glob("0*.ipynb")):
        shutil.copy(notebook, root / notebook.name)
    settings = root / "settings" / "@jupyterlab" / "notebook-extension"
    settings.mkdir(parents=True)  # draw every cell, so widgets below the fold exist in the page
    (settings / "tracker.jupyterlab-settings").write_text('{"windowingMode": "none"}')
    port = free_port()
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1",
               "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}",
               "--LabApp.news_url=", "--ServerApp.disable_check_xsrf=True"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    log = open(root / "server.log", "w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=root,
                              env=dict(os.environ, JUPYTER_PLATFORM_DIRS="1",
                                       JUPYTERLAB_SETTINGS_DIR=str(root / "settings")))
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:  # wait for the server to answer, bounded; not a timing assertion
        try:
            urllib.request.urlopen(f"{url}/api", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                server.kill()
                pytest.fail(f"JupyterLab did not start: {(root / 'server.log').read_text()[-2000:]}")
            time.sleep(0.5)
    yield url
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
    log.close()


def test_lab_00_runs_in_jupyterlab_and_its_widgets_drive_the_queue(lab_server):
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(WAIT_MS)
        page.goto(f"{lab_server}/lab/tree/00_start_here.ipynb?reset")
        notebook = page.locator(".jp-Notebook:visible").first
        notebook.wait_for()
        page.get_by_text("Python 3 (ipykernel) | Idle").first.wait_for()  # the kernel is up
        notebook.click()
        page.keyboard.press("Control+Shift+C")  # the command palette: Run All Cells
        page.keyboard.type("Run All Cells")
        page.keyboard.press("Enter")

        enqueue = page.locator("button.jupyter-button", has_text="enqueue").first
        enqueue.wait_for()
        enqueue.scroll_into_view_if_needed()
        enqueue.click()
        page.get_by_text("Enqueued item-0001 for case O-1001").first.wait_for()
        page.locator("button.jupyter-button", has_text="acquire").first.click()
        page.get_by_text("W1 leased item-0001 (case O-1001)").first.wait_for()

        check = page.locator("button.jupyter-button", has_text="Check").first
        check.scroll_into_view_if_needed()
        check.click()
        page.get_by_text("Pick an option first.").first.wait_for()
        assert page.get_by_text("Error displaying widget").count() == 0
        browser.close()
