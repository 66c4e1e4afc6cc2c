"""The shell examples of README.md and docs/*.md, run against a fresh server, with their shown outputs.

An example is a ```sh block followed by an ```output block: the commands, then what they print (stdout and stderr
together, as a terminal shows them). A ```sh block without an ```output block after it is shown, not run.

    python -m tests.docs.examples            # run every example, fail on any shown output that differs (make docs-check)
    python -m tests.docs.examples --write    # run every example, write what it printed where that differs (make docs)

One `ragsvc serve` runs for all of them, as `make serve` would (the bundled demo corpus, the extractive generator,
every other setting at its default), on a free port in a data directory of its own; the examples run in the
repository's root, in order, README.md first, each block as one bash script with RAG_GRPC_ADDRESS naming that
server. The pages write the default address, 127.0.0.1:50051: it stands for the server's in the commands, and the
server's stands for it in their outputs.

Comparing, timings (`5.93 s`, `12 ms`), times of day (`2026-11-24 03:39`), UUIDs and hex hashes are masked, on
both sides; nothing else is. So a change that moves a confidence, a count or a sentence fails the check until
`make docs` writes the new output into the page.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTED_ADDRESS = "127.0.0.1:50051"
SERVE_START_TIMEOUT_S = 120.0
BLOCK_TIMEOUT_S = 180.0

# A ```sh block, blank lines, then an ```output block (no line of either starts with ```).
_LINES = r"(?:(?!```)[^\n]*\n)*"
EXAMPLE = re.compile(rf"^```sh\n(?P<commands>{_LINES})```\n(?:[ \t]*\n)*```output\n(?P<output>{_LINES})```$", re.M)
MASKS = (
    ("<time>", re.compile(r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")),
    ("<uuid>", re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b")),
    ("<hash>", re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{12,}\b")),
    ("<duration>", re.compile(r"\b\d+(?:\.\d+)? ?(?:ms|s)\b")),
)


@dataclass(frozen=True, slots=True)
class Example:
    """One example of a page: its commands, the output the page shows, and where that output sits in the page."""

    page: Path
    line: int
    commands: str
    shown: str
    start: int  # offsets of the shown output in the page's text
    end: int

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def pages(root: Path = ROOT) -> list[Path]:
    """README.md, then the pages of docs/ (not those of the examples' dependencies), in name order."""
    return [root / "README.md", *sorted(p for p in (root / "docs").glob("*.md"))]


def examples(page: Path) -> list[Example]:
    text = page.read_text()
    found = []
    for m in EXAMPLE.finditer(text):
        line = text.count("\n", 0, m.start()) + 1
        found.append(Example(page, line, m.group("commands"), m.group("output"), m.start("output"), m.end("output")))
    return found


def masked(output: str) -> str:
    """`output` with timings, times, UUIDs and hashes replaced by placeholders, and trailing blanks dropped."""
    for placeholder, pattern in MASKS:
        output = pattern.sub(placeholder, output)
    return "\n".join(line.rstrip() for line in output.rstrip().splitlines())


class Server:
    """`ragsvc serve` as `make serve` runs it, in a temporary data directory, on a free port."""

    def __init__(self, data_dir: Path) -> None:
        self._log = (data_dir / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "ragsvc.cli", "serve"],
            cwd=ROOT,
            env={**_base_env(), "RAG_GRPC_ADDRESS": "127.0.0.1:0", "RAG_DATA_DIR": str(data_dir / "data")},
            stdout=subprocess.PIPE,
            stderr=self._log,
        )
        self.log_path = data_dir / "serve.log"
        self.address = self._address()

    def _address(self) -> str:
        assert self.process.stdout is not None
        started = time.monotonic()
        line = self.process.stdout.readline().decode()  # the first line it prints, once it serves
        if not line.startswith("ragsvc serving on "):
            self.close()
            tail = self.log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"`ragsvc serve` did not start ({time.monotonic() - started:.0f} s): {line!r}\n{tail}")
        return line.removeprefix("ragsvc serving on ").strip()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


def _base_env() -> dict[str, str]:
    """A user's shell with none of ragsvc's settings: PATH and HOME kept, unbuffered Python, no terminal."""
    keep = {name: os.environ[name] for name in ("PATH", "HOME", "TMPDIR") if name in os.environ}
    return {**keep, "LANG": "C.UTF-8", "TERM": "dumb", "COLUMNS": "120", "PYTHONUNBUFFERED": "1"}


def run(example: Example, address: str) -> str:
    """What the example's commands print against the server at `address`, written as the page writes it."""
    commands = example.commands.replace(DOCUMENTED_ADDRESS, address)
    process = subprocess.Popen(
        ["bash", "-c", commands],
        cwd=ROOT,
        env={**_base_env(), "RAG_GRPC_ADDRESS": address},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: a timeout ends every command it started
    )
    try:
        printed, _ = process.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"{example.where}: the example ran longer than {BLOCK_TIMEOUT_S:.0f} s") from None
    finally:
        with contextlib.suppress(ProcessLookupError):  # whatever it left running, or all of it on a timeout
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return printed.decode(errors="replace").replace(address, DOCUMENTED_ADDRESS)


@dataclass(frozen=True, slots=True)
class Outcome:
    example: Example
    printed: str

    @property
    def holds(self) -> bool:
        return masked(self.printed) == masked(self.example.shown)

    def diff(self) -> str:
        lines = difflib.unified_diff(
            masked(self.example.shown).splitlines(), masked(self.printed).splitlines(),
            f"{self.example.where} (shown)", "printed", lineterm="",
        )  # fmt: skip
        return "\n".join(lines)


def run_all(chosen: Sequence[Path] | None = None) -> Iterator[Outcome]:
    """Every example of `chosen` pages (default: all), run in order against one fresh server."""
    with tempfile.TemporaryDirectory(prefix="ragsvc-docs-") as scratch:
        server = Server(Path(scratch))
        try:
            for page in chosen or pages():
                for example in examples(page):
                    yield Outcome(example, run(example, server.address))
        finally:
            server.close()


def write(outcomes: Sequence[Outcome]) -> list[Path]:
    """Writes the printed output of each example whose shown one no longer holds into its page (an output that
    differs only in what is masked stays as it is shown); the pages changed."""
    changed = []
    by_page: dict[Path, list[Outcome]] = {}
    for outcome in outcomes:
        if not outcome.holds:
            by_page.setdefault(outcome.example.page, []).append(outcome)
    for page, found in by_page.items():
        text = page.read_text()
        for outcome in sorted(found, key=lambda o: o.example.start, reverse=True):
            printed = outcome.printed if outcome.printed.endswith("\n") or not outcome.printed else outcome.printed + "\n"
            text = text[: outcome.example.start] + printed + text[outcome.example.end :]
        if text != page.read_text():
            page.write_text(text)
            changed.append(page)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="write what each example printed into its page")
    parser.add_argument("pages", nargs="*", type=Path, help="only these pages (default: README.md and docs/*.md)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    outcomes = list(run_all([p.resolve() for p in args.pages] or None))
    elapsed = time.monotonic() - started
    if args.write:
        changed = write(outcomes)
        names = ", ".join(str(p.relative_to(ROOT)) for p in changed) or "nothing changed"
        print(f"{len(outcomes)} examples run in {elapsed:.0f} s; rewritten: {names}")
        return 0
    failed = [o for o in outcomes if not o.holds]
    for outcome in failed:
        print(outcome.diff(), end="\n\n")
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} shown outputs hold ({elapsed:.0f} s)"
          + ("; `make docs` writes the printed ones into the pages" if failed else ""))  # fmt: skip
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
