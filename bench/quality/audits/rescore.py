"""Rescore a results file's stored answers against each corpus's current questions.jsonl (after a label audit).

    .venv/bin/python -m bench.quality.audits.rescore RESULTS.json CORPUS [CORPUS ...]

For each corpus: answerable and follow-up answers right before (as stored) -> after (metrics.is_right with the
current key facts), and the same for the answers given with ACTION_CITE.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.quality import metrics
from bench.quality.questions import load


def main() -> None:
    results = json.loads(Path(sys.argv[1]).read_text())
    for name in sys.argv[2:]:
        run = results["corpora"][name]
        questions = {q.id: q for q in load(Path(run["questions_file"]["path"]))}
        asked = [o for o in run["outcomes"] if o["kind"] in ("answerable", "followup")]
        after = {o["id"]: metrics.is_right(questions[o["id"]], o["grounded"], o["answer"]) for o in asked}
        cited = [o for o in asked if o["action"] == "ACTION_CITE"]
        print(
            f"{name}: answerable+follow-up right {sum(o['right'] for o in asked)} -> {sum(after.values())} of {len(asked)};"
            f" CITE right {sum(o['right'] for o in cited)} -> {sum(after[o['id']] for o in cited)} of {len(cited)}"
        )


if __name__ == "__main__":
    main()
