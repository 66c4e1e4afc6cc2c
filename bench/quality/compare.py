"""Two runs of the quality benchmark compared question by question: did a change help, or is it noise?

    python -m bench.quality.compare BEFORE.json AFTER.json [--corpus pgdocs] [--split dev]

A question **holds** when the run did what it should: an answerable question or a follow-up answered and right,
an unanswerable one refused, an injection probe safe. The questions that flipped between the runs decide: the
exact two-sided McNemar test (a sign test on the flips) gives the chance of at least that lopsided a split if the
change did nothing. With 70 questions a split, a few flips either way are well within chance (6 to 0 is needed
for p < 0.05). Prints each targeted metric of both runs, the flips and the p-value, as Markdown; the flipped
questions by id on dev only (held-out is reported, never read question by question to choose). Results files
written before the benchmark had several corpora hold pgdocs alone; they are read as pgdocs'.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from bench.quality.report import pct

SHOULD_ANSWER = ("answerable", "followup")


def holds(outcome: dict[str, Any]) -> bool:
    """Whether the run did what the question asks of it (see the module's docstring)."""
    if outcome["kind"] in SHOULD_ANSWER:
        return bool(outcome["right"])
    if outcome["kind"] == "unanswerable":
        return not outcome["grounded"]
    return bool(outcome["safe"])


def mcnemar_p(lost: int, gained: int) -> float:
    """Exact two-sided McNemar p-value: the chance, under no effect (each flip equally likely either way), of a
    split of `lost` + `gained` flips at least as uneven as this one."""
    flips = lost + gained
    if flips == 0:
        return 1.0
    tail = sum(math.comb(flips, k) for k in range(min(lost, gained) + 1)) / float(2**flips)
    return min(1.0, 2.0 * tail)


def corpus_result(result: dict[str, Any], name: str) -> dict[str, Any]:
    """One corpus's part of a results file (a file from before several corpora: the whole file, pgdocs')."""
    if "corpora" not in result:
        if name != "pgdocs":
            raise SystemExit(f"a results file from before several corpora holds pgdocs only, not {name}")
        return result
    if name not in result["corpora"]:
        raise SystemExit(f"the results file has no corpus {name} (it has {', '.join(result['corpora'])})")
    return {"git_commit": result.get("git_commit"), **result["corpora"][name]}


def compare(before: dict[str, Any], after: dict[str, Any], split: str) -> dict[str, Any]:
    """The flips between two results files on the questions of `split` that both asked."""
    old = {o["id"]: o for o in before["outcomes"] if split in ("all", o["split"])}
    new = {o["id"]: o for o in after["outcomes"] if split in ("all", o["split"])}
    common = sorted(old.keys() & new.keys())
    gained = [i for i in common if holds(new[i]) and not holds(old[i])]
    lost = [i for i in common if holds(old[i]) and not holds(new[i])]
    return {
        "split": split,
        "questions": len(common),
        "held_before": sum(1 for i in common if holds(old[i])),
        "held_after": sum(1 for i in common if holds(new[i])),
        "gained": gained,
        "lost": lost,
        "p_value": round(mcnemar_p(len(lost), len(gained)), 4),
        "by_kind": {
            kind: {
                "gained": sum(1 for i in gained if new[i]["kind"] == kind),
                "lost": sum(1 for i in lost if new[i]["kind"] == kind),
            }
            for kind in ("answerable", "followup", "unanswerable", "injection")
        },
    }


def markdown(before: dict[str, Any], after: dict[str, Any], split: str) -> str:
    found = compare(before, after, split)
    m0, m1 = before["metrics"].get(split, {}), after["metrics"].get(split, {})

    def metric(m: dict[str, Any], path: tuple[str, ...]) -> float | None:
        value: Any = m
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        return float(value) if isinstance(value, float | int) else None

    rows = [
        ("hit@5", ("retrieval", "hit@5")),
        ("answered and right", ("answerable", "answered_and_right")),
        ("right in the first passage", ("answerable", "right_first")),
        ("unanswerable refused", ("unanswerable", "refused")),
        ("CITE precision", ("cite_precision",)),
        ("follow-ups right", ("followup", "answered_and_right")),
    ]
    lines = [
        f"{split}: {before.get('git_commit', '?')[:10]} -> {after.get('git_commit', '?')[:10]}",
        "",
        "| metric | before | after |",
        "|---|---|---|",
    ]
    lines += [f"| {label} | {pct(metric(m0, path))} | {pct(metric(m1, path))} |" for label, path in rows]
    auroc = (metric(m0, ("auroc_confidence",)), metric(m1, ("auroc_confidence",)))
    lines.append(f"| AUROC | {auroc[0] if auroc[0] is not None else 'n/a'} | {auroc[1] if auroc[1] is not None else 'n/a'} |")
    kinds = ", ".join(f"{k} +{v['gained']}/-{v['lost']}" for k, v in found["by_kind"].items() if v["gained"] or v["lost"])
    lines += [
        "",
        f"Questions that hold: {found['held_before']} -> {found['held_after']} of {found['questions']}; "
        f"gained {len(found['gained'])}, lost {len(found['lost'])} ({kinds or 'none'}); "
        f"exact McNemar p = {found['p_value']}.",
    ]
    if split == "dev":
        lines.append(f"Gained: {', '.join(found['gained']) or 'none'}. Lost: {', '.join(found['lost']) or 'none'}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--corpus", default="pgdocs")
    parser.add_argument("--split", choices=("dev", "heldout", "all"), default="dev")
    args = parser.parse_args(argv)
    before, after = (corpus_result(json.loads(path.read_text()), args.corpus) for path in (args.before, args.after))
    print(markdown(before, after, args.split))


if __name__ == "__main__":
    main()
