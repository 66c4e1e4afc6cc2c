"""The benchmark's corpus: the PostgreSQL 15 HTML documentation from Debian's `postgresql-doc-15` package.

Fetched the same way every time: `apt-get download postgresql-doc-15=<VERSION>` (Debian's own client, no install),
the .deb's sha256 checked against SHA256, unpacked with `dpkg-deb -x` into a gitignored cache
(.bench/quality-corpus/<version>/). The subset is every page of Part I (Tutorial) and Part III (Server
Administration): a page is in when following its "Up" navigation links leads to tutorial.html or admin.html
(the part pages included). `corpus_pages.txt` is that list, committed; `fetch()` recomputes it from the package and
fails if the two differ. One planted page (planted/ops-handover-notes.html, written for this benchmark) carries a
prompt-injection instruction and is ingested with the corpus.

Document ids are the file names without `.html` (ragsvc's slug of the stem: "runtime-config-connection").
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from selectolax.lexbor import LexborHTMLParser

from ragsvc.ingest.html import html_title
from ragsvc.ingest.loaders import slugify

PACKAGE = "postgresql-doc-15"
VERSION = "15.18-0+deb12u1"
SHA256 = "3c598277a463c44d672daa2c335deb8d8252e1852fb025fd4578ea2d9a1b90f0"
HTML_DIR = "usr/share/doc/postgresql-doc-15/html"
COPYRIGHT = "usr/share/doc/postgresql-doc-15/copyright"
PART_ROOTS = ("tutorial.html", "admin.html")
LICENSE = "PostgreSQL License (legalnotice.html in the package; Debian's copyright file beside the pages)"

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
PAGE_LIST = HERE / "corpus_pages.txt"
PLANTED_DIR = HERE / "planted"
PLANTED_ID = "ops-handover-notes"
CACHE = Path(os.environ.get("EVAL_CACHE_DIR", ROOT / ".bench" / "quality-corpus"))


@dataclass(frozen=True, slots=True)
class Page:
    document_id: str
    name: str
    title: str
    content: bytes
    planted: bool = False


def committed_pages() -> list[str]:
    return [line.strip() for line in PAGE_LIST.read_text().splitlines() if line.strip()]


def select_pages(html_dir: Path) -> list[str]:
    """The subset rule: pages whose chain of "Up" links reaches one of PART_ROOTS (the roots included), sorted."""
    up: dict[str, str | None] = {}
    for path in sorted(html_dir.glob("*.html")):
        tree = LexborHTMLParser(path.read_bytes().decode("utf-8"))
        link = tree.css_first('div.navheader a[accesskey="u"]')
        up[path.name] = link.attributes.get("href") if link is not None else None
    selected = []
    for name in up:
        current: str | None = name
        for _ in range(20):
            if current in PART_ROOTS:
                selected.append(name)
                break
            if current is None:
                break
            current = up.get(current)
    return sorted(selected)


def fetch(cache: Path = CACHE, *, quiet: bool = False) -> Path:
    """The unpacked HTML directory of the pinned package, downloaded and checked on first use."""
    target = cache / VERSION
    html_dir = target / HTML_DIR
    marker = target / ".sha256"
    if marker.exists() and marker.read_text().strip() == SHA256 and html_dir.is_dir():
        return html_dir
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        deb = _download(Path(tmp), quiet=quiet)
        digest = hashlib.sha256(deb.read_bytes()).hexdigest()
        if digest != SHA256:
            raise SystemExit(f"{deb.name}: sha256 {digest}, expected {SHA256}; refusing to use it")
        unpacked = Path(tmp) / "x"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        if target.exists():
            shutil.rmtree(target)
        shutil.move(str(unpacked), target)
    computed = select_pages(html_dir)
    if computed != committed_pages():
        raise SystemExit(
            f"the subset rule selects {len(computed)} pages, {PAGE_LIST.name} lists {len(committed_pages())}: "
            "the package or the rule changed"
        )
    marker.write_text(SHA256 + "\n")
    return html_dir


def _download(directory: Path, *, quiet: bool) -> Path:
    command = ["apt-get", "download", f"{PACKAGE}={VERSION}"]
    result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    if result.returncode != 0 and os.geteuid() == 0:
        # A fresh machine may have no package lists yet (or stale ones); root can refresh them once.
        if not quiet:
            print("apt-get download failed; running apt-get update once and retrying", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], capture_output=True, text=True)
        result = subprocess.run(command, cwd=directory, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(
            f"`{' '.join(command)}` failed:\n{result.stderr.strip()}\n"
            "Debian's package lists are needed (`apt-get update` as root) and the pinned version must still be "
            "in the archive."
        )
    [deb] = directory.glob("*.deb")
    return deb


def load_pages(html_dir: Path, names: list[str] | None = None, *, planted: bool = True) -> list[Page]:
    """The corpus pages (all of corpus_pages.txt, or `names`) and the planted page, in a fixed order."""
    pages = []
    for name in names if names is not None else committed_pages():
        content = (html_dir / name).read_bytes()
        stem = name.rsplit(".", 1)[0]
        pages.append(Page(slugify(stem), name, html_title(content) or stem, content))
    if planted:
        path = PLANTED_DIR / f"{PLANTED_ID}.html"
        content = path.read_bytes()
        pages.append(Page(PLANTED_ID, path.name, html_title(content) or PLANTED_ID, content, planted=True))
    return pages


def corpus_hash(pages: list[Page]) -> str:
    """sha256 over every page's id and bytes, in order: names the exact documents ingested."""
    digest = hashlib.sha256()
    for page in pages:
        digest.update(page.document_id.encode() + b"\0" + hashlib.sha256(page.content).digest())
    return digest.hexdigest()


if __name__ == "__main__":
    directory = fetch()
    print(directory)
    print(f"{len(committed_pages())} pages, corpus hash {corpus_hash(load_pages(directory))}")
