"""HTML ingestion through the real loader (selectolax/lexbor): headings make sections, page chrome is dropped,
the title comes from <title> or the first <h1>; and an HTML document ingested over IndexService is answerable."""

from __future__ import annotations

from pathlib import Path

from ragsvc.domain import SourceDocument
from ragsvc.ingest.chunker import chunk_sections
from ragsvc.ingest.html import html_title
from ragsvc.ingest.limits import DocumentLimits
from ragsvc.ingest.loaders import source_documents_from_paths
from ragsvc.ingest.sections import Section
from ragsvc.sanitize import validate_documents
from ragsvc.source_trust import SourceTrust
from ragsvc.v1 import index_service_pb2 as index_pb
from ragsvc.v1 import index_service_pb2_grpc, rag_service_pb2_grpc
from ragsvc.v1 import rag_service_pb2 as pb
from tests.ingest.reading import loaded, sections_of
from tests.server.conftest import running_server

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Travel Policy | Acme Handbook</title>
  <style>body { color: red; } .secret { display: none }</style>
  <script>var tracking = "do not index this script";</script>
</head>
<body>
  <header class="site"><a href="/">Acme</a> <span>Home | Handbook | Contact</span></header>
  <nav><ul><li><a href="/a">Previous page</a></li><li><a href="/b">Next page</a></li></ul></nav>
  <div class="breadcrumb">Handbook &gt; Policies &gt; Travel</div>
  <main>
    <article>
      <header><h1>Travel <em>Policy</em></h1></header>
      <p>This policy applies to   every
         employee.</p>
      <h2 id="booking">Booking flights</h2>
      <p>Book flights through the <a href="/desk">travel desk</a> at least <strong>fourteen days</strong>
         before departure.<br>Economy class is the default.</p>
      <ul><li>Use the approved agency.</li><li><p>Keep the receipt.</p></li></ul>
      <h2>Hotels</h2>
      <table>
        <caption>Nightly limits</caption>
        <thead><tr><th>City</th><th>Limit</th></tr></thead>
        <tbody><tr><td>Paris</td><td>180 euros</td></tr><tr><td>Berlin</td><td><p>150 euros</p></td></tr></tbody>
      </table>
      <pre>expense-tool submit --receipt  hotel.pdf
  --city Paris</pre>
      <dl><dt>Per diem</dt><dd>Meals are covered up to 40 euros a day.</dd></dl>
      <div hidden>Hidden text is not content.</div>
      <footer><p>Owner: the finance team.</p></footer>
    </article>
  </main>
  <aside role="navigation"><a href="/x">Related pages</a></aside>
  <footer><p>Copyright 2024 Acme. All rights reserved.</p></footer>
  <noscript>Enable JavaScript</noscript>
</body>
</html>
"""


def html(text: str | bytes, media_type: str = "text/html") -> SourceDocument:
    content = text.encode() if isinstance(text, str) else text
    return SourceDocument("page", "page.html", content, media_type=media_type)


def test_headings_make_sections_in_markdown_shape() -> None:
    assert sections_of(html(PAGE)) == [
        Section("This policy applies to every employee.", "Travel Policy"),
        Section(
            "Book flights through the travel desk at least fourteen days before departure.\n\n"
            "Economy class is the default.\n\n- Use the approved agency.\n- Keep the receipt.",
            "Booking flights",
        ),
        Section(
            "Nightly limits\n\n| City | Limit |\n| Paris | 180 euros |\n| Berlin | 150 euros |\n\n"
            "```\nexpense-tool submit --receipt  hotel.pdf\n  --city Paris\n```\n\n"
            "Per diem\n\nMeals are covered up to 40 euros a day.\n\nOwner: the finance team.",
            "Hotels",
        ),
    ]


def test_navigation_scripts_styles_and_page_chrome_are_dropped() -> None:
    text = "\n".join(f"{s.heading} {s.text}" for s in sections_of(html(PAGE)))

    for chrome in (
        "tracking",
        "color: red",
        "Previous page",
        "Handbook >",
        "Home | Handbook",
        "Related pages",
        "Copyright 2024",
        "Enable JavaScript",
        "Hidden text",
    ):
        assert chrome not in text, chrome
    assert "Owner: the finance team." in text, "an article's own footer is content"


def test_docbook_navigation_and_table_of_contents_are_dropped() -> None:
    page = (
        "<html><head><title>20.3. Connections</title></head><body>"
        '<div class="navheader"><table><tr><th>20.3. Connections</th></tr><tr><td><a href="p.html">Prev</a></td>'
        '<td><a href="n.html">Next</a></td></tr></table></div>'
        '<div class="sect1"><h2 class="title">20.3. Connections</h2>'
        '<div class="toc"><dl><dt><a href="#s">20.3.1. Connection Settings</a></dt></dl></div>'
        '<div class="sect2"><h3 class="title">20.3.1. Connection Settings</h3>'
        '<dl class="variablelist"><dt><code>port</code> (<code>integer</code>)</dt>'
        "<dd><p>The TCP port the server listens on; 5432 by default.</p></dd></dl></div></div>"
        '<div class="navfooter"><table><tr><td>Prev</td><td>Home</td></tr></table></div></body></html>'
    )

    assert sections_of(html(page)) == [
        Section("port (integer)\n\nThe TCP port the server listens on; 5432 by default.", "20.3.1. Connection Settings")
    ]


def test_sidebars_are_the_pages_text_and_publican_navigation_is_chrome() -> None:
    """DocBook's and Sphinx's sidebars are boxes of the page's own text (a tip, an aside); Publican's docnav lists
    are navigation."""
    page = (
        '<html><body><ul class="docnav"><li><a href="p.html">Prev</a></li><li><a href="n.html">Next</a></li></ul>'
        "<h2>Networking</h2><p>Configure the interface in /etc/network/interfaces.</p>"
        '<div class="sidebar"><div class="title">TIP Renaming interfaces</div><p>Use udev rules to name it.</p></div>'
        '<aside class="sidebar"><p>See also the ip command.</p></aside></body></html>'
    )

    [section] = sections_of(html(page))
    assert "Use udev rules to name it." in section.text and "See also the ip command." in section.text
    assert "Prev" not in section.text and "Next" not in section.text


def test_the_title_is_the_title_element_else_the_first_h1_outside_the_chrome() -> None:
    assert html_title(PAGE.encode()) == "Travel Policy | Acme Handbook"
    no_title = "<body><header><h1>Site name</h1></header><main><h1>Install  <b>guide</b></h1><p>x</p></main></body>"
    assert html_title(no_title.encode()) == "Install guide"
    assert html_title(b"<p>No heading at all</p>") is None


def test_a_fragment_without_headings_is_one_untitled_section() -> None:
    assert sections_of(html("Just <b>some</b> text,<p>then a paragraph.</p>")) == [
        Section("Just some text,\n\nthen a paragraph.", None)
    ]
    assert sections_of(html("<html><body><nav>Only navigation</nav><script>x()</script></body></html>")) == []


def test_declared_charsets_are_honoured_and_undeclared_non_utf8_is_detected() -> None:
    latin = '<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head><body><p>Cr\xe8me br\xfbl\xe9e.</p>'
    assert sections_of(html(latin.encode("latin-1"))) == [Section("Crème brûlée.", None)]
    assert html_title(latin.encode("latin-1")) == "Café"
    old = b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1252"><p>\x93quoted\x94</p>'
    assert sections_of(html(old))[0].text == "\u201cquoted\u201d"
    assert sections_of(html(b"<p>Cr\xe8me br\xfbl\xe9e, \xff</p>")) == [Section("Crème brûlée, ÿ", None)]
    assert sections_of(html("<p>x</p>", media_type="text/html; charset=utf-8")) == [Section("x", None)]


def test_deeply_nested_markup_does_not_exhaust_the_stack() -> None:
    page = "<div>" * 5000 + "<h2>Deep</h2><p>Still read.</p>" + "</div>" * 5000
    deep = loaded(html(page), DocumentLimits(html_depth=5001))
    assert deep.sections == [Section("Still read.", "Deep")]


def test_html_sections_chunk_like_markdown_sections() -> None:
    long_page = "<h1>Guide</h1>" + "".join(f"<p>Sentence number {i} of the guide.</p>" for i in range(200))

    chunks = list(chunk_sections(sections_of(html(long_page)), chunk_tokens=60, overlap_tokens=10))

    assert len(chunks) > 5 and {c.heading for c in chunks} == {"Guide"}
    assert all(c.text.strip() for c in chunks)


def test_html_files_are_picked_up_from_paths_with_their_titles(tmp_path: Path) -> None:
    (tmp_path / "travel.html").write_text(PAGE)
    (tmp_path / "legacy.htm").write_text("<h1>Legacy page</h1><p>Old.</p>")
    (tmp_path / "notes.md").write_text("# Notes\nText")

    documents = source_documents_from_paths([tmp_path], tenant_id="acme")

    assert [(d.document_id, d.media_type, d.title) for d in documents] == [
        ("legacy", "text/html", "Legacy page"),
        ("notes", "text/markdown", "Notes"),
        ("travel", "text/html", "Travel Policy | Acme Handbook"),
    ]
    validate_documents(documents, SourceTrust.default())  # text/html is an accepted media type of an ingest request


async def test_an_html_document_ingested_over_grpc_is_answerable_with_its_section(tmp_path: Path) -> None:
    import grpc

    async with running_server(tmp_path / "data", demo_corpus=False) as server:
        async with grpc.aio.insecure_channel(server.address) as channel:
            index = index_service_pb2_grpc.IndexServiceStub(channel)
            rag = rag_service_pb2_grpc.RagServiceStub(channel)
            document = index_pb.Document(document_id="travel", name="travel.html", content=PAGE.encode(), media_type="text/html")
            response = await index.IngestDocuments(
                index_pb.IngestDocumentsRequest(tenant_id="acme", documents=[document]), timeout=60
            )
            [result] = response.results
            assert not result.error and result.chunks_indexed == 3, "one chunk per section"

            question = pb.AskRequest(query="How many days before departure must flights be booked?", tenant_id="acme")
            answer = (await rag.Ask(question, timeout=30)).answer

    assert answer.grounded and "fourteen days" in answer.text
    assert answer.citations[0].document_id == "travel"
    assert answer.citations[0].section == "Booking flights"
    assert "tracking" not in answer.citations[0].text and "Previous page" not in answer.citations[0].text
