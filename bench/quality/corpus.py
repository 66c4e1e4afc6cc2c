"""The benchmark's corpora: public documentation from Debian packages, one registry entry each, and how they are
fetched.

Every corpus lives in bench/quality/corpora/<name>/: pages.txt (the pages its subset rule selects, committed),
questions.jsonl and planted/*.html (pages written for the benchmark, each carrying a prompt injection, ingested
with the corpus). `fetch()` gets the package with Debian's own client (`apt-get download`, nothing installed),
checks the .deb's sha256, unpacks it with `dpkg-deb -x` into the gitignored cache
(.bench/quality-corpus/<package>/<version>/) and recomputes the subset, failing when it differs from pages.txt.

Version tolerance: Debian drops a package's old version at a point release. When the pinned version is no longer
downloadable, `fetch()` takes the version apt offers now and accepts it only when the subset rule still selects
exactly pages.txt and every question still checks against the new pages (its quote in its page, a key fact in an
expected page: `questions.check`); otherwise it fails saying what changed. `Fetched` says which version served.

Document ids: `slugify(path without ".html")` ("library/bz2.html" -> "library-bz2"); a planted page's id is the
slug of its file stem.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench.quality import questions
from bench.quality.debian import FetchError, VersionGone, deb_version, sha256_of, unpack
from bench.quality.debian import download as apt_download
from bench.quality.subsets import Directories, Named, SubsetRule, Toctree, UpLinks
from ragsvc.ingest.html import html_sections, html_title
from ragsvc.ingest.limits import DocumentLimits
from ragsvc.ingest.loaders import slugify

__all__ = [
    "CACHE",
    "CORPORA",
    "ROOT",
    "Corpus",
    "Download",
    "FetchError",
    "Fetched",
    "Page",
    "acceptance_problems",
    "corpus_hash",
    "fetch",
    "get",
    "load_pages",
    "page_texts",
    "shown",
]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CORPORA_DIR = HERE / "corpora"
CACHE = Path(os.environ.get("EVAL_CACHE_DIR", ROOT / ".bench" / "quality-corpus"))
MARKER = ".fetched.json"  # in a cached version's directory: {version, sha256, replaces (the pin it stands in for)}

# (package, version or None for the version apt offers now, directory) -> the downloaded .deb; raises VersionGone
# when apt no longer has that version.
Download = Callable[[str, str | None, Path], Path]


@dataclass(frozen=True, slots=True)
class Corpus:
    """One corpus: its tenant, the pinned Debian package, where its pages are inside the package, which pages,
    where they are published, and their license."""

    name: str
    tenant: str
    package: str
    version: str  # pinned
    sha256: str  # of the pinned .deb
    doc_root: str  # the documentation's directory inside the package
    subset: SubsetRule
    url_template: str  # a page's public address; {path} is its path under doc_root
    license: str
    corpora_dir: Path = CORPORA_DIR  # where its directory (pages.txt, questions, planted pages) is

    @property
    def directory(self) -> Path:
        return self.corpora_dir / self.name

    @property
    def pages_file(self) -> Path:
        return self.directory / "pages.txt"

    @property
    def questions_file(self) -> Path:
        return self.directory / "questions.jsonl"

    @property
    def planted_dir(self) -> Path:
        return self.directory / "planted"

    @property
    def slice_file(self) -> Path:
        """Question ids of the corpus's regression slice (only pgdocs has one)."""
        return self.directory / "slice.txt"

    def committed_pages(self) -> list[str]:
        return [line.strip() for line in self.pages_file.read_text().splitlines() if line.strip()]

    def source_url(self, path: str) -> str:
        return self.url_template.format(path=path)


CORPORA: dict[str, Corpus] = {
    c.name: c
    for c in (
        Corpus(
            name="pgdocs",
            tenant="pgdocs",
            package="postgresql-doc-15",
            version="15.18-0+deb12u1",
            sha256="3c598277a463c44d672daa2c335deb8d8252e1852fb025fd4578ea2d9a1b90f0",
            doc_root="usr/share/doc/postgresql-doc-15/html",
            subset=UpLinks(roots=("tutorial.html", "admin.html")),  # Part I (Tutorial), Part III (Server Administration)
            url_template="https://www.postgresql.org/docs/15/{path}",
            license="PostgreSQL License (legalnotice.html in the package; Debian's copyright file beside the pages)",
        ),
        Corpus(
            name="pydocs",
            tenant="pydocs",
            package="python3.11-doc",
            version="3.11.2-6+deb12u8",
            sha256="50eb63e7f636c4281e9ce1b8f10386f1def42159eddce34fc1f41c46261df71b",
            doc_root="usr/share/doc/python3.11/html",
            subset=Toctree(
                chapters=tuple(
                    f"library/{chapter}.html"
                    for chapter in ("text", "functional", "filesys", "persistence", "archiving", "fileformats", "crypto")
                )
            ),
            url_template="https://docs.python.org/3.11/{path}",
            license="PSF License Agreement (Debian's copyright file, usr/share/doc/python3.11-doc/copyright)",
        ),
        Corpus(
            name="httpd",
            tenant="httpd",
            package="apache2-doc",
            version="2.4.68-1~deb12u1",
            sha256="cee8fe80ffb5de2744cd690c3d795b489e43a1c44c4e3a634c521642f22d7835",
            doc_root="usr/share/doc/apache2-doc/manual/en",
            subset=Directories(
                directories=("", "howto", "ssl", "vhosts", "rewrite", "programs", "misc"),
                excluded=("index.html", "sitemap.html"),
                language="en",
            ),
            url_template="https://httpd.apache.org/docs/2.4/{path}",
            license="Apache License 2.0 (Debian's copyright file, usr/share/doc/apache2-doc/copyright)",
        ),
        Corpus(
            name="handbook",
            tenant="handbook",
            package="debian-handbook",
            version="11.20220922",
            sha256="3d5dbeac1f1afc9c094eab9d0f701f6ecff99c4927d5a4794cf6c85678134faa",
            doc_root="usr/share/doc/debian-handbook/html/en-US",
            subset=Directories(directories=("",), excluded=("index.html",)),
            url_template="https://debian-handbook.info/browse/stable/{path}",
            license="GPL-2+ or CC-BY-SA 3.0 (Debian's copyright file, usr/share/doc/debian-handbook/copyright)",
        ),
        Corpus(
            name="sqlite",
            tenant="sqlite",
            package="sqlite3-doc",
            version="3.40.1-2+deb12u2",
            sha256="466e30d7066e2641fa13e56bc662a2ad521b8cc9c17dde9c9dac3d4f105e32f2",
            doc_root="usr/share/doc/sqlite3",
            subset=Named(
                patterns=(
                    "lang_*.html",
                    *(
                        f"{page}.html"
                        for page in (
                            "datatype3",
                            "pragma",
                            "cli",
                            "faq",
                            "wal",
                            "limits",
                            "autoinc",
                            "foreignkeys",
                            "partialindex",
                            "quirks",
                            "whentouse",
                            "json1",
                            "lockingv3",
                            "queryplanner",
                            "windowfunctions",
                        )
                    ),
                ),
                why="the SQL language pages and the pages application developers read most",
            ),
            url_template="https://www.sqlite.org/{path}",
            license="public domain (Debian's copyright file, usr/share/doc/sqlite3-doc/copyright)",
        ),
        Corpus(
            name="gitdocs",
            tenant="gitdocs",
            package="git-doc",
            version="1:2.39.5-0+deb12u3",
            sha256="3c89668a11053a6bafade3de1f611f4613db31e082af63f43d8c5b69ad8795ec",
            doc_root="usr/share/doc/git-doc",
            subset=Named(
                patterns=(
                    *(
                        f"git-{command}.html"
                        for command in (
                            "add am archive bisect branch bundle checkout cherry-pick clean clone commit describe diff fetch "
                            "format-patch gc grep init log maintenance merge mv notes pull push range-diff rebase reset "
                            "restore revert rm shortlog show sparse-checkout stash status submodule switch tag worktree"
                        ).split()
                    ),
                    "gittutorial.html",
                    "giteveryday.html",
                    "gitglossary.html",
                    "gitignore.html",
                ),
                why="git(1)'s main porcelain commands, less its two GUIs, and the tutorial, everyday, glossary and "
                "gitignore guides",
            ),
            url_template="https://git-scm.com/docs/{path}",
            license="GPL-2 (Debian's copyright file, usr/share/doc/git-doc/copyright)",
        ),
        Corpus(
            name="djangodocs",
            tenant="djangodocs",
            package="python-django-doc",
            version="3:3.2.25-0+deb12u3",
            sha256="33319c8e45b95693603213442ccf9bcee933ef338488115203ad25a0e01c696f",
            doc_root="usr/share/doc/python-django-doc/html",
            subset=Named(
                patterns=(
                    *(
                        f"topics/{page}.html"
                        for page in (
                            "db/models db/queries db/transactions db/optimization http/urls http/sessions "
                            "http/middleware http/file-uploads auth/passwords cache forms/modelforms migrations email "
                            "security signals i18n/timezones testing/overview async pagination signing"
                        ).split()
                    ),
                    *(
                        f"howto/{page}.html"
                        for page in (
                            "deployment/checklist static-files/index static-files/deployment custom-management-commands "
                            "writing-migrations outputting-csv error-reporting initial-data legacy-databases "
                            "upgrade-version deployment/wsgi/gunicorn deployment/wsgi/modwsgi auth-remote-user windows "
                            "overriding-templates"
                        ).split()
                    ),
                    *(
                        f"ref/{page}.html"
                        for page in (
                            "databases middleware csrf exceptions paginator validators models/options "
                            "models/constraints models/indexes contrib/messages contrib/humanize clickjacking signals "
                            "urls contrib/staticfiles migration-operations models/conditional-expressions"
                        ).split()
                    ),
                    *(f"faq/{page}.html" for page in ("general", "models", "admin", "usage", "troubleshooting")),
                    "intro/tutorial01.html",
                    "misc/design-philosophies.html",
                    "releases/3.2.html",
                ),
                why="Django 3.2's topic guides on models, queries, HTTP, auth, caching, forms, migrations and testing, "
                "a set of how-tos and reference pages, five FAQ pages, the first tutorial, the design philosophies and "
                "the 3.2 release notes",
            ),
            url_template="https://docs.djangoproject.com/en/3.2/{path}",
            license="BSD-3-clause (Debian's copyright file, usr/share/doc/python-django-doc/copyright)",
        ),
        Corpus(
            name="postfix",
            tenant="postfix",
            package="postfix-doc",
            version="3.7.11-0+deb12u1",
            sha256="6b07bcc68991703acf747dc2500355bdd02aef0a048419b939752c39faf47d8d",
            doc_root="usr/share/doc/postfix/html",
            subset=Named(
                patterns=(
                    *(
                        f"{topic}_README.html"
                        for topic in (
                            "ADDRESS_CLASS ADDRESS_REWRITING ADDRESS_VERIFICATION BACKSCATTER BASIC_CONFIGURATION BDAT "
                            "BUILTIN_FILTER CDB COMPATIBILITY CONNECTION_CACHE CONTENT_INSPECTION DATABASE DEBUG DSN ETRN "
                            "FILTER IPV6 LDAP LMDB LOCAL_RECIPIENT MAILLOG MILTER MYSQL PGSQL POSTSCREEN RESTRICTION_CLASS "
                            "SASL SMTPD_ACCESS SMTPD_POLICY SMTPUTF8 SOHO SQLITE STANDARD_CONFIGURATION STRESS TLS TUNING "
                            "VERP VIRTUAL"
                        ).split()
                    ),
                    "OVERVIEW.html",
                    *(
                        f"{page}.html"
                        for page in (
                            "postqueue.1 postsuper.1 postmap.1 aliases.5 access.5 transport.5 virtual.5 header_checks.5"
                        ).split()
                    ),
                ),
                why="the howto READMEs a mail administrator configures Postfix from (less the legacy TLS and postscreen "
                "3.5 versions, the scheduler's internals, multi-instance, building and porting), the architecture "
                "overview, and the man pages of the queue tools and the lookup tables they edit; postconf(5), one page "
                "of 600,000 characters (most of a corpus), is left out",
            ),
            url_template="https://www.postfix.org/{path}",
            license="IBM Public License 1.0 or Eclipse Public License 2.0 (Debian's copyright file, "
            "usr/share/doc/postfix-doc/copyright)",
        ),
        Corpus(
            name="borgdocs",
            tenant="borgdocs",
            package="borgbackup-doc",
            version="1.2.4-1",
            sha256="f7c621fde76d460f071e8c0803d62198101f1c86ef3430db158f2e789570dbda",
            doc_root="usr/share/doc/borgbackup/html",
            subset=Named(
                patterns=(
                    "usage/*.html",
                    "deployment/*.html",
                    "internals/*.html",
                    *(f"{page}.html" for page in "installation quickstart introduction faq support paperkey changes".split()),
                ),
                why="BorgBackup 1.2's usage pages (one per command, the general notes and the pattern help), the "
                "deployment guides, the internals (data structures, security, the JSON front-end API), installation, "
                "quickstart, introduction, FAQ, support and paper key pages, and the change log; the table-of-contents "
                "pages, the borg(1) man page (the general usage page again), authors and development are left out",
            ),
            url_template="https://borgbackup.readthedocs.io/en/1.2.4/{path}",
            license="BSD-3-clause (Debian's copyright file, usr/share/doc/borgbackup-doc/copyright)",
        ),
        Corpus(
            name="zshdocs",
            tenant="zshdocs",
            package="zsh-doc",
            version="5.9-4",
            sha256="79bd75df4bf03d1021e993fd773f82b8a4c8d76649e420cd32eca940cf418ff4",
            doc_root="usr/share/doc/zsh-common/html",
            subset=Named(
                patterns=(
                    *(
                        f"{chapter}.html"
                        for chapter in (
                            "Introduction Roadmap Invocation Files Shell-Grammar Redirection Command-Execution Functions "
                            "Jobs-_0026-Signals Arithmetic-Evaluation Conditional-Expressions Prompt-Expansion Expansion "
                            "Parameters Options Shell-Builtin-Commands Zsh-Line-Editor Completion-Widgets Completion-System"
                        ).split()
                    ),
                    *(f"FAQ0{part}.html" for part in (1, 2, 3)),
                ),
                why="the Z shell manual's chapters from the introduction through the completion system (grammar, "
                "redirection, functions, jobs, arithmetic, conditions, prompts, expansion, parameters, options, "
                "builtins, the line editor, completion widgets and the completion system) and the first three parts "
                "of the FAQ; the HTML manual is one page per chapter (its many small section pages only redirect to "
                "an anchor in a chapter), and the modules, compctl and user-contributions chapters are left out for size",
            ),
            url_template="https://zsh.sourceforge.io/Doc/Release/{path}",
            license="the zsh license, MIT-like (the permission notice in index.html; Debian's copyright file is in "
            "zsh-common, usr/share/doc/zsh-common/copyright)",
        ),
    )
}


def shown(path: Path) -> str:
    """`path` relative to the repository when it is inside it (for messages and results)."""
    path = path.resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def get(name: str) -> Corpus:
    try:
        return CORPORA[name]
    except KeyError:
        raise SystemExit(f"no corpus named {name!r}; the corpora are {', '.join(CORPORA)}") from None


@dataclass(frozen=True, slots=True)
class Page:
    document_id: str
    name: str  # the path under the documentation root (a planted page: its file name)
    title: str
    content: bytes
    planted: bool = False
    source_url: str = ""


@dataclass(frozen=True, slots=True)
class Fetched:
    """The unpacked documentation root of the version that serves, and which version that is."""

    html_dir: Path
    version: str
    deb_sha256: str
    pinned_version: str

    @property
    def pinned(self) -> bool:
        return self.version == self.pinned_version


def load_pages(corpus: Corpus, html_dir: Path, names: list[str] | None = None, *, planted: bool = True) -> list[Page]:
    """The corpus pages (all of pages.txt, or `names`) and then its planted pages, in a fixed order."""
    pages = []
    for name in names if names is not None else corpus.committed_pages():
        content = (html_dir / name).read_bytes()
        stem = name.rsplit(".", 1)[0]
        pages.append(Page(slugify(stem), name, html_title(content) or stem, content, source_url=corpus.source_url(name)))
    if planted:
        for path in sorted(corpus.planted_dir.glob("*.html")):
            content = path.read_bytes()
            document_id = slugify(path.stem)
            pages.append(Page(document_id, path.name, html_title(content) or document_id, content, planted=True))
    return pages


def page_texts(pages: list[Page]) -> dict[str, str]:
    """Each page's text as ragsvc's HTML loader reads it (headings and section texts), by document id."""
    return {
        p.document_id: "\n".join(f"{s.heading or ''}\n{s.text}" for s in html_sections(p.content, DocumentLimits()).sections)
        for p in pages
    }


def corpus_hash(pages: list[Page]) -> str:
    """sha256 over every page's id and bytes, in order: names the exact documents ingested."""
    digest = hashlib.sha256()
    for page in pages:
        digest.update(page.document_id.encode() + b"\0" + hashlib.sha256(page.content).digest())
    return digest.hexdigest()


def acceptance_problems(corpus: Corpus, html_dir: Path) -> list[str]:
    """Why the pages under `html_dir` cannot stand in for the pinned version's (empty when they can): the subset
    rule must select exactly pages.txt, and every question must still check against them."""
    selected, committed = corpus.subset.select(html_dir), corpus.committed_pages()
    if selected != committed:
        added = sorted(set(selected) - set(committed))
        removed = sorted(set(committed) - set(selected))
        return [
            f"the subset rule selects {len(selected)} pages, {corpus.pages_file.name} lists {len(committed)}: "
            f"new {', '.join(added) or 'none'}; gone {', '.join(removed) or 'none'}"
        ]
    if not corpus.questions_file.exists():
        return []
    texts = page_texts(load_pages(corpus, html_dir))
    return questions.check(questions.load(corpus.questions_file), texts)


def fetch(corpus: Corpus, cache: Path = CACHE, *, download: Download = apt_download) -> Fetched:
    """The unpacked documentation of the pinned version (downloaded, sha256 and subset checked, on first use); when
    Debian no longer has it, of the version apt offers now, if `acceptance_problems` finds none."""
    packages = cache / corpus.package
    pinned = packages / corpus.version
    if _marked(pinned) == {"version": corpus.version, "sha256": corpus.sha256, "replaces": None}:
        return Fetched(pinned / corpus.doc_root, corpus.version, corpus.sha256, corpus.version)
    for marker in sorted(packages.glob(f"*/{MARKER}")):  # a newer version accepted earlier in the pin's place
        info = json.loads(marker.read_text())
        if info.get("replaces") == corpus.version and not acceptance_problems(corpus, marker.parent / corpus.doc_root):
            return Fetched(marker.parent / corpus.doc_root, info["version"], info["sha256"], corpus.version)
    packages.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=packages) as scratch:
        try:
            deb = download(corpus.package, corpus.version, Path(scratch) / "pinned")
        except VersionGone as gone:
            print(
                f"{gone}\n{corpus.package} {corpus.version} is no longer downloadable; trying the version apt offers now",
                flush=True,
            )
            deb = download(corpus.package, None, Path(scratch) / "current")
            return _accept_newer(corpus, deb, packages, Path(scratch), gone)
        digest = sha256_of(deb)
        if digest != corpus.sha256:
            raise FetchError(f"{deb.name}: sha256 {digest}, expected {corpus.sha256}; refusing to use it")
        html_dir = _unpacked(corpus, deb, pinned, Path(scratch))
        selected, committed = corpus.subset.select(html_dir), corpus.committed_pages()
        if selected != committed:
            raise FetchError(
                f"{corpus.name}: the subset rule selects {len(selected)} pages, {corpus.pages_file} lists "
                f"{len(committed)}: the package or the rule changed"
            )
        _mark(pinned, corpus.version, digest, None)
        return Fetched(html_dir, corpus.version, digest, corpus.version)


def _accept_newer(corpus: Corpus, deb: Path, packages: Path, scratch: Path, gone: VersionGone) -> Fetched:
    version, digest = deb_version(deb), sha256_of(deb)
    if version == corpus.version and digest != corpus.sha256:
        raise FetchError(f"{deb.name}: sha256 {digest}, expected {corpus.sha256}; refusing to use it")
    html_dir = _unpacked(corpus, deb, packages / version, scratch)
    problems = acceptance_problems(corpus, html_dir)
    if problems:
        listed = "\n  ".join(problems[:20]) + (f"\n  ... {len(problems) - 20} more" if len(problems) > 20 else "")
        raise FetchError(
            f"{corpus.name}: the pinned {corpus.package} {corpus.version} is no longer downloadable ({gone}), and "
            f"{version}, the version apt offers now, changed what the benchmark relies on:\n  {listed}\n"
            f"Read the changes, then pin the new version and its sha256 in bench/quality/corpus.py and bring "
            f"{shown(corpus.directory)}/ (pages.txt, questions) in line with it."
        )
    _mark(packages / version, version, digest, corpus.version)
    print(f"{corpus.name}: using {corpus.package} {version} (sha256 {digest}) in place of {corpus.version}", flush=True)
    return Fetched(html_dir, version, digest, corpus.version)


def _unpacked(corpus: Corpus, deb: Path, target: Path, scratch: Path) -> Path:
    """`deb` unpacked into `target` (replacing what was there); its documentation root."""
    unpacked = scratch / f"x-{target.name}"
    unpack(deb, unpacked)
    if not (unpacked / corpus.doc_root).is_dir():
        raise FetchError(f"{deb.name} has no {corpus.doc_root}/")
    if target.exists():
        shutil.rmtree(target)
    shutil.move(str(unpacked), target)
    return target / corpus.doc_root


def _marked(directory: Path) -> dict[str, str | None] | None:
    marker = directory / MARKER
    return json.loads(marker.read_text()) if marker.exists() else None


def _mark(directory: Path, version: str, digest: str, replaces: str | None) -> None:
    (directory / MARKER).write_text(json.dumps({"version": version, "sha256": digest, "replaces": replaces}) + "\n")


if __name__ == "__main__":
    for spec in CORPORA.values():
        fetched = fetch(spec)
        loaded = load_pages(spec, fetched.html_dir)
        print(
            f"{spec.name}: {spec.package} {fetched.version} at {fetched.html_dir}; {len(spec.committed_pages())} "
            f"pages, corpus hash {corpus_hash(loaded)}"
        )
