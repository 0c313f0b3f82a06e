"""`shopops-lab lite build`: the course as a static JupyterLite site, Python in the browser.

The site holds the student notebooks, the kit's wheel and what its widgets need, and a
Pyodide lock file of its own that lists them, so the kernel loads them as it starts:
`import shopops_lab` works in a lab's first cell and the learner installs nothing.

Online (the default), Pyodide and its packages (matplotlib too) come from their usual
CDN. `offline=True` makes a site that sends no request anywhere but to itself: Pyodide
from the npm `pyodide` package at the version the kernel pins, the pure-Python wheels
the kernel loads as it starts (micropip, IPython and its dependencies, jedi ...) from
PyPI at the versions in Pyodide's lock, the lock's sha256 entries rewritten to the files
shipped (Pyodide checks them, and a mismatch stops the kernel without a word), and
piplite's PyPI fallback switched off. There is no matplotlib offline: the kit sketches
its plots itself.

Downloads are cached (`cache_dir`), and every file is written with fixed timestamps, so
two builds from the same inputs give the same site.
"""

from __future__ import annotations

import argparse
import base64
import errno
import hashlib
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from shopops_lab.course import catalogue, outputs
from shopops_lab.course.errors import LiteBuildError
from shopops_lab.course.home import front_page
from shopops_lab.errors import BadArgumentError

__all__ = ["CORE_PACKAGES", "LiteSite", "add_arguments", "build_site", "kit_wheel", "run", "serve"]

CDN = "https://cdn.jsdelivr.net/pyodide/v{version}/full/"
WHEELS = "static/wheels"  # the site's own wheels and its Pyodide lock
PYODIDE = "static/pyodide"  # offline: Pyodide's core, from npm
LOCK = f"{WHEELS}/pyodide-lock.json"
CORE_PACKAGES = ("micropip", "piplite", "ipykernel", "comm", "pyodide-kernel", "jedi", "ipython")
"""What the Pyodide kernel installs as it starts; listed in `loadPyodideOptions.packages`,
the kernel loads them from the lock instead of asking piplite (and PyPI) for them."""
KIT_PACKAGES = ("ipywidgets", "shopops-lab")
FROM_THE_KERNEL = ("piplite", "pyodide-kernel", "ipykernel", "widgetsnbextension")
"""Wheels the Pyodide kernel's extension ships (ipykernel and widgetsnbextension are
its browser stand-ins); the rest comes from PyPI."""
FROM_PYPI = ("ipywidgets", "jupyterlab-widgets", "comm")
"""At the versions installed here, so the widgets' Python side matches the front end
that `jupyter lite build` copies from this environment."""
COURSE_DEPENDS = {
    "shopops-lab": ["ipywidgets"],
    "ipywidgets": ["comm", "ipython", "traitlets", "widgetsnbextension", "jupyterlab-widgets"],
    "pyodide-kernel": ["comm", "ipython"],
    "ipykernel": ["pyodide-kernel"],
    "comm": ["traitlets"],
}
"""Lock dependencies of the wheels Pyodide's own lock does not know (from their metadata)."""
KERNEL_EXTENSION = "@jupyterlite/pyodide-kernel-extension"  # from the kernel's wheel (KERNEL)
WIDGETS_EXTENSION = "@jupyter-widgets/jupyterlab-manager"  # from this environment's ipywidgets
KERNEL = ("jupyterlite-pyodide-kernel", "0.8.6")
"""The site's Python kernel, fetched as a wheel and unpacked in the cache, never installed
here: its JupyterLab extension, installed beside JupyterLab, is loaded by it and fails there
(it needs JupyterLite's own shared modules), an error in every learner's browser console."""
EPOCH = 1767225600  # 2026-01-01: every file's date (SOURCE_DATE_EPOCH overrides it)
NOTEBOOK = re.compile(r"^\d\d_[\w-]+\.ipynb$")
PURE = re.compile(r"-(py3|py2\.py3)-none-any\.whl$")


@dataclass(frozen=True, kw_only=True, slots=True)
class LiteSite:
    """What `build_site` made: where, which notebooks, and how big."""

    out: Path
    offline: bool
    notebooks: tuple[str, ...]
    wheels: tuple[str, ...]
    size: int

    def lines(self) -> list[str]:
        mode = "offline (no request leaves the site)" if self.offline else "online (Pyodide from its CDN)"
        return [
            f"{self.out}: JupyterLite site, {mode}, {self.size / 1e6:.1f} MB",
            f"  notebooks: {', '.join(self.notebooks)}",
            f"  wheels: {len(self.wheels)} ({', '.join(self.wheels)})",
            f"  try it: shopops-lab lite serve --dir {self.out}  (any static web server will do)",
        ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """`shopops-lab lite build --out DIR [--offline] [--notebooks DIR] [--cache DIR]`."""
    actions = parser.add_subparsers(dest="lite_action", title="actions", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build",
        help="build the static JupyterLite site",
        description="Build the course as a static JupyterLite site (Python in the browser).",
    )
    build.add_argument("--out", metavar="DIR", required=True, help="folder to write the site to (replaced)")
    outputs.add_force(build, "--out (replacing it)", SITE.what)
    build.add_argument(
        "--offline", action="store_true", help="ship Pyodide and every wheel, so the site makes no request elsewhere"
    )
    build.add_argument(
        "--notebooks", metavar="DIR", default="notebooks", help="folder of student notebooks (default: notebooks)"
    )
    build.add_argument(
        "--no-reveals",
        dest="reveals",
        action="store_false",
        help="leave the model answers out of the site's kit: solution() then says reveals are off",
    )
    build.add_argument(
        "--cache",
        metavar="DIR",
        default=None,
        help="where downloads are kept between builds (default: ~/.cache/shopops-lab/lite)",
    )
    serve_ = actions.add_parser(
        "serve",
        help="serve a built site on this machine",
        description="Serve a built JupyterLite site over HTTP (Ctrl+C stops it).",
    )
    serve_.add_argument("--dir", metavar="DIR", required=True, help="the folder `lite build --out` wrote")
    serve_.add_argument("--port", type=int, default=8000, help="port (default: 8000; 0 picks a free one)")
    serve_.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")


def run(args: argparse.Namespace) -> int:
    if args.lite_action == "serve":
        return serve(args.dir, port=args.port, host=args.host)
    site = build_site(
        args.out,
        offline=args.offline,
        notebooks_dir=args.notebooks,
        cache_dir=args.cache,
        force=args.force,
        reveals=args.reveals,
    )
    print("\n".join(site.lines()))
    return 0


MIME_TYPES = {
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".wasm": "application/wasm",
    ".json": "application/json",
    ".ipynb": "application/json",
    ".whl": "application/zip",
}
"""Set here, not taken from the system's table: a module script or WebAssembly served with
another type does not load, and the kernel then never starts."""


def serve(directory: str | os.PathLike[str], *, port: int = 8000, host: str = "127.0.0.1") -> int:
    """Serve a built site until interrupted; prints its address first (port 0: a free one)."""
    import functools
    import http.server

    root = Path(directory)
    if not (root / "jupyter-lite.json").is_file():
        raise BadArgumentError(
            field="dir",
            problem=f"{str(root)!r} is not a built JupyterLite site",
            fix="build one first: shopops-lab lite build --out DIR",
        )
    if type(port) is not int or not 0 <= port <= 65535:
        raise BadArgumentError(
            field="port",
            problem=f"is {port!r}, not a port (0 to 65535)",
            fix="pass a port from 1024 to 65535, e.g. --port 8000, or 0 for a free one",
        )

    class Handler(http.server.SimpleHTTPRequestHandler):
        extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}

        def log_message(self, format: str, *args: object) -> None:  # quiet: one line per file is noise
            pass

    try:
        server = http.server.ThreadingHTTPServer((host, port), functools.partial(Handler, directory=str(root)))
    except OSError as error:
        raise _listen_error(host, port, error) from None
    print(f"serving {root} at http://{host}:{server.server_address[1]}/ (Ctrl+C stops)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def _listen_error(host: str, port: int, error: OSError) -> BadArgumentError:
    """Why the server could not listen, as the one line the command prints."""
    if error.errno == errno.EADDRINUSE:
        return BadArgumentError(
            field="port",
            problem=f"{port} is already in use on {host}",
            fix="stop what listens there, or pass another --port (0 picks a free one)",
        )
    if error.errno == errno.EACCES:
        return BadArgumentError(
            field="port",
            problem=f"{port} needs more privileges than this user has",
            fix="pass a port from 1024 up, e.g. --port 8000",
        )
    return BadArgumentError(
        field="host",
        problem=f"{host!r} cannot be listened on ({error.strerror or error})",
        fix="pass an address of this machine, e.g. --host 127.0.0.1",
    )


def build_site(
    out: str | os.PathLike[str],
    *,
    offline: bool = False,
    notebooks_dir: str | os.PathLike[str] = "notebooks",
    cache_dir: str | os.PathLike[str] | None = None,
    force: bool = False,
    reveals: bool = True,
) -> LiteSite:
    """Build the site into `out` (replacing it). Raises LiteBuildError naming what is
    missing (a tool, a download) and the fix; `out` is only replaced once the build worked.
    `reveals=False`: the site's kit carries no model answers (`kit_wheel`)."""
    out, notebooks_dir = Path(out), Path(notebooks_dir)
    _replaceable(out, notebooks_dir, force=force)
    notebooks = (
        sorted(p for p in notebooks_dir.glob("*.ipynb") if NOTEBOOK.match(p.name)) if notebooks_dir.is_dir() else []
    )
    if not notebooks:
        raise BadArgumentError(
            field="notebooks",
            problem=f"{str(notebooks_dir)!r} holds no NN_*.ipynb notebook",
            fix="run it from the course folder, or pass --notebooks DIR",
        )
    _require("jupyterlite_core", "jupyterlite-core")
    cache = (
        Path(cache_dir)
        if cache_dir
        else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "shopops-lab" / "lite"
    )
    kernel = _kernel_package(cache)
    pyodide_version = _pyodide_version(kernel)
    with tempfile.TemporaryDirectory(prefix="shopops-lite-") as scratch:
        stage = Path(scratch) / "stage"
        (stage / "files").mkdir(parents=True)
        for notebook in notebooks:
            shutil.copyfile(notebook, stage / "files" / notebook.name)
        wheels = stage / WHEELS
        wheels.mkdir(parents=True)
        pyodide = _pyodide_package(pyodide_version, cache / "npm")
        upstream = json.loads((pyodide / "pyodide-lock.json").read_text(encoding="utf-8"))
        python = ".".join(upstream["info"]["python"].split(".")[:2])  # Pyodide's Python, e.g. 3.14
        shipped = [
            kit_wheel(wheels, reveals=reveals),
            *_kernel_wheels(kernel, wheels),
            *_pypi_wheels(_installed(FROM_PYPI), wheels, cache / "pypi", python=python),
        ]
        if offline:
            shipped += _pypi_wheels(_core_closure(upstream), wheels, cache / "pypi", python=python)
            _copy_pyodide(pyodide, stage / PYODIDE)
        _precompile(shipped, pyodide, cache / "compiled")
        lock = _lock(upstream, shipped, offline=offline, version=pyodide_version)
        (stage / LOCK).write_text(json.dumps(lock, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        _write_config(stage, offline=offline)
        built = Path(scratch) / "site"
        _jupyter_lite_build(stage, built, kernel)
        _favicons(built)
        _phone_menu(built / "notebooks" / "index.html")
        course = json.loads(catalogue.MAP.read_text(encoding="utf-8")) if catalogue.MAP.is_file() else None
        page = front_page(notebooks, course=course)  # not a redirect to lab/
        (built / "index.html").write_text(page, encoding="utf-8")
        shutil.copytree(stage / WHEELS, built / WHEELS)  # jupyter lite copies only what it knows
        if out.exists():
            shutil.rmtree(out)
        shutil.copytree(built, out)
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    return LiteSite(
        out=out,
        offline=offline,
        notebooks=tuple(p.name for p in notebooks),
        wheels=tuple(sorted(p.name for p in shipped)),
        size=size,
    )


def _replaceable(out: Path, notebooks_dir: Path, *, force: bool = False) -> None:
    """Refuse an `out` the build would wrongly replace (`outputs.claim`): the root, home, the
    masters, a folder holding the one it is run from or the notebooks, a file, or a folder with
    files that is not a site this command built (that one only without `force`). A new folder,
    an empty one and a previous site are fine. Checked before anything is read or written."""
    kept = [
        outputs.Kept(Path.cwd(), "the folder you run this from", inside=True),
        outputs.Kept(notebooks_dir, "the notebooks", inside=True),
        *outputs.masters(inside=True),
    ]
    outputs.claim(out, field="--out", example="_site", owned=SITE, force=force, kept=kept)


SITE = outputs.Owned(lambda path: (path / "jupyter-lite.json").is_file(), "a site this command built")


# ---------------------------------------------------------------------------- the kit's wheel
MODEL_ANSWERS = "shopops_lab/checks/answer_keys/model_answers.py"  # what `reveals=False` leaves out


def kit_wheel(folder: Path, *, reveals: bool = True) -> Path:
    """A wheel of the installed `shopops_lab` package, written byte for byte the same on
    every run (sorted entries, fixed timestamps): what the site's kernel imports. Without
    `reveals`, the model answers are left out (`solution()` then says reveals are off)."""
    package = Path(__file__).resolve().parent.parent  # read as files: the course wing imports no engine code
    found = re.search(r'^__version__ = "([^"]+)"', (package / "__init__.py").read_text(), re.M)
    assert found is not None, "shopops_lab/__init__.py names no __version__"
    version = found.group(1)
    dist = f"shopops_lab-{version}.dist-info"
    files = {
        f"shopops_lab/{p.relative_to(package).as_posix()}": p.read_bytes()
        for p in sorted(package.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    }
    if not reveals:
        files.pop(MODEL_ANSWERS, None)
    files[f"{dist}/METADATA"] = (
        f"Metadata-Version: 2.1\nName: shopops-lab\nVersion: {version}\n"
        "Summary: ShopOps Lab, built for JupyterLite\nRequires-Python: >=3.11\n"
    ).encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: shopops-lab\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist}/top_level.txt"] = b"shopops_lab\n"
    record = "".join(f"{name},sha256={_digest(data)},{len(data)}\n" for name, data in files.items())
    files[f"{dist}/RECORD"] = (record + f"{dist}/RECORD,,\n").encode()
    path = folder / f"shopops_lab-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            wheel.writestr(info, data)
    return path


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


# ---------------------------------------------------------------------------- other wheels
def _kernel_package(cache: Path) -> Path:
    """The kernel's wheel (KERNEL) unpacked in `cache`: importable from there by the build
    (PYTHONPATH), its lab extension and its own wheels read from there."""
    name, version = KERNEL
    folder = cache / "kernel" / f"{_canonical(name)}-{version}"
    if (folder / "jupyterlite_pyodide_kernel" / "constants.py").is_file():
        return folder
    wheel = _cached_wheel(name, version, cache / "pypi", python=None)
    unpacking = folder.with_suffix(".partial")
    shutil.rmtree(unpacking, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(unpacking)
    unpacking.rename(folder)
    return folder


def _pyodide_version(kernel: Path) -> str:
    """The Pyodide the kernel pins, read from its constants (the package is not imported here)."""
    text = (kernel / "jupyterlite_pyodide_kernel" / "constants.py").read_text(encoding="utf-8")
    found = re.search(r'^PYODIDE_VERSION = "([^"]+)"', text, re.M)
    if found is None:
        raise LiteBuildError(
            what="the Pyodide version the kernel pins", where=str(kernel), fix=f"delete {kernel} and build again"
        )
    return found.group(1)


def _kernel_extension(kernel: Path) -> Path:
    name, version = KERNEL
    return (
        kernel
        / f"{name.replace('-', '_')}-{version}.data"
        / "data"
        / "share"
        / "jupyter"
        / "labextensions"
        / KERNEL_EXTENSION
    )


def _kernel_wheels(kernel: Path, folder: Path) -> list[Path]:
    """The Pyodide kernel's own wheels, from its lab extension (widgetsnbextension: the
    4.x stand-in, for ipywidgets 8)."""
    source = _kernel_extension(kernel) / "static" / "pypi"
    found = []
    for wheel in sorted(source.glob("*.whl")):
        name, version = _name_version(wheel.name)
        if name in FROM_THE_KERNEL and not (name == "widgetsnbextension" and not version.startswith("4.")):
            found.append(Path(shutil.copy2(wheel, folder / wheel.name)))
    missing = set(FROM_THE_KERNEL) - {_name_version(p.name)[0] for p in found}
    if missing:
        raise LiteBuildError(
            what=f"the Pyodide kernel's wheels {sorted(missing)}",
            where=str(source),
            fix=f"delete {kernel} and build again",
        )
    return found


def _installed(names: tuple[str, ...]) -> dict[str, str]:
    return {name: importlib.metadata.version(name) for name in names}


def _core_closure(lock: dict) -> dict[str, str]:
    """The packages the kernel loads as it starts, with everything they depend on in
    Pyodide's lock, at the lock's versions; all must be pure Python (PyPI has them)."""
    packages = lock["packages"]
    wanted, pending = {}, [name for name in ("micropip", "jedi", "ipython", "traitlets")]
    while pending:
        key = _canonical(pending.pop())
        if key in wanted:
            continue
        entry = packages[key]
        if not PURE.search(entry["file_name"]):
            raise LiteBuildError(
                what=f"a pure-Python wheel of {entry['name']}",
                where="Pyodide's lock",
                fix="build without --offline: this Pyodide needs a compiled package here",
            )
        wanted[key] = entry["version"]
        pending.extend(entry.get("depends", []))
    return wanted


def _pypi_wheels(wanted: dict[str, str], folder: Path, cache: Path, *, python: str) -> list[Path]:
    """Pure-Python wheels for Pyodide's `python` from PyPI (pip download, kept in
    `cache`), copied into `folder`."""
    paths = []
    for name, version in sorted(wanted.items()):
        wheel = _cached_wheel(name, version, cache, python=python)
        paths.append(Path(shutil.copy2(wheel, folder / wheel.name)))
    return paths


def _cached_wheel(name: str, version: str, cache: Path, *, python: str | None) -> Path:
    """The pure-Python wheel of `name==version` in `cache`, fetched from PyPI (pip download)
    the first time; `python` is the interpreter it is for (None: this one)."""
    cache.mkdir(parents=True, exist_ok=True)
    hit = [p for p in cache.glob("*.whl") if _name_version(p.name) == (_canonical(name), version)]
    if not hit:
        target = ["--python-version", python] if python else []
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--quiet",
            "--no-deps",
            "--only-binary=:all:",
            *target,
            "--dest",
            str(cache),
            f"{name}=={version}",
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        hit = [p for p in cache.glob("*.whl") if _name_version(p.name) == (_canonical(name), version)]
        if done.returncode or not hit:
            raise LiteBuildError(
                what=f"the wheel {name}=={version}",
                where="PyPI",
                fix=f"check the network, or put the wheel in {cache} ({(done.stderr or done.stdout).strip()[-300:]})",
            )
    if not PURE.search(hit[0].name):
        raise LiteBuildError(
            what=f"a pure-Python wheel of {name}=={version}",
            where="PyPI",
            fix="only py3-none-any wheels run in the browser",
        )
    return hit[0]


def _name_version(filename: str) -> tuple[str, str]:
    name, version = filename.split("-")[:2]
    return _canonical(name), version


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


# ---------------------------------------------------------------------------- Pyodide
def _pyodide_package(version: str, cache: Path) -> Path:
    """The npm `pyodide` package at `version`, unpacked in `cache` (npm pack fetches it)."""
    folder = cache / f"pyodide-{version}"
    if (folder / "pyodide-lock.json").is_file():
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    tarball = cache / f"pyodide-{version}.tgz"
    if not tarball.is_file():
        npm = shutil.which("npm")
        if npm is None:
            raise LiteBuildError(
                what=f"the npm package pyodide@{version}",
                where="npm",
                fix=f"install npm (sudo apt-get install npm), or put pyodide-{version}.tgz "
                f"from `npm pack pyodide@{version}` in {cache}",
            )
        done = subprocess.run(
            [npm, "pack", f"pyodide@{version}", "--pack-destination", str(cache)], capture_output=True, text=True
        )
        if done.returncode or not tarball.is_file():
            raise LiteBuildError(
                what=f"the npm package pyodide@{version}",
                where="the npm registry",
                fix=f"check the network ({done.stderr.strip()[-300:]})",
            )
    unpacking = cache / f"pyodide-{version}.partial"
    shutil.rmtree(unpacking, ignore_errors=True)
    with tarfile.open(tarball) as archive:
        archive.extractall(unpacking, filter="data")
    (unpacking / "package").rename(folder)
    shutil.rmtree(unpacking)
    return folder


COMPILE = """
import { loadPyodide } from %(pyodide)s;
const py = await loadPyodide();
py.FS.mkdirTree("/wheels");
py.FS.mount(py.FS.filesystems.NODEFS, { root: %(folder)s }, "/wheels");
py.runPython(`
import compileall, py_compile
unchecked = py_compile.PycInvalidationMode.UNCHECKED_HASH
if not compileall.compile_dir("/wheels", quiet=1, invalidation_mode=unchecked, workers=1):
    raise RuntimeError("a module did not compile (its name is above)")
`);
"""
"""Compiles every module below a folder with Pyodide's own Python (run by Node), as unchecked
hash-based .pyc files: valid whatever date the browser gives the unpacked source."""


def _precompile(wheels: list[Path], pyodide: Path, cache: Path) -> None:
    """Each wheel, in place, with its modules compiled to bytecode by the Python the site runs.
    Pyodide imports a wheel's modules from source, compiling each one in the browser at every
    start of a kernel: IPython's alone cost about 2.5 s there (benchmarks/bench_lite_start.py).
    Compiled once here (cached by the wheel's hash), a kernel imports them ready. Without Node
    the wheels stay as they are: a slower start, the same site otherwise."""
    node = shutil.which("node")
    if node is None:
        return
    cache.mkdir(parents=True, exist_ok=True)
    pending = {wheel: cache / f"{_sha256(wheel)}.whl" for wheel in wheels}
    todo = [wheel for wheel, done in pending.items() if not done.is_file()]
    if todo:
        with tempfile.TemporaryDirectory(prefix="shopops-pyc-") as scratch:
            folders = {wheel: Path(scratch) / wheel.stem for wheel in todo}
            for wheel, folder in folders.items():
                with zipfile.ZipFile(wheel) as archive:
                    archive.extractall(folder)
            where = {"pyodide": json.dumps((pyodide / "pyodide.mjs").as_uri()), "folder": json.dumps(scratch)}
            script = COMPILE % where
            done = subprocess.run([node, "--input-type=module", "-e", script], capture_output=True, text=True)
            if done.returncode:
                raise LiteBuildError(
                    what="the wheels compiled for Pyodide",
                    where="node with the npm pyodide package",
                    fix=f"read its output: {done.stdout.strip()[-800:]} {done.stderr.strip().splitlines()[-1:]}",
                )
            for wheel, folder in folders.items():
                _zip_folder(folder, pending[wheel].with_suffix(".partial"))
                pending[wheel].with_suffix(".partial").rename(pending[wheel])
    for wheel, compiled in pending.items():
        shutil.copyfile(compiled, wheel)


def _zip_folder(folder: Path, target: Path) -> None:
    """`folder` as a wheel, entries sorted and dated 1980-01-01: the same bytes every time."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            info = zipfile.ZipInfo(path.relative_to(folder).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, path.read_bytes())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _copy_pyodide(package: Path, target: Path) -> None:
    """Pyodide's runtime only: its lock is replaced by the site's, maps and docs stay out."""
    target.mkdir(parents=True)
    for name in (
        "pyodide.mjs",
        "pyodide.js",
        "pyodide.asm.mjs",
        "pyodide.asm.wasm",
        "python_stdlib.zip",
        "package.json",
    ):
        shutil.copyfile(package / name, target / name)
    # jupyter lite's pyodide addon wants a lock beside pyodide.mjs; the kernel reads the site's (LOCK)
    shutil.copyfile(package / "pyodide-lock.json", target / "pyodide-lock.json")


def _lock(upstream: dict, shipped: list[Path], *, offline: bool, version: str) -> dict:
    """The site's Pyodide lock: every shipped wheel with its own sha256 (loaded from the
    site, relative to the lock), plus, online, the rest of Pyodide's packages at their CDN."""
    packages = {}
    if not offline:
        cdn = CDN.format(version=version)
        packages = {
            key: {**entry, "file_name": cdn + entry["file_name"]} for key, entry in upstream["packages"].items()
        }
    for wheel in shipped:
        key, wheel_version = _name_version(wheel.name)
        entry = upstream["packages"].get(key, {})
        packages[key] = {
            "name": entry.get("name", key),
            "version": wheel_version,
            "file_name": wheel.name,
            "install_dir": "site",
            "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            "package_type": "package",
            "imports": entry.get("imports", [key.replace("-", "_")]),
            "depends": entry.get("depends", COURSE_DEPENDS.get(key, [])),
            "unvendored_tests": False,
        }
    missing = {dep for entry in packages.values() for dep in entry["depends"] if _canonical(dep) not in packages}
    if missing:
        raise LiteBuildError(
            what=f"wheels for {sorted(missing)}",
            where="the site's lock",
            fix="report this: the lock names a dependency the site does not ship",
        )
    return {"info": upstream["info"], "packages": dict(sorted(packages.items()))}


# ---------------------------------------------------------------------------- the site
def _write_config(stage: Path, *, offline: bool) -> None:
    """jupyter-lite.json: the kernel reads the site's lock and loads the course's packages
    as it starts; offline, piplite never asks PyPI."""
    packages = [*CORE_PACKAGES, *KIT_PACKAGES] + ([] if offline else ["matplotlib"])
    kernel = {"loadPyodideOptions": {"lockFileURL": f"./{LOCK}", "packages": packages}, "disablePyPIFallback": offline}
    config = {
        "jupyter-lite-schema-version": 0,
        "jupyter-config-data": {
            "appName": "ShopOps Lab",
            "defaultKernelName": "python",
            "litePluginSettings": {f"{KERNEL_EXTENSION}:kernel": kernel},
        },
    }
    (stage / "jupyter-lite.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    # every cell drawn at once: a widget or picture below the fold is there when Run All reaches it;
    # a closed notebook's Pyodide kernel stops with it, so kernels do not pile up in one tab
    overrides = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none", "kernelShutdown": True}}
    (stage / "overrides.json").write_text(json.dumps(overrides, indent=2) + "\n", encoding="utf-8")


PHONE_MENU = """<style>
@media (max-width: 520px) {
  /* the single-notebook view on a phone: the whole menu (File ... Help) gets the width, and the
     trust and kernel badges, which otherwise push Help off the screen, step aside */
  #menu-panel .jp-NotebookKernelStatus, #menu-panel .jp-NotebookTrustedStatus { display: none !important; }
  #jp-MainMenu { width: calc(100% - 10px) !important; }
}
</style>"""


def _phone_menu(page: Path) -> None:
    """Add PHONE_MENU to the notebook app's page (a phone's 390 px cut its menu at "Settings")."""
    text = page.read_text(encoding="utf-8")
    if PHONE_MENU not in text:
        page.write_text(text.replace("</head>", PHONE_MENU + "\n</head>", 1), encoding="utf-8")


def _favicons(site: Path) -> None:
    """The icons the apps ask for (the idle, busy and notebook favicons JupyterLab's server
    serves; JupyterLite's build ships none, so each kernel state change was a 404 in the
    console), from this environment's jupyter_server, and `favicon.ico` at the root."""
    spec = importlib.util.find_spec("jupyter_server")
    if spec is None or spec.origin is None:
        return
    icons = Path(spec.origin).parent / "static" / "favicons"
    target = site / "static" / "favicons"
    target.mkdir(parents=True, exist_ok=True)
    for icon in sorted(icons.glob("*.ico")):
        shutil.copyfile(icon, target / icon.name)
    if (icons / "favicon.ico").is_file():
        shutil.copyfile(icons / "favicon.ico", site / "favicon.ico")


def _lab_extension(name: str) -> Path:
    from jupyter_core.paths import jupyter_path

    for folder in jupyter_path("labextensions"):
        if (Path(folder) / name / "package.json").is_file():
            return Path(folder) / name
    raise LiteBuildError(
        what=f"the lab extension {name}",
        where="this environment's Jupyter paths",
        fix="pip install -r requirements.txt (it brings ipywidgets)",
    )


def _jupyter_lite_build(stage: Path, out: Path, kernel: Path) -> None:
    """jupyter lite build, with only the extensions the course needs (not whatever else
    this environment has), the kernel's build addons from its unpacked wheel, timestamps
    clamped, no source maps."""
    command = [
        sys.executable,
        "-m",
        "jupyterlite_core",
        "build",
        "--lite-dir",
        str(stage),
        "--output-dir",
        str(out),
        "--contents",
        "files",
        "--ignore-sys-prefix",
        "--no-sourcemaps",
        "--no-unused-shared-packages",
        "--apps",
        "lab",
        "--apps",
        "notebooks",
        "--source-date-epoch",
        str(EPOCH),
        f"--LiteBuildConfig.federated_extensions={_kernel_extension(kernel)}",
        f"--LiteBuildConfig.federated_extensions={_lab_extension(WIDGETS_EXTENSION)}",
    ]
    epoch = os.environ.get("SOURCE_DATE_EPOCH", str(EPOCH))
    command[command.index("--source-date-epoch") + 1] = epoch
    path = os.pathsep.join(filter(None, [str(kernel), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, SOURCE_DATE_EPOCH=epoch, PYTHONHASHSEED="0", PYTHONPATH=path)
    env.pop("JUPYTERLITE_PYODIDE_URL", None)
    done = subprocess.run(command, cwd=stage, capture_output=True, text=True, env=env)
    if done.returncode:
        raise LiteBuildError(
            what="a JupyterLite site",
            where="jupyter lite build",
            fix=f"read its output: {(done.stdout + done.stderr).strip()[-1500:]}",
        )


def _require(module: str, package: str) -> None:
    try:
        importlib.import_module(module)
    except ImportError as exc:
        raise LiteBuildError(
            what=f"the Python package {package}",
            where="this environment",
            fix="pip install -r requirements.txt (or pip install 'shopops-lab[lite]')",
        ) from exc
