"""The rules that choose a corpus's pages from its package's documentation root.

Each rule is a frozen dataclass with `select(root)`: the chosen pages as sorted paths relative to the root ("x.html",
"howto/cgi.html"), and `description`, a sentence for the results and docs. They read only the HTML files under the
root, so they run the same on a whole unpacked package and on a few fixture pages.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from selectolax.lexbor import LexborHTMLParser

__all__ = ["Directories", "SubsetRule", "Toctree", "UpLinks"]


class SubsetRule(Protocol):
    @property
    def description(self) -> str: ...

    def select(self, root: Path) -> list[str]: ...


def _parse(path: Path) -> LexborHTMLParser:
    return LexborHTMLParser(path.read_bytes().decode("utf-8", errors="replace"))


@dataclass(frozen=True, slots=True)
class UpLinks:
    """DocBook navigation (the PostgreSQL manual): pages whose chain of "Up" links reaches one of `roots`, the
    roots included."""

    roots: tuple[str, ...]
    max_depth: int = 20

    @property
    def description(self) -> str:
        return f"pages whose chain of Up links (div.navheader a[accesskey=u]) reaches {' or '.join(self.roots)}"

    def select(self, root: Path) -> list[str]:
        up: dict[str, str | None] = {}
        for path in sorted(root.glob("*.html")):
            link = _parse(path).css_first('div.navheader a[accesskey="u"]')
            up[path.name] = link.attributes.get("href") if link is not None else None
        selected = []
        for name in up:
            current: str | None = name
            for _ in range(self.max_depth):
                if current in self.roots:
                    selected.append(name)
                    break
                if current is None:
                    break
                current = up.get(current)
        return sorted(selected)


@dataclass(frozen=True, slots=True)
class Toctree:
    """Sphinx chapters (the Python library reference): each chapter page and every page its table of contents
    (div.toctree-wrapper a.reference.internal) links to in the same directory, anchors dropped."""

    chapters: tuple[str, ...]

    @property
    def description(self) -> str:
        return (f"the chapter pages {', '.join(self.chapters)} and every page their div.toctree-wrapper "
                "a.reference.internal links point to (same directory)")

    def select(self, root: Path) -> list[str]:
        selected = set()
        for chapter in self.chapters:
            selected.add(chapter)
            directory = chapter.rpartition("/")[0]
            for link in _parse(root / chapter).css("div.toctree-wrapper a.reference.internal"):
                target = (link.attributes.get("href") or "").split("#", 1)[0]
                if target and "/" not in target and target.endswith(".html"):
                    selected.add(f"{directory}/{target}" if directory else target)
        return sorted(page for page in selected if (root / page).is_file())


@dataclass(frozen=True, slots=True)
class Directories:
    """Every *.html file directly in `directories` ("" is the root itself) except those named in `excluded` (in
    any of them)."""

    directories: tuple[str, ...]
    excluded: tuple[str, ...] = ()

    @property
    def description(self) -> str:
        where = ", ".join(f"{d}/" if d else "the root" for d in self.directories)
        return f"every *.html file in {where}" + (f", except {' and '.join(self.excluded)}" if self.excluded else "")

    def select(self, root: Path) -> list[str]:
        found = []
        for directory in self.directories:
            for path in (root / directory).glob("*.html"):
                if path.name not in self.excluded and path.is_file():
                    found.append(path.relative_to(root).as_posix())
        return sorted(found)
