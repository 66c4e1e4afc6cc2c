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
    packed = reader.pack(analysis, pool(), limit=5, per_document=3)
    assert len(packed) == 5 and len(set(packed)) == 5
    assert packed[0].chunk.text == ANSWER
    assert "1852" in reader.quotes(analysis, packed, limit=3)[0].text


def test_the_answer_reads_how_sure_the_chunk_model_was_of_what_it_packed() -> None:
    """P(right) reads the chunk model's scores and the places in retrieval's order of the chunks it packed (kept from
    `pack`); evidence it did not pack is read in its own order, by the same features."""
    reader = TrainedReader(Model.load(), rare_share=0.002, pool=12)
    analysis = reader.analyse(QUESTION, QUESTION, None)
    packed = reader.pack(analysis, pool(), limit=5, per_document=3)
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
    analysis = reader.analyse(QUESTION, QUESTION, None)
    assert reader.pack(analysis, evidence, limit=limit, per_document=3) == tuple(evidence[:limit])


def test_the_packed_evidence_holds_at_most_the_cap_of_one_document_while_the_pool_holds_more() -> None:
    """The pool is retrieved without RAG_MAX_CHUNKS_PER_DOC (answering.retrieve.reader_query): the chunk model
    chooses among every chunk of the answering page, and packs at most the cap of them."""
    page = [ScoredChunk(Chunk("hives", i, text, section="Hives", page_title="Beekeeping"), 0.7 - 0.01 * i)
            for i, text in enumerate([ANSWER, *OTHERS[:4]])]  # fmt: skip
    others = [ScoredChunk(Chunk(f"doc-{i}", 0, text), 0.5 - 0.01 * i) for i, text in enumerate(OTHERS[4:])]
    evidence = [*page, *others]
    reader = TrainedReader(Model.load(), rare_share=0.002, pool=8)
    analysis = reader.analyse(QUESTION, QUESTION, None)

    packed = reader.pack(analysis, evidence, limit=5, per_document=3)
    one = reader.pack(analysis, evidence, limit=5, per_document=1)

    assert sum(s.chunk.document_id == "hives" for s in evidence) == 5
    assert [s.chunk.document_id for s in packed].count("hives") == 3 and len(packed) == 5
    assert packed[0].chunk.text == ANSWER
    assert sorted(s.chunk.document_id for s in one) == ["doc-0", "doc-1", "hives"], "fewer than the limit: the cap holds"
