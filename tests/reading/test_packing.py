"""The chunks the reader reads among those retrieved (reading.packing): the trained reader's chunk model packs the
chunk that answers the question even when retrieval ranked it below the top_k; the rule reader, and the trained
reader without a pool, read retrieval's first top_k."""

from __future__ import annotations

import pytest

from ragsvc.domain import Chunk, ScoredChunk
from ragsvc.reading.chunks import candidates
from ragsvc.reading.features import ANSWER_FEATURES, analyse, answer_features, sentence_features
from ragsvc.reading.packing import CHUNK_FEATURES, chunk_features
from ragsvc.reading.rules import RuleReader
from ragsvc.reading.trained import Model, TrainedReader

OTHERS = [
    "Beekeepers inspect the brood frames every week during the spring flow.",
    "A smoker calms the colony before the hive is opened.",
    "Honey supers are added when the brood box is nearly full.",
    "The queen excluder keeps the queen out of the honey supers.",
    "Varroa mites are counted with a sugar roll on a sample of bees.",
    "Frames are spaced so that bees can pass between the combs.",
]
ANSWER = "The Langstroth hive was patented by Lorenzo Langstroth in 1852, with frames hanging a bee space apart."
QUESTION = "When was the Langstroth hive patented?"


def pool() -> list[ScoredChunk]:
    """Six chunks about other things, ranked first by retrieval, then the one that answers."""
    texts = [*OTHERS, ANSWER]
    return [
        ScoredChunk(Chunk(f"doc-{i}", 0, text, section="Hives", page_title="Beekeeping"), 0.62 - 0.01 * i)
        for i, text in enumerate(texts)
    ]


def test_a_chunk_is_read_from_its_candidates_rows() -> None:
    evidence = [*pool(), ScoredChunk(Chunk("empty", 0, "```\n$ ls\n```"), 0.3)]
    analysis = analyse(QUESTION, QUESTION, None)
    found = tuple(candidates(evidence))
    table = chunk_features(found, sentence_features(analysis, found, evidence), evidence)
    column = {name: i for i, name in enumerate(CHUNK_FEATURES)}
    assert [len(row) for row in table] == [len(CHUNK_FEATURES)] * len(evidence)
    assert [row[column["rank"]] for row in table] == list(range(len(evidence)))
    answering, unrelated, empty = table[len(OTHERS)], table[0], table[-1]
    assert answering[column["best_cov_sentence"]] > unrelated[column["best_cov_sentence"]]
    assert empty[column["candidates"]] == 0.0 and empty[column["missing_chunk"]] == 1.0


def test_the_trained_reader_packs_the_answering_chunk_from_below_the_top_k() -> None:
    reader = TrainedReader(Model.load(), rare_share=0.002, pool=12)
    analysis = reader.analyse(QUESTION, QUESTION, None)
    packed = reader.pack(analysis, pool(), limit=5)
    assert len(packed) == 5 and len(set(packed)) == 5
    assert packed[0].chunk.text == ANSWER
    assert "1852" in reader.quotes(analysis, packed, limit=3)[0].text


def test_the_answer_reads_how_sure_the_chunk_model_was_of_what_it_packed() -> None:
    """P(right) reads the chunk model's scores and the places in retrieval's order of the chunks it packed (kept from
    `pack`); evidence it did not pack is read in its own order, by the same features."""
    reader = TrainedReader(Model.load(), rare_share=0.002, pool=12)
    analysis = reader.analyse(QUESTION, QUESTION, None)
    packed = reader.pack(analysis, pool(), limit=5)
    packing = reader.packing(analysis, packed, reader.read(analysis, packed))
    assert packing.places[0] == len(OTHERS)  # the answering chunk, promoted from below retrieval's first five
    assert list(packing.scores) == sorted(packing.scores, reverse=True)
    own = reader.packing(analysis, tuple(pool()[:5]), reader.read(analysis, tuple(pool()[:5])))
    assert own.places == (0, 1, 2, 3, 4)
    # Another question over the same five chunks was not packed by this reader: it reads them in their own order.
    other = reader.analyse("Where do honey bees store pollen?", "Where do honey bees store pollen?", None)
    assert reader.packing(other, packed, reader.read(other, packed)).places == (0, 1, 2, 3, 4)
    column = {name: i for i, name in enumerate(ANSWER_FEATURES)}
    read = reader.read(analysis, packed)
    row = answer_features(analysis, read.found, read.rows, read.scores, read.chosen[0], packed, packing, read.chosen)
    assert row[column["pack_promoted"]] == 1.0 and row[column["pack_agrees"]] == 0.0
    assert row[column["pack_lead_place"]] == float(len(OTHERS)) and row[column["pack_lead_promoted"]] == 1.0
    assert row[column["pack_gap"]] == packing.scores[0] - packing.scores[1]


@pytest.mark.parametrize("limit", [1, 5, 12])
@pytest.mark.parametrize("which", ["rules", "trained without a pool"])
def test_without_a_pool_the_reader_reads_retrievals_first_chunks(limit: int, which: str) -> None:
    """The rule reader has no chunk model; RAG_READER_POOL=0 turns the trained reader's off."""
    reader: RuleReader | TrainedReader = (
        RuleReader(min_coverage=0.5, rare_share=0.002)
        if which == "rules"
        else TrainedReader(Model.load(), rare_share=0.002, pool=0)
    )
    evidence = pool()
    assert reader.pool == 0
    assert reader.pack(reader.analyse(QUESTION, QUESTION, None), evidence, limit=limit) == tuple(evidence[:limit])
