"""`python -m bench.quality.check [--corpus NAME] [FILE]`: check a corpus's questions against its pages.

FILE is another question set of that corpus (such as pgdocs' tuning_followups.jsonl), checked without the split
rule; the rules are `bench.quality.questions.check`'s. Prints what fails, or that the file is sound, and the counts
per kind and split; exits 1 when something fails.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from bench.quality import corpus, questions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default="pgdocs", choices=list(corpus.CORPORA))
    parser.add_argument("file", nargs="?", type=Path, help="another question set of that corpus")
    args = parser.parse_args(argv)
    spec = corpus.get(args.corpus)
    path = args.file or spec.questions_file
    texts = corpus.page_texts(corpus.load_pages(spec, corpus.fetch(spec).html_dir))
    loaded = questions.load(path)
    found = questions.check(loaded, texts, split_rule=path.resolve() == spec.questions_file)
    print("\n".join(found) or f"{path.name} is sound")
    print(json.dumps(questions.summary(loaded)))
    raise SystemExit(1 if found else 0)


if __name__ == "__main__":
    main()
