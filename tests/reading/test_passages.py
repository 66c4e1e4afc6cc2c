from ragsvc.reading.passages import Kind, held_text, passages

ENTRY = """max_connections (integer)

Determines the maximum number of concurrent connections. The default is typically 100 connections.

The general command form to restore a dump is

```
psql dbname < dumpfile
```

| Name | Default |
| --- | --- |
| port | 5432 |
"""


def test_labels_sentences_code_and_rows_in_order() -> None:
    found = passages(ENTRY)

    assert [(p.kind, p.text) for p in found] == [
        (Kind.LABEL, "max_connections (integer)"),
        (Kind.SENTENCE, "Determines the maximum number of concurrent connections."),
        (Kind.SENTENCE, "The default is typically 100 connections."),
        (Kind.CODE, "The general command form to restore a dump is `psql dbname < dumpfile`"),
        (Kind.ROW, "Name | Default"),
        (Kind.ROW, "port | 5432"),
    ]
    assert {p.entry for p in found} == {1}
    assert found[1].block == found[2].block != found[3].block


def test_a_long_code_block_is_not_quoted() -> None:
    code = "\n".join(f"SELECT {i};" for i in range(10))
    found = passages(f"Run these:\n\n```\n{code}\n```\n\nThen check the output.")

    assert [p.text for p in found] == ["Run these:", "Then check the output."]


def test_the_chunk_borders_cut_its_first_and_last_sentences() -> None:
    found = passages("the middle of a sentence. A whole sentence here. And one the border cut")

    assert [p.cut for p in found] == [True, False, True]
    assert [held_text(p) for p in found] == [
        "… the middle of a sentence.",
        "A whole sentence here.",
        "And one the border cut …",
    ], "quoted as the chunk holds them, marked where cut"


def test_only_the_end_the_border_cuts_is_marked() -> None:
    found = passages("- of the options listed on this page and the ones below it\n- Another item of the list here.")

    assert found[0].starts_cut and not found[0].ends_cut, "a list item without a stop, not the chunk's last"
    assert held_text(found[0]) == "… of the options listed on this page and the ones below it"


def test_a_chunk_starting_after_an_opening_bracket_it_does_not_hold_starts_mid_sentence() -> None:
    found = passages("9.90) allow users to access information about the standby. (See also Section 2.) Done here.")

    assert [p.cut for p in found] == [True, False, False]
    assert held_text(found[0]) == "… 9.90) allow users to access information about the standby."


def test_a_chunk_starting_under_a_carried_label_is_judged_after_it() -> None:
    found = passages("shared_buffers (integer)\n\nmemory the server uses. The default is 128MB.")

    assert found[0].kind is Kind.LABEL and not found[0].cut
    assert found[1].cut and not found[2].cut


def test_abbreviations_do_not_end_a_sentence() -> None:
    found = passages("Use a tool, e.g. pg_dump, to copy it. Then restore it.")

    assert [p.text for p in found] == ["Use a tool, e.g. pg_dump, to copy it.", "Then restore it."]
