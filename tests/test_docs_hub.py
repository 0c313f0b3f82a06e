"""docs/hub.md says what the hub test runs: the install for everyone, the spawner's hand-out, the
drop box and the hand-in line are the test's own (`hub_env.py`), and the sizing table is measured,
a row per lab that exists (every `shopops-lab` command in it parses: `test_docs.py`)."""

from __future__ import annotations

import re
from pathlib import Path

from hub_env import DROP_BOX_MODE, HAND_IN, HUB_VERSION, INSTALL, START

from shopops_lab import doctor

ROOT = Path(__file__).resolve().parent.parent
HUB = (ROOT / "docs" / "hub.md").read_text(encoding="utf-8")
BLOCKS = "\n".join(re.findall(r"```(?:sh|python|yaml)?\n(.*?)```", HUB, flags=re.S))


def test_the_install_for_everyone_is_the_one_the_hub_test_runs():
    line = f'python {" ".join(INSTALL[:3])} "{INSTALL[3]}" "{INSTALL[4]}/srv/shopops-lab"'
    assert line in BLOCKS
    assert f"JupyterHub {HUB_VERSION}" in HUB
    assert "-e " not in line and "requirements.txt" not in line  # not editable, not relative to a folder


def test_the_hand_out_drop_box_and_hand_in_are_the_ones_the_hub_test_runs():
    assert START.format(shopops_lab="shopops-lab") in BLOCKS  # the spawner's command
    assert f"-m {DROP_BOX_MODE:o} /srv/shopops/submitted" in BLOCKS
    files = '"$HOME/shopops-lab/08_real_crashes.ipynb"'
    assert HAND_IN.format(submitted="/srv/shopops/submitted", files=files) in BLOCKS
    assert doctor.HAND_OUT in BLOCKS and doctor.HAND_OUT in doctor.NEXT_STEP[doctor.Place.HUB]


def test_the_sizing_table_is_measured_for_labs_that_exist():
    assert "SIZING_TABLE" not in HUB
    rows = re.findall(r"^\| (\d\d_\w+) \|", HUB, flags=re.M)
    labs = {p.stem for p in (ROOT / "solutions").glob("*.ipynb")}
    assert rows and set(rows) == labs, "a row per lab, measured with benchmarks/bench_hub.py --lab NN"


def test_the_readme_and_the_instructors_checklist_point_at_the_hub_doc_and_its_sizing_table():
    assert "](docs/hub.md)" in (ROOT / "README.md").read_text(encoding="utf-8")
    instructors = (ROOT / "docs" / "instructors.md").read_text(encoding="utf-8")
    checklist = instructors.split("## Run a class", 1)[1].split("\n## ", 1)[0]
    assert "](hub.md#4-sizing-the-hub)" in checklist
