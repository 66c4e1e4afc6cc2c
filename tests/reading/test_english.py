"""How distinctive a word is in everyday English: the commonest words count least, rare and unknown words fully."""

from __future__ import annotations

from ragsvc.reading.english import LEAST, distinctiveness


def test_the_commonest_words_count_least_and_rare_or_unknown_words_fully() -> None:
    assert distinctiveness("the") == LEAST
    assert distinctiveness("time") == LEAST
    assert distinctiveness("pg_basebackup") == 1.0, "a word English does not use"
    assert distinctiveness("md5") == 1.0


def test_between_them_the_rarer_word_counts_more() -> None:
    assert LEAST < distinctiveness("watch") < distinctiveness("vacuum") < 1.0
