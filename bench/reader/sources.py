"""Where the training corpora's questions and ingested indexes are (a stand-in until the multi-corpus benchmark
registry lands)."""

from __future__ import annotations

from pathlib import Path

from bench.quality import questions as benchmark_questions
from bench.quality.questions import Question

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("pgdocs", "pydocs", "httpd", "handbook")


def questions(name: str) -> list[Question]:
    path = ROOT / "bench" / "quality" / ("questions.jsonl" if name == "pgdocs" else f"corpora/{name}/questions.jsonl")
    return benchmark_questions.load(path)


def tenant(name: str) -> str:
    return name


async def data_dir(name: str) -> Path:
    if name == "pgdocs":
        return ROOT / ".bench" / "quality-index" / "3c15a37c1a548c84" / "data"
    return ROOT / ".bench" / "reader" / f"index-{name}" / "data"
