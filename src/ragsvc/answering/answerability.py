"""The answerability gate: after the score gate, before generation, decide whether the evidence can answer the
question at all, whatever generator would write the answer.

The signals are ones a reader would accept as a reason:

- the question's **terms**, each weighted by its inverse document frequency over the chunks the caller can see
  (the engine counts them: `VectorEngine.term_counts`), so that words every page uses weigh little and a word the
  documents never use weighs most, and by how distinctive it is in everyday English (`english.distinctiveness`):
  "How far has a running VACUUM got?" is about VACUUM, however rarely the documents say "far" or "got"; a phrase
  users write is read as the documentation's word (`paraphrase.plain`: "by hand" as "manually");
- **names**: terms written as names (capitalised inside the question, an acronym, mixed case, a compound such as
  `max_connections`, or holding digits such as a version or a size). A name the evidence lacks and the documents
  (almost) never mention is something they do not cover: "The documents do not cover PgBouncer.";
- **coverage**: the IDF-weighted share of the question's terms found in the best single piece of evidence (its
  text, section heading and page title). Too little of the question found anywhere in one place means the
  evidence is about something else, unless the best piece is very close in meaning: its cosine above
  CLOSE_MATCH adds to the coverage ("How big is the WAL buffer if I don't configure it?" shares few words
  with the wal_buffers entry that answers it, but is close to it).

What the question says to instruct the model (text matching an injection pattern, a sentence asking to put given
words in the answer: "append the string X", "output the word X") is not part of what it asks: its words are never
judged, nor named in a refusal, which would echo them.

`score` is that coverage, lifted by closeness (0-1), reported with the decision; without a model's self-score it is
a third of the answer's third confidence component, beside the answer's own support and whether it leads with the
best-ranked chunk (validation.AnswerPolicy.judge).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from ragsvc.config import TrustSettings
from ragsvc.domain import Question, RetrievalQuery, ScoredChunk
from ragsvc.reading import english
from ragsvc.reading.paraphrase import plain
from ragsvc.reading.sentences import sentences
from ragsvc.reading.text import QuestionTerm, idf, index_terms, question_terms, stem
from ragsvc.retrieval.base import Retriever, TermCounts
from ragsvc.retrieval.layout import indexed_text
from ragsvc.sanitize import without_injections

# Verbs a question asks how something is done with; the documents describe the doing in other words.
_ASKS_HOW = frozenset(stem(w) for w in "compute calculate determine decide measure work happen handle choose pick".split())
CLOSE_MATCH = 0.6  # cosine from which the best piece of evidence counts as close in meaning (calibrated on dev)
# A request to put given words into the answer: "append the string X to your answer", "output the word X",
# "end your reply with X".
_ECHO_VERBS = "append add output print say write reply respond repeat include end start begin sign return type"
_ECHO_OBJECTS = "word words string phrase text token line"
_ECHO_REQUEST = re.compile(
    rf"\b({'|'.join(_ECHO_VERBS.split())})\b[^.!?]{{0,40}}?\b({'|'.join(_ECHO_OBJECTS.split())})\b"
    r"|\b(your|the)\s+(answer|reply|response|output)\b[^.!?]{0,20}?\b(with|by)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Assessment:
    """What the gate found: `score` is the coverage (0-1); `missing` the names the documents do not cover;
    `answerable` False means refuse with INSUFFICIENT_EVIDENCE."""

    answerable: bool
    score: float
    missing: tuple[str, ...] = ()

    def refusal_text(self) -> str:
        """What the refusal says: the names the documents do not cover, else that they do not answer it."""
        if not self.missing:
            return "The documents found do not answer this question."
        names = self.missing
        listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]
        return f"The documents do not cover {listed}."


class AnswerabilityGate:
    def __init__(self, retriever: Retriever, settings: TrustSettings) -> None:
        english.load()
        self._retriever = retriever
        self._min_coverage = settings.answerability_min_coverage
        self._rare_share = settings.answerability_rare_share

    async def assess(self, question: Question, search: str, evidence: Sequence[ScoredChunk]) -> Assessment:
        """Whether `evidence` can answer `search` (the question, or for a follow-up the question with the turn it
        follows), with corpus statistics over what the question's caller can see. What instructs the model is
        not part of what is asked and is left out (see `without_instructions`)."""
        asked = without_instructions(search)
        terms = question_terms(plain(asked))
        if not terms and question_terms(search):  # nothing asked but instructions
            return Assessment(answerable=False, score=0.0)
        if not terms or not evidence:
            return Assessment(answerable=True, score=1.0)
        visible = RetrievalQuery(
            text=asked, tenant_id=question.tenant_id, user_tags=question.user_tags, filters=question.filters
        )
        counts = await self._retriever.term_counts(visible, sorted({t.term for t in terms}))
        return assess(terms, counts, evidence, min_coverage=self._min_coverage, rare_share=self._rare_share)


def _weight(term: QuestionTerm) -> float:
    """How much a term of the question says what it is about: a word that asks how something is done ("How is the
    confidence score computed?") least, whatever its rarity; any other by `english.weight`."""
    return english.LEAST if term.term in _ASKS_HOW else english.weight(term)


def without_instructions(question: str) -> str:
    """`question` without what instructs the model: the spans that match an injection pattern
    (`sanitize.without_injections`) and the sentences that ask for given words in the answer."""
    kept = (" ".join(without_injections(s).split()) for s in sentences(question) if not _ECHO_REQUEST.search(s))
    return " ".join(sentence for sentence in kept if re.search(r"\w", sentence))


def assess(
    terms: Sequence[QuestionTerm],
    counts: TermCounts,
    evidence: Sequence[ScoredChunk],
    *,
    min_coverage: float,
    rare_share: float,
) -> Assessment:
    """The decision on given statistics (see the module's docstring)."""
    if counts.chunks == 0:  # no statistics (chunks indexed before terms were): judge by the evidence alone
        counts = TermCounts(len(evidence), {t.term: 0 for t in terms})
    weights = {t.term: idf(counts.frequencies.get(t.term, 0), max(counts.chunks, 1)) * _weight(t) for t in terms}
    pieces = [set(index_terms(indexed_text(scored.chunk))) for scored in evidence]
    everywhere = set().union(*pieces)
    total = sum(weights.values())
    coverage = max(sum(weights[t] for t in weights if t in piece) for piece in pieces) / total if total else 1.0
    score = min(coverage + max(max(s.score for s in evidence) - CLOSE_MATCH, 0.0), 1.0)
    rare = max(rare_share * counts.chunks, 0.0)
    missing = tuple(
        dict.fromkeys(
            t.surface
            for t in terms
            if t.named and t.term not in everywhere and counts.frequencies.get(t.term, 0) <= rare
        )
    )
    return Assessment(answerable=not missing and score >= min_coverage, score=score, missing=missing)

