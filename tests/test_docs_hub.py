"""docs/hub.md says what the hub test runs: the install for everyone, the spawner's hand-out, the
drop box and the hand-in line are the test's own (`hub_env.py`), every `shopops-lab` command in
it parses, and the sizing table is measured, a row per lab that exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from hub_env import DROP_BOX_MODE, HAND_IN, HUB_VERSION, INSTALL, START

from shopops_lab import doctor
from shopops_lab.cli import build_parser

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


@pytest.mark.parametrize("line", sorted(set(re.findall(r"^(shopops-lab [^\n#]+?)\s*(?:#|$)", BLOCKS, flags=re.M))))
def test_every_shopops_lab_command_in_the_hub_doc_parses(line):
    build_parser().parse_args(shlex.split(line)[1:])


def test_the_sizing_table_is_measured_for_labs_that_exist():
    assert "SIZING_TABLE" not in HUB
    rows = re.findall(r"^\| (\d\d_\w+) \|", HUB, flags=re.M)
    labs = {p.stem for p in (ROOT / "solutions").glob("*.ipynb")}
    assert rows and set(rows) <= labs and "07_burst_day" in rows and "08_real_crashes" in rows


def test_the_readme_points_at_the_hub_doc():
    assert "docs/hub.md" in (ROOT / "README.md").read_text(encoding="utf-8")
