"""README.md's and docs/'s shell examples print what the pages show (tests/docs/examples.py runs them against a
fresh `ragsvc serve`); what the comparison masks, and only that; and every relative link of the pages resolves."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from ragsvc.config import Settings
from ragsvc.server.components import build_reader, cite_threshold
from tests.docs import examples
from tests.docs.examples import Example, Outcome, masked

SHOWN = """\
[1/3] it.passwords: 1 chunks (0.08 s)
DOCUMENT      CHUNKS      SIZE  INGESTED          NAME
refunds            3     700 B  2026-11-27 10:51  refunds.md
session 829edfdc-0391-4878-ac24-b578bd1c841b, request 3f9a0c1e2b7d4e5f
grounded; confidence 76; ACTION_CITE; model extractive; 0 prompt + 20 completion tokens
"""


@pytest.fixture(scope="module")
def outcomes() -> list[Outcome]:
    """Every example of the pages, run once against one fresh server."""
    return list(examples.run_all())


@pytest.mark.timeout(600)
def test_every_shown_output_is_what_its_commands_print(outcomes: list[Outcome]) -> None:
    assert len(outcomes) >= 5, "README.md's examples are found"
    failed = [o for o in outcomes if not o.holds]
    assert not failed, "\n\n".join(o.diff() for o in failed) + "\n\n`make docs` writes the printed outputs"


def outcome(printed: str) -> Outcome:
    return Outcome(Example(examples.ROOT / "README.md", 1, "true\n", SHOWN, 0, 0), printed)


def test_timings_times_ids_and_hashes_are_masked() -> None:
    printed = (SHOWN.replace("0.08 s", "1.93 s").replace("10:51", "17:02").replace("829edfdc", "0e1d2c3b")
               .replace("3f9a0c1e2b7d4e5f", "aa00bb11cc22dd33") + "\n\n")  # fmt: skip
    assert outcome(printed).holds
    assert "<duration>" in masked(SHOWN) and "<time>" in masked(SHOWN) and "<uuid>" in masked(SHOWN)
    assert "<hash>" in masked(SHOWN)


@pytest.mark.parametrize(
    ("shown", "printed"),
    [
        ("confidence 76", "confidence 72"),  # a confidence moved
        ("1 chunks", "2 chunks"),  # a count
        ("700 B", "701 B"),  # a size
        ("refunds.md", "refund.md"),  # a name
        ("ACTION_CITE", "ACTION_ROUTE"),  # a decision
    ],
)
def test_anything_else_that_moved_is_caught(shown: str, printed: str) -> None:
    assert shown in SHOWN
    changed = outcome(SHOWN.replace(shown, printed, 1))
    assert not changed.holds
    assert printed in changed.diff()


def test_an_example_is_a_sh_block_then_an_output_block(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("intro\n\n```sh\necho shown only\n```\n\ntext\n\n```sh\necho a\necho b\n```\n\n```output\na\nb\n```\n"
                    "```python\nprint('not run')\n```\n```output\nnot an example\n```\n")  # fmt: skip
    found = examples.examples(page)
    assert [(e.line, e.commands, e.shown) for e in found] == [(9, "echo a\necho b\n", "a\nb\n")]
    assert page.read_text()[found[0].start : found[0].end] == "a\nb\n"


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as dashes."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    return {_anchor(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


@pytest.mark.parametrize("page", examples.pages(), ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked):
            broken.append(f"{target}: no such heading")
    assert not broken, f"{page.name}: {broken}"


def test_writing_replaces_only_the_outputs_that_no_longer_hold(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\nx\n```\n```output\ntook 1.5 s\n```\n\n```sh\ny\n```\n```output\nconfidence 72\n```\n")
    found = examples.examples(page)
    changed = examples.write([Outcome(found[0], "took 2.5 s\n"), Outcome(found[1], "confidence 76\n")])
    assert changed == [page]
    assert page.read_text() == "```sh\nx\n```\n```output\ntook 1.5 s\n```\n\n```sh\ny\n```\n```output\nconfidence 76\n```\n"


@pytest.mark.timeout(600)
def test_the_readmes_first_example_is_answered_and_cited_or_routed_by_the_readers_rule(outcomes: list[Outcome]) -> None:
    """README's first question stays, and the fresh server answers it from a cited passage; it is ACTION_CITE exactly
    when its confidence clears the reader's threshold (the shipped model's, chosen for 95% precision: issue 27 asks
    for CITE here, which the trained reader does not give today). This checks what the server printed, so `make
    docs` cannot rewrite the shown output into a refusal that passes."""
    first = outcomes[0]
    assert first.example.page == examples.ROOT / "README.md"
    assert first.example.commands == '.venv/bin/ragsvc ask "What happens on SIGTERM?"\n'
    status = first.printed.rstrip().splitlines()[-1]
    assert status.startswith("grounded; confidence "), first.printed
    confidence = int(status.split("; ")[1].removeprefix("confidence "))
    trust = Settings.from_env({}).trust
    threshold = cite_threshold(trust, build_reader(trust, extractive=True))
    expected = "; ACTION_CITE; " if confidence >= threshold else "; ACTION_ROUTE "
    assert expected in status, (threshold, first.printed)
    assert "[#1]" in first.printed, "the answer cites its first passage"
