"""What the trained reader reads: a question's analysis, and numbers describing each candidate sentence of the
evidence and each answer, computed the same way in training (bench/reader) and in serving.

Every feature is a general property of a question and a text (how much of the question's weighted terms a sentence
holds, whether it states the kind of value asked for, where it sits, how its chunk ranked); none names a corpus's
layout or a question's wording. Each term of the question weighs its rarity in the tenant's documents (IDF over the
chunks the caller can see), normalised to sum 1; a verb a question asks "how" with counts least (`term_weight`).
The rule reader passes its own weight (`english.weight`); read across unseen corpora, weighting by everyday English
cost the trained reader 1.2 points of right answers (bench/results/reader-ablation-2026-11-27.json).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ragsvc.domain import ScoredChunk, TermCounts
from ragsvc.reading.paraphrase import plain, same_sense
from ragsvc.reading.passages import Kind
from ragsvc.reading.relevance import Candidate, asks_how_to
from ragsvc.reading.sentences import sentences
from ragsvc.reading.text import QuestionTerm, idf, question_terms, stem
from ragsvc.reading.traits import DEFAULT
from ragsvc.reading.values import ASKS_HOW_MUCH, answers_value, asked_values
from ragsvc.sanitize import without_injections

_YES_OR_NO = re.compile(r"^\W*(?:(?:and|so|but)\W+)?(?:is|are|was|were|does|do|did|can|could|will|would|should|has|have)\b", re.I)
# Verbs a question asks how something is done with; the documents describe the doing in other words.
ASKS_HOW = frozenset(stem(w) for w in "compute calculate determine decide measure work happen handle choose pick".split())
# A request to put given words into the answer: "append the string X to your answer", "output the word X" (the words
# quoted, or capitalised or a number: "print the one-line title" asks no such thing), "end your reply with X",
# "add X at the end of your answer".
_ECHO_VERBS = "append add output print say write reply respond repeat include end start begin sign return type"
_ECHO_OBJECTS = "word words string phrase text token line"
_ECHO_REQUEST = re.compile(
    rf"\b({'|'.join(_ECHO_VERBS.split())})\b[^.!?]{{0,40}}?\b({'|'.join(_ECHO_OBJECTS.split())})\s+(?-i:[\"'“‘A-Z0-9])"
    r"|\b(your|the)\s+(answer|reply|response|output)\b[^.!?]{0,20}?\b(with|by)\b"
    r"|\b(to|at)\s+the\s+(end|start|beginning|top|bottom)\s+of\s+(your|the)\s+(answer|reply|response|output)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class Analysis:
    """A question as the reader reads it: its matching terms with their weights (summing to 1), its names, and
    what kind of answer it asks for."""

    search: str  # what was searched, instructions to a model left out (`without_instructions`)
    question: str  # the user's own words
    terms: tuple[str, ...]
    weights: dict[str, float]
    surfaces: dict[str, str]  # each term as the question writes it
    names: frozenset[str]
    own: frozenset[str]  # the terms the user wrote (a follow-up's search also holds earlier turns' words)
    asked: frozenset[str]  # the kinds of value asked for (values.asked_values)
    procedural: bool
    yes_no: bool
    asks_default: bool
    rare: dict[str, bool]  # per term: the tenant's documents (almost) never hold it

    @property
    def has_names(self) -> bool:
        return bool(self.names)


def matching(term: str) -> str:
    """The form a question's term is matched in: words of the same sense as one (`paraphrase.same_sense`)."""
    return same_sense([term])[0]


def counted_terms(search: str) -> list[str]:
    """The index terms of `search` whose statistics `analyse` reads."""
    return sorted({t.term for t in _asked_terms(search)})


@functools.lru_cache(maxsize=256)  # a question's text is read for its counted terms, then analysed
def _asked_terms(text: str) -> tuple[QuestionTerm, ...]:
    """The terms `text` asks about: its `question_terms` without instructions to a model or how it asks for an
    amount."""
    return tuple(question_terms(ASKS_HOW_MUCH.sub(" ", plain(without_instructions(text)))))


LEAST = 0.05  # what a verb asking how counts: a question made of such words only is judged by them


def term_weight(term: QuestionTerm) -> float:
    """How much a term can say what the question is about, before its rarity in the tenant: a verb that asks how
    something is done ("How is the confidence score computed?") LEAST, any other fully."""
    return LEAST if term.term in ASKS_HOW else 1.0


def analyse(
    search: str,
    question: str,
    counts: TermCounts | None,
    *,
    rare_share: float = 0.002,
    weigh: Callable[[QuestionTerm], float] = term_weight,
) -> Analysis:
    """The analysis of `search` (what was searched: the question, or a follow-up with its earlier turns' subject),
    `question` being the user's own words, with the tenant's statistics `counts` of `counted_terms(search)` (None:
    none known); `weigh` gives a term's weight before its rarity in the tenant."""
    found = _asked_terms(search)
    chunks = max(counts.chunks, 1) if counts is not None else 1
    raw: dict[str, float] = {}
    names: set[str] = set()
    surfaces: dict[str, str] = {}
    rare: dict[str, bool] = {}
    order: list[str] = []
    for term in found:
        key = matching(term.term)
        frequency = counts.frequencies.get(term.term, 0) if counts is not None else 0
        weight = (idf(frequency, chunks) if counts is not None else 1.0) * weigh(term)
        if key not in raw:
            order.append(key)
            surfaces[key] = term.surface
        raw[key] = max(raw.get(key, 0.0), weight)
        if term.named:
            names.add(key)
        rare[key] = counts is not None and frequency <= rare_share * chunks
    total = sum(raw.values())
    weights = {t: w / total for t, w in raw.items()} if total else {t: 1 / len(raw) for t in raw}
    own = {matching(t.term) for t in _asked_terms(question)} if question else set(raw)
    return Analysis(
        search=without_instructions(search),
        question=question or search,
        terms=tuple(order),
        weights=weights,
        surfaces=surfaces,
        names=frozenset(names),
        own=frozenset(own & set(raw)) or frozenset(raw),
        asked=asked_values(question or search),
        procedural=asks_how_to(question or search),
        yes_no=bool(_YES_OR_NO.search(question or search)),
        asks_default=bool(DEFAULT.search(question or search)),
        rare=rare,
    )


@functools.lru_cache(maxsize=256)  # a question's text is read for its terms (`_asked_terms`), then analysed
def without_instructions(question: str) -> str:
    """`question` without what instructs the model: the spans that match an injection pattern
    (`sanitize.without_injections`) and the sentences that ask for given words in the answer. They are not part of
    what is asked: never judged, nor named in a refusal, which would echo them."""
    kept = (" ".join(without_injections(s).split()) for s in sentences(question) if not _ECHO_REQUEST.search(s))
    return " ".join(sentence for sentence in kept if re.search(r"\w", sentence))


SENTENCE_FEATURES = (
    "cov_sentence",  # weighted share of the question's terms in the sentence
    "cov_context",  # ... in the sentence, its label, section heading and page title
    "cov_scope",  # best cov_sentence in its entry or paragraph
    "cov_chunk",  # ... in its whole chunk
    "cov_heading",  # ... in its heading and page title alone
    "own_sentence",  # share of the user's own terms (not carried from earlier turns) in the sentence
    "names_sentence",  # share of the question's names in the sentence (0 when it names none)
    "names_chunk",  # ... in the chunk
    "best_term_sentence",  # weight of the heaviest question term the sentence holds, over the heaviest's
    "missing_chunk",  # weight of the heaviest question term missing from the whole chunk
    "terms_sentence",  # log of the count of question terms the sentence holds
    "value_answered",  # the sentence states the kind of value asked for (1), another amount (0.5), none (0)
    "asks_value",
    "states_number",
    "default_stated",  # asked for a default and the sentence says "default"
    "procedural_tool",  # asked how / which, and the sentence names something to use (code, a name, a keyword)
    "procedural",
    "yes_no",
    "yes_no_modal",  # a yes-or-no question and a sentence with a negation or modal
    "pointer",  # the sentence refers elsewhere ("see ...")
    "position",  # index of the sentence in its chunk (log)
    "depth",  # passages before it under its label (log)
    "words",  # log word count
    "rank",  # its chunk's place in the evidence (0 best)
    "chunk_score",  # its chunk's retrieval score
    "chunk_gap",  # best chunk's score minus its chunk's
    "cut",  # the chunk's border cuts it
    "label_kind",
    "code_kind",
    "row_kind",
    "question_terms",  # log count of the question's terms
    "has_names",
    "neighbour_cov",  # best cov_sentence of the passages next to it in its chunk
    "asks_what",  # the question's opening word: what/which, how, why, when/where/who, or a yes-or-no verb
    "asks_how",
    "asks_why",
    "asks_when_where_who",
    "states_code",  # the sentence holds code, an option or a compound name
)


def sentence_features(
    analysis: Analysis, found: Sequence[Candidate], evidence: Sequence[ScoredChunk], *, rows_of: slice = slice(None)
) -> list[list[float]]:
    """One row of SENTENCE_FEATURES per candidate of `found[rows_of]` (each read among all of `found`)."""
    if not found:
        return []
    weights = analysis.weights
    heaviest = max(weights.values(), default=1.0) or 1.0
    names = analysis.names
    chunk_terms = [_chunk_terms(found, marker) for marker in range(1, len(evidence) + 1)]
    top_score = evidence[0].score if evidence else 0.0
    own = [t for t in analysis.terms if t in analysis.own]  # in the question's order: a sum over a set is not
    own_total = sum(weights[t] for t in own) or 1.0  # the same float in every process (string hashing)
    scope_best: dict[tuple[int, int, int], float] = {}
    covs = []
    for candidate in found:
        cov = sum(weights[t] for t in analysis.terms if t in candidate.terms)
        covs.append(cov)
        scope_best[candidate.scope] = max(scope_best.get(candidate.scope, 0.0), cov)
    neighbours: dict[tuple[int, int], float] = {}
    for candidate, cov in zip(found, covs, strict=True):
        for step in (-1, 1):
            key = (candidate.marker, candidate.position + step)
            neighbours[key] = max(neighbours.get(key, 0.0), cov)
    opening = _opening(analysis.question)
    rows = []
    for candidate, cov in zip(found[rows_of], covs[rows_of], strict=True):
        shows = candidate.traits
        in_chunk = chunk_terms[candidate.marker - 1]
        held = [t for t in analysis.terms if t in candidate.terms]
        value = answers_value(analysis.asked, candidate.values)
        rows.append(
            [
                cov,
                sum(weights[t] for t in analysis.terms if t in candidate.terms or t in candidate.label or t in candidate.heading),
                scope_best[candidate.scope],
                sum(weights[t] for t in analysis.terms if t in in_chunk),
                sum(weights[t] for t in analysis.terms if t in candidate.heading),
                sum(weights[t] for t in own if t in candidate.terms) / own_total,
                len(names & candidate.terms) / len(names) if names else 0.0,
                len(names & in_chunk) / len(names) if names else 0.0,
                max((weights[t] for t in held), default=0.0) / heaviest,
                max((weights[t] for t in analysis.terms if t not in in_chunk), default=0.0) / heaviest,
                math.log1p(len(held)),
                value,
                1.0 if analysis.asked else 0.0,
                1.0 if shows.number else 0.0,
                1.0 if analysis.asks_default and shows.default else 0.0,
                1.0 if analysis.procedural and shows.code else 0.0,
                1.0 if analysis.procedural else 0.0,
                1.0 if analysis.yes_no else 0.0,
                1.0 if analysis.yes_no and shows.negation_or_modal else 0.0,
                1.0 if shows.pointer else 0.0,
                math.log1p(candidate.position),
                math.log1p(candidate.depth),
                math.log1p(shows.words),
                float(candidate.marker - 1),
                candidate.relevance,
                top_score - candidate.relevance,
                1.0 if candidate.cut else 0.0,
                1.0 if candidate.kind is Kind.LABEL else 0.0,
                1.0 if candidate.kind is Kind.CODE else 0.0,
                1.0 if candidate.kind is Kind.ROW else 0.0,
                math.log1p(len(analysis.terms)),
                1.0 if names else 0.0,
                neighbours.get((candidate.marker, candidate.position), 0.0),
                1.0 if opening == "what" else 0.0,
                1.0 if opening == "how" else 0.0,
                1.0 if opening == "why" else 0.0,
                1.0 if opening == "wh" else 0.0,
                1.0 if shows.code else 0.0,
            ]
        )
    return rows


_OPENING = re.compile(r"^\W*(?:(?:and|so|but|also|then|ok|okay)\W+)?(\w+)", re.IGNORECASE)


def _opening(question: str) -> str:
    """What kind of question it is by its opening word: "what" (what, which), "how", "why", "wh" (when, where,
    who), "" otherwise."""
    match = _OPENING.search(question)
    word = match.group(1).lower() if match else ""
    if word in ("what", "which"):
        return "what"
    if word in ("how", "why"):
        return word
    return "wh" if word in ("when", "where", "who", "whose") else ""


def _chunk_terms(found: Sequence[Candidate], marker: int) -> frozenset[str]:
    terms: set[str] = set()
    for candidate in found:
        if candidate.marker == marker:
            terms |= candidate.terms | candidate.label | candidate.heading
    return frozenset(terms)


@dataclass(frozen=True, slots=True)
class Packing:
    """How the chunk model chose the evidence an answer reads (`packing.pack`): per chunk read, in the order read,
    its place in the pool retrieval handed over (0 its first) and the chunk model's score of it."""

    places: tuple[int, ...]
    scores: tuple[float, ...]


ANSWER_FEATURES = (
    "top_score",  # the sentence model's score of the answer's first sentence
    "second_score",  # ... of the best other candidate
    "score_gap",
    "top_share",  # softmax share of the first sentence among the candidates
    "lead_cov_sentence",
    "lead_cov_context",
    "lead_names_sentence",
    "lead_value_answered",
    "lead_rank",
    "best_cov_chunk",  # the best chunk's weighted coverage of the question
    "evidence_cov",  # weighted share of the question's terms found anywhere in the evidence
    "missing_names",  # the question's names that no evidence holds and the documents (almost) never hold
    "missing_rare_weight",  # weight of the heaviest term missing from all evidence and rare in the tenant
    "missing_weight",  # weight of the heaviest term missing from all evidence
    "top_chunk_score",
    "chunk_score_gap",  # best chunk's score minus the second's
    "question_terms",
    "has_names",
    "asks_value",
    "procedural",
    "yes_no",
    "candidates",  # log count of candidate sentences
    "quotes_cov",  # weighted share of the question's terms in the answer's quotes together
    "lead_neighbour_cov",
    "lead_states_code",
    "documents",  # distinct documents among the evidence
    "lead_in_top_document",  # the lead sits in the best-ranked chunk's document
    # how sure the chunk model is (`Packing`)
    "pack_top",  # its score of the first chunk read
    "pack_gap",  # ... of the first chunk read less the second's
    "pack_promoted",  # chunks read from below retrieval's first as many
    "pack_agrees",  # the first chunk read is retrieval's first
    "pack_lead",  # its score of the lead's chunk (-10 without a lead)
    "pack_lead_gap",  # ... less its best score of the other chunks read (-1 without a lead)
    "pack_lead_place",  # the lead's chunk's place in retrieval's order (-1 without a lead)
    "pack_lead_promoted",  # the lead's chunk is from below retrieval's first as many as are read (-1 without a lead)
    # how sure the sentence model is
    "lead_margin_other_chunks",  # the lead's score less the best of other chunks' candidates (at most 10; -10: no lead)
    "close_chunks",  # other chunks holding a candidate scored within CLOSE of the lead
    "close_candidates",  # other candidates scored within CLOSE of the lead
)
CLOSE = 1.0  # a candidate's score this near the lead's is a close second reading


def answer_features(
    analysis: Analysis,
    found: Sequence[Candidate],
    rows: Sequence[Sequence[float]],
    scores: Sequence[float],
    lead: int,
    evidence: Sequence[ScoredChunk],
    packing: Packing,
    quoted: Sequence[int] = (),
) -> list[float]:
    """ANSWER_FEATURES of an answer that leads with candidate `lead` (an index into `found`, -1: none) and quotes
    `quoted` (indices, the lead among them), given every candidate's feature row and model score and how the
    evidence was packed."""
    weights = analysis.weights
    heaviest = max(weights.values(), default=1.0) or 1.0
    everywhere: set[str] = set()
    for candidate in found:
        everywhere |= candidate.terms | candidate.label | candidate.heading
    missing = [t for t in analysis.terms if t not in everywhere]
    index = {name: i for i, name in enumerate(SENTENCE_FEATURES)}
    if lead >= 0:
        top = scores[lead]
        others = [s for i, s in enumerate(scores) if i != lead]
        row = rows[lead]
    else:
        top, others, row = -10.0, list(scores), [0.0] * len(SENTENCE_FEATURES)
    second = max(others, default=-10.0)
    peak = max(scores, default=0.0)
    share = math.exp(top - peak) / sum(math.exp(s - peak) for s in scores) if scores and lead >= 0 else 0.0
    chunk_scores = [s.score for s in evidence]
    return [
        top,
        second,
        top - second,
        share,
        row[index["cov_sentence"]],
        row[index["cov_context"]],
        row[index["names_sentence"]],
        row[index["value_answered"]],
        row[index["rank"]],
        max((r[index["cov_chunk"]] for r in rows), default=0.0),
        sum(weights[t] for t in analysis.terms if t in everywhere),
        float(sum(1 for t in missing if t in analysis.names and analysis.rare.get(t, False))),
        max((weights[t] for t in missing if analysis.rare.get(t, False)), default=0.0) / heaviest,
        max((weights[t] for t in missing), default=0.0) / heaviest,
        chunk_scores[0] if chunk_scores else 0.0,
        chunk_scores[0] - chunk_scores[1] if len(chunk_scores) > 1 else 0.0,
        math.log1p(len(analysis.terms)),
        1.0 if analysis.names else 0.0,
        1.0 if analysis.asked else 0.0,
        1.0 if analysis.procedural else 0.0,
        1.0 if analysis.yes_no else 0.0,
        math.log1p(len(found)),
        sum(weights[t] for t in analysis.terms if any(t in found[i].terms for i in (*quoted, *([lead] if lead >= 0 else [])))),
        row[index["neighbour_cov"]],
        row[index["states_code"]],
        float(len({s.chunk.document_id for s in evidence})),
        1.0
        if lead >= 0 and evidence and evidence[found[lead].marker - 1].chunk.document_id == evidence[0].chunk.document_id
        else 0.0,
        *_packing_features(found, scores, lead, packing),
    ]


def _packing_features(found: Sequence[Candidate], scores: Sequence[float], lead: int, packing: Packing) -> list[float]:
    """The answer's columns that say how sure the chunk model and the sentence model are of its lead."""
    read, places = packing.scores, packing.places
    top = [
        read[0] if read else 0.0,
        read[0] - read[1] if len(read) > 1 else 0.0,
        float(sum(1 for place in places if place >= len(places))),
        1.0 if places and places[0] == 0 else 0.0,
    ]
    if lead < 0:
        return [*top, -10.0, -1.0, -1.0, -1.0, -10.0, 0.0, 0.0]
    chunk = found[lead].marker - 1
    others = [score for i, score in enumerate(read) if i != chunk]
    other_candidates = [s for c, s in zip(found, scores, strict=True) if c.marker - 1 != chunk]
    near = scores[lead] - CLOSE
    return [
        *top,
        read[chunk],
        read[chunk] - max(others) if others else 0.0,
        float(places[chunk]),
        1.0 if places[chunk] >= len(places) else 0.0,
        min(scores[lead] - max(other_candidates), 10.0) if other_candidates else 10.0,
        float(len({c.marker for c, s in zip(found, scores, strict=True) if s >= near and c.marker - 1 != chunk})),
        float(sum(1 for s in scores if s >= near) - 1),
    ]
