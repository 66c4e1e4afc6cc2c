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

__all__ = ["Directories", "Named", "SubsetRule", "Toctree", "UpLinks"]


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
        return (
            f"the chapter pages {', '.join(self.chapters)} and every page their div.toctree-wrapper "
            "a.reference.internal links point to (same directory)"
        )

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
    any of them), and, with `language`, only pages whose <html lang> is that language (a package's English
    directory may hold translations: apache2-doc's en/ has six pages in Portuguese)."""

    directories: tuple[str, ...]
    excluded: tuple[str, ...] = ()
    language: str = ""

    @property
    def description(self) -> str:
        where = ", ".join(f"{d}/" if d else "the root" for d in self.directories)
        described = f"every *.html file in {where}" + (f", except {' and '.join(self.excluded)}" if self.excluded else "")
        return described + (f", whose <html lang> is {self.language}" if self.language else "")

    def select(self, root: Path) -> list[str]:
        found = []
        for directory in self.directories:
            for path in (root / directory).glob("*.html"):
                if path.name not in self.excluded and path.is_file() and self._in_language(path):
                    found.append(path.relative_to(root).as_posix())
        return sorted(found)

    def _in_language(self, path: Path) -> bool:
        if not self.language:
            return True
        html = _parse(path).css_first("html")
        lang = (html.attributes.get("lang") or "") if html is not None else ""
        return lang.lower().split("-")[0] == self.language


@dataclass(frozen=True, slots=True)
class Named:
    """The pages matching `patterns` (shell-style, relative to the root), for a corpus chosen by name: a manual's
    language reference and its best-known pages, a command set."""

    patterns: tuple[str, ...]
    why: str

    @property
    def description(self) -> str:
        return f"{self.why}: {', '.join(self.patterns)}"

    def select(self, root: Path) -> list[str]:
        found = {path.relative_to(root).as_posix() for pattern in self.patterns for path in root.glob(pattern)}
        return sorted(page for page in found if (root / page).is_file())
