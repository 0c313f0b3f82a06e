"""How big a hub does a class need? Per lab: the kernel's memory, the CPU seconds of Run All,
and the slowdown when several students run the lab at once; and a single-user server's memory.

What stands in for a learner: the lab's master notebook (every exercise answered, so every
check runs, as for a learner who finishes the lab) run top to bottom in a fresh `python3`
kernel by nbclient, as JupyterLab's Run All does. Real learners read and type between cells,
so a class running one lab at once is gentler than N Run Alls started together: the slowdown
column is the worst case of a whole class pressing Run All in the same second.

Printed per lab: the kernel's peak and final resident memory (MB, the kernel and its children:
lab 08's worker processes count), processor seconds of Run All (kernel and children), wall
seconds alone and the mean wall seconds of --students runs started at once, and their ratio.
Then a JupyterLab server's resident memory, idle and with one kernel per lab open through it
(what the single-user server of a student who opened every lab holds, its kernels apart). The
machine's cores and load average are printed first: the slowdown depends on them. Memory is
sampled every 50 ms (a peak between samples can be missed). Always exits 0.

Run: `.venv/bin/python benchmarks/bench_hub.py [--students 3] [--lab 07]`.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
MB = 1024 * 1024


def tree(process: psutil.Process) -> list[psutil.Process]:
    try:
        return [process, *process.children(recursive=True)]
    except psutil.Error:
        return []


def resident(processes: list[psutil.Process]) -> int:
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_one(notebook: Path) -> dict[str, float]:
    """Run All of `notebook` in a fresh kernel: wall and processor seconds, peak and final memory."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(ROOT)}})
    peak = [0]
    kernel: list[psutil.Process] = []
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.05):
            if kernel:
                peak[0] = max(peak[0], resident(tree(kernel[0])))

    with client.setup_kernel():
        kernel.append(psutil.Process(client.km.provisioner.pid))
        cpu_before = kernel[0].cpu_times()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        started = time.perf_counter()
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
        wall = time.perf_counter() - started
        final = resident(tree(kernel[0]))
        cpu = kernel[0].cpu_times()
        done.set()
        sampler.join()
    seconds = sum(cpu[:4]) - sum(cpu_before[:4])  # user, system, and reaped children's
    return {"wall": wall, "cpu": seconds, "peak_mb": max(peak[0], final) / MB, "final_mb": final / MB}


def measure(notebook: Path, students: int) -> tuple[dict[str, float], list[dict[str, float]]]:
    """One run alone, then `students` runs at once, each in a process of its own."""
    command = [sys.executable, __file__, "--one", str(notebook)]
    alone = json.loads(subprocess.run(command, capture_output=True, text=True, check=True).stdout)
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(students)
    ]
    together = [json.loads(run.communicate()[0]) for run in runs]
    return alone, together


def server_memory(notebooks: list[Path]) -> tuple[float, float]:
    """A JupyterLab server's resident MB when idle, then with one kernel per notebook started through it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = Path(tempfile.mkdtemp(prefix="bench-hub-"))
    command = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1"]
    command += ["--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root}"]
    command += ["--ServerApp.disable_check_xsrf=True", "--LabApp.news_url="] + (
        ["--allow-root"] if os.geteuid() == 0 else []
    )
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # the server is up when its API answers
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit("bench_hub: JupyterLab did not start") from None
                time.sleep(0.5)
        idle = psutil.Process(server.pid).memory_info().rss / MB
        for notebook in notebooks:
            body = json.dumps({"path": notebook.name, "type": "notebook", "name": "", "kernel": {"name": "python3"}})
            request = urllib.request.Request(f"{url}/api/sessions", data=body.encode(), method="POST")
            urllib.request.urlopen(request, timeout=60)
        busy = psutil.Process(server.pid).memory_info().rss / MB
        return idle, busy
    finally:
        server.terminate()
        server.wait(timeout=60)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=3, help="Run Alls started at once (default: 3)")
    parser.add_argument("--lab", action="append", help="only this lab, e.g. --lab 07 (repeatable)")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a worker: run one notebook, print its figures
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_one(Path(args.one))))
        return
    masters = sorted((ROOT / "solutions").glob("[0-9][0-9]_*.ipynb"))
    masters = [m for m in masters if not args.lab or m.name[:2] in args.lab]
    print(f"cores {os.cpu_count()}, load average {os.getloadavg()[0]:.1f}, {args.students} students at once")
    print(
        "| lab | kernel peak MB | kernel after MB | CPU s of Run All | wall s alone | wall s with "
        f"{args.students} at once | slowdown |"
    )
    print("|---|---|---|---|---|---|---|")
    for master in masters:
        alone, together = measure(master, args.students)
        wall = sum(run["wall"] for run in together) / len(together)
        print(
            f"| {master.stem} | {alone['peak_mb']:.0f} | {alone['final_mb']:.0f} | {alone['cpu']:.1f} | "
            f"{alone['wall']:.1f} | {wall:.1f} | {wall / alone['wall']:.2f}x |"
        )
    idle, busy = server_memory(masters)
    print(f"JupyterLab server: {idle:.0f} MB idle, {busy:.0f} MB with {len(masters)} kernels open through it")
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
