"""The quality benchmark's corpora (bench/quality/corpus.py, subsets.py): the registry, the subset rules on small
pages written here, and how a fetch survives Debian dropping the pinned version. The download step is injected:
real .deb files are built here with `dpkg-deb --build` and unpacked by the real `dpkg-deb -x`, with no network."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from bench.quality import corpus
from bench.quality.debian import FetchError, VersionGone, deb_version, sha256_of
from bench.quality.subsets import Directories, Named, Toctree, UpLinks
from ragsvc.ingest.loaders import slugify


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- the registry --------------------------------------------------------------------------------------------


def test_every_corpus_has_its_own_tenant_directory_pin_and_pages() -> None:
    assert list(corpus.CORPORA) == [
        "pgdocs",
        "pydocs",
        "httpd",
        "handbook",
        "sqlite",
        "gitdocs",
        "djangodocs",
        "postfix",
        "borgdocs",
        "zshdocs",
    ]
    assert len({c.tenant for c in corpus.CORPORA.values()}) == len(corpus.CORPORA)
    for name, spec in corpus.CORPORA.items():
        assert spec.name == name and spec.directory == corpus.CORPORA_DIR / name
        assert re.fullmatch(r"[0-9a-f]{64}", spec.sha256), name
        assert spec.source_url("x/y.html").endswith("/x/y.html") and spec.source_url("a.html").startswith("https://")
        pages = spec.committed_pages()
        assert pages == sorted(set(pages)) and all(p.endswith(".html") for p in pages), name
        ids = [slugify(p.removesuffix(".html")) for p in pages]
        assert len(set(ids)) == len(ids), f"{name}: two pages share a document id"
    with pytest.raises(dataclasses.FrozenInstanceError):
        corpus.CORPORA["pgdocs"].version = "0"  # type: ignore[misc]


def test_document_ids_are_the_slug_of_the_path_and_planted_pages_follow_the_pages(tmp_path: Path) -> None:
    spec = dataclasses.replace(corpus.CORPORA["pydocs"], corpora_dir=tmp_path)
    write(spec.pages_file, "library/bz2.html\nlibrary/zipfile.html\n")
    write(spec.planted_dir / "Team Notes.html", "<html><head><title>Notes</title></head><body><p>x</p></body></html>")
    root = tmp_path / "html"
    for page in spec.committed_pages():
        write(root / page, f"<html><head><title>{page}</title></head><body><p>{page}</p></body></html>")
    pages = corpus.load_pages(spec, root)
    assert [p.document_id for p in pages] == ["library-bz2", "library-zipfile", "team-notes"]
    assert [p.planted for p in pages] == [False, False, True]
    assert pages[0].source_url == "https://docs.python.org/3.11/library/bz2.html" and pages[2].source_url == ""
    assert corpus.get("pgdocs").tenant == "pgdocs"
    with pytest.raises(SystemExit, match="no corpus named 'nope'"):
        corpus.get("nope")


# -- subset rules on small pages -------------------------------------------------------------------------------


def docbook(up: str | None) -> str:
    link = f'<div class="navheader"><a accesskey="u" href="{up}">Up</a></div>' if up else ""
    return f"<html><body>{link}<p>text</p></body></html>"


def test_up_links_take_the_pages_under_the_roots(tmp_path: Path) -> None:
    for name, up in {
        "index.html": None,
        "admin.html": "index.html",
        "backup.html": "admin.html",
        "backup-dump.html": "backup.html",
        "sql.html": "index.html",
        "loop-a.html": "loop-b.html",
        "loop-b.html": "loop-a.html",
    }.items():
        write(tmp_path / name, docbook(up))
    rule = UpLinks(roots=("admin.html",))
    assert rule.select(tmp_path) == ["admin.html", "backup-dump.html", "backup.html"]
    assert "admin.html" in rule.description


def test_a_toctree_takes_the_chapters_and_the_pages_they_list(tmp_path: Path) -> None:
    toc = (
        '<div class="toctree-wrapper"><a class="reference internal" href="bz2.html">bz2</a>'
        '<a class="reference internal" href="bz2.html#bz2.open">open</a>'
        '<a class="reference internal" href="zipfile.html#module-zipfile">zip</a>'
        '<a class="reference internal" href="../tutorial/index.html">elsewhere</a>'
        '<a class="reference external" href="https://example.org/x.html">external</a></div>'
        '<p><a class="reference internal" href="gzip.html">outside the toctree</a></p>'
    )
    write(tmp_path / "library" / "archiving.html", f"<html><body>{toc}</body></html>")
    for name in ("bz2", "zipfile", "gzip"):
        write(tmp_path / "library" / f"{name}.html", "<html><body><p>x</p></body></html>")
    rule = Toctree(chapters=("library/archiving.html",))
    assert rule.select(tmp_path) == ["library/archiving.html", "library/bz2.html", "library/zipfile.html"]


def test_directories_take_every_page_but_the_excluded_names(tmp_path: Path) -> None:
    for page in (
        "bind.html",
        "index.html",
        "sitemap.html",
        "howto/cgi.html",
        "howto/index.html",
        "ssl/faq.html",
        "mod/core.html",
        "howto/notes.txt",
    ):
        write(tmp_path / page, "<html></html>")
    rule = Directories(directories=("", "howto"), excluded=("index.html", "sitemap.html"))
    assert rule.select(tmp_path) == ["bind.html", "howto/cgi.html"]
    assert Directories(directories=("",)).select(tmp_path) == ["bind.html", "index.html", "sitemap.html"]


def test_directories_in_a_language_leave_out_translations(tmp_path: Path) -> None:
    write(tmp_path / "bind.html", '<html lang="pt-br"><body><p>Escutar</p></body></html>')
    write(tmp_path / "caching.html", '<html lang="en"><body><p>Caching</p></body></html>')
    write(tmp_path / "dso.html", '<html xml:lang="en" lang="en-US"><body><p>DSO</p></body></html>')
    assert Directories(directories=("",), language="en").select(tmp_path) == ["caching.html", "dso.html"]


def test_named_pages_are_the_pages_their_patterns_match(tmp_path: Path) -> None:
    for page in ("lang_select.html", "lang_insert.html", "pragma.html", "about.html", "lang_notes.txt"):
        write(tmp_path / page, "<html></html>")
    rule = Named(patterns=("lang_*.html", "pragma.html", "missing.html"), why="the SQL pages and pragmas")
    assert rule.select(tmp_path) == ["lang_insert.html", "lang_select.html", "pragma.html"]
    assert rule.description.startswith("the SQL pages and pragmas: lang_*.html")


# -- fetching, and a version Debian dropped -------------------------------------------------------------------

PAGE = "<html><head><title>{title}</title></head><body><h1>{title}</h1><p>{text}</p></body></html>"
PAGES = {
    "bind.html": PAGE.format(title="Binding", text="The server listens on port 80 by default."),
    "howto/cgi.html": PAGE.format(title="CGI", text="Scripts run from the cgi-bin directory."),
}


def build_deb(directory: Path, version: str, pages: dict[str, str]) -> Path:
    """A real .deb of package demo-doc holding `pages` under usr/share/doc/demo/html."""
    tree = directory / f"tree-{version}"
    write(
        tree / "DEBIAN" / "control",
        f"Package: demo-doc\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: Bench <bench@example.org>\nDescription: pages for a test\n",
    )
    for name, text in pages.items():
        write(tree / "usr/share/doc/demo/html" / name, text)
    deb = directory / f"demo-doc_{version}_all.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(tree), str(deb)], check=True, capture_output=True)
    return deb


def demo_corpus(tmp_path: Path, sha256: str) -> corpus.Corpus:
    spec = corpus.Corpus(
        name="demo",
        tenant="demo",
        package="demo-doc",
        version="1.0",
        sha256=sha256,
        doc_root="usr/share/doc/demo/html",
        subset=Directories(directories=("", "howto")),
        url_template="https://example.org/{path}",
        license="test",
        corpora_dir=tmp_path / "corpora",
    )
    write(spec.pages_file, "\n".join(sorted(PAGES)) + "\n")
    row = {
        "id": "a001",
        "split": "dev",
        "kind": "answerable",
        "style": "short",
        "question": "default listening port",
        "history": [],
        "expected_documents": ["bind"],
        "key_facts": ["80"],
        "provenance": {"page": "bind.html", "quote": "The server listens on port 80 by default."},
    }
    write(spec.questions_file, json.dumps(row) + "\n")  # the only answerable question: dev by the split rule
    return spec


class Archive:
    """The injected download step: which versions 'Debian' still has, and every call made."""

    def __init__(self, directory: Path, versions: dict[str, dict[str, str]], current: str) -> None:
        self.debs = {v: build_deb(directory / "archive", v, pages) for v, pages in versions.items()}
        self.current = current
        self.calls: list[str | None] = []

    def download(self, package: str, version: str | None, directory: Path) -> Path:
        self.calls.append(version)
        wanted = self.current if version is None else version
        if wanted not in self.debs:
            raise VersionGone(f"E: Version '{version}' for '{package}' was not found")
        directory.mkdir(parents=True, exist_ok=True)
        target = directory / self.debs[wanted].name
        target.write_bytes(self.debs[wanted].read_bytes())
        return target


def fetcher(
    tmp_path: Path, versions: dict[str, dict[str, str]], current: str, pinned_sha: Callable[[Archive], str] | None = None
) -> tuple[corpus.Corpus, Archive]:
    archive = Archive(tmp_path, versions, current)
    sha = pinned_sha(archive) if pinned_sha else sha256_of(build_deb(tmp_path / "gone", "1.0", PAGES))
    return demo_corpus(tmp_path, sha), archive


def test_the_pinned_version_is_fetched_checked_and_then_served_from_the_cache(tmp_path: Path) -> None:
    spec, archive = fetcher(tmp_path, {"1.0": PAGES}, "1.0", lambda a: sha256_of(a.debs["1.0"]))
    fetched = corpus.fetch(spec, tmp_path / "cache", download=archive.download)
    assert (fetched.version, fetched.pinned, fetched.deb_sha256) == ("1.0", True, spec.sha256)
    assert (fetched.html_dir / "howto" / "cgi.html").is_file()
    assert corpus.fetch(spec, tmp_path / "cache", download=archive.download) == fetched
    assert archive.calls == ["1.0"], "the second fetch is served from the cache"


def test_a_pinned_deb_with_another_sha256_is_refused(tmp_path: Path) -> None:
    spec, archive = fetcher(tmp_path, {"1.0": PAGES}, "1.0", lambda a: "0" * 64)
    with pytest.raises(FetchError, match="expected 0000"):
        corpus.fetch(spec, tmp_path / "cache", download=archive.download)


def test_a_newer_version_stands_in_when_its_pages_and_questions_still_hold(tmp_path: Path) -> None:
    newer = {**PAGES, "howto/cgi.html": PAGE.format(title="CGI", text="Scripts run from /usr/lib/cgi-bin.")}
    spec, archive = fetcher(tmp_path, {"1.1": newer}, "1.1")
    fetched = corpus.fetch(spec, tmp_path / "cache", download=archive.download)
    assert (fetched.version, fetched.pinned_version, fetched.pinned) == ("1.1", "1.0", False)
    assert fetched.deb_sha256 == sha256_of(archive.debs["1.1"]) != spec.sha256
    assert deb_version(archive.debs["1.1"]) == "1.1"
    assert archive.calls == ["1.0", None], "the pinned version first, then the version apt offers now"
    assert corpus.fetch(spec, tmp_path / "cache", download=archive.download) == fetched
    assert archive.calls == ["1.0", None], "the accepted version is served from the cache"


def test_a_newer_version_with_another_page_list_is_refused_naming_the_change(tmp_path: Path) -> None:
    spec, archive = fetcher(tmp_path, {"1.1": {**PAGES, "howto/ssi.html": PAGE.format(title="SSI", text="x")}}, "1.1")
    with pytest.raises(FetchError, match=r"(?s)1\.0 is no longer downloadable.*1\.1.*new howto/ssi\.html; gone none"):
        corpus.fetch(spec, tmp_path / "cache", download=archive.download)


def test_a_newer_version_whose_page_lost_a_quoted_sentence_is_refused_naming_the_question(tmp_path: Path) -> None:
    changed = {**PAGES, "bind.html": PAGE.format(title="Binding", text="Listen sets the port; see the example.")}
    spec, archive = fetcher(tmp_path, {"1.1": changed}, "1.1")
    with pytest.raises(FetchError, match=r"(?s)a001: the quoted sentence is in none of bind.*a001: no key fact"):
        corpus.fetch(spec, tmp_path / "cache", download=archive.download)


def test_a_failed_download_that_is_not_a_dropped_version_is_not_a_reason_to_fall_back(tmp_path: Path) -> None:
    spec, archive = fetcher(tmp_path, {"1.1": PAGES}, "1.1")

    def offline(package: str, version: str | None, directory: Path) -> Path:
        archive.calls.append(version)
        raise FetchError("`apt-get download demo-doc=1.0` failed: Temporary failure resolving 'deb.debian.org'")

    with pytest.raises(FetchError, match="Temporary failure"):
        corpus.fetch(spec, tmp_path / "cache", download=offline)
    assert archive.calls == ["1.0"]
