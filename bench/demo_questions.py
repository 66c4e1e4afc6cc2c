"""Questions over the bundled demo corpus (src/ragsvc/demo_corpus/), each with what a right answer must say.

Written for the benchmarks that ask a real model (bench/llm_path.py, bench/citation_policy.py): one or more
questions per section of the five documents, phrased as a user would. `expect` is a regular expression that a
right answer matches (case-insensitive): the fact the corpus states, in the words or numbers it states it with. An
answer that is shown (not refused) and does not match is counted wrong. It is a rule, not a judge: a right
answer worded otherwise counts wrong, and the checks were kept to facts a paraphrase cannot avoid (a number, a
name, a status code).
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DemoQuestion:
    query: str
    expect: str  # what a right answer says (a regular expression, case-insensitive)

    def right(self, answer: str) -> bool:
        return re.search(self.expect, answer, re.IGNORECASE) is not None


QUESTIONS = (
    DemoQuestion("How is the confidence score computed?", r"30\b.*40\b|40\b.*30\b|retrieval.*coverage"),
    DemoQuestion("What happens on SIGTERM?", r"NOT_SERVING|grace period|in-flight|stops accepting"),
    DemoQuestion("How are documents chunked?", r"180|tokens"),
    DemoQuestion("Which status code does an empty query get?", r"INVALID_ARGUMENT"),
    DemoQuestion("When is a question routed to a human?", r"threshold|below|60|confidence"),
    DemoQuestion("How long is the default grace period?", r"\b(10|ten)\b"),
    DemoQuestion("What is the default confidence threshold?", r"\b60\b"),
    DemoQuestion("How much do neighbouring chunks overlap?", r"\b(40|forty)\b"),
    DemoQuestion("Which status code does a failing LLM server get?", r"UNAVAILABLE"),
    DemoQuestion("What does a client get when it sends too many requests?", r"RESOURCE_EXHAUSTED|RATE_LIMITED"),
    DemoQuestion("Which health check protocol does ragsvc implement?", r"grpc\.health\.v1|health checking"),
    DemoQuestion("How often are dependencies probed?", r"\b(5|five)\b.*second|RAG_HEALTH_PROBE_INTERVAL_SECONDS"),
    DemoQuestion("Which embedding model does the retriever use?", r"MiniLM"),
    DemoQuestion("What counts as a citation marker?", r"\[#n\]|\[#\d|#"),
    DemoQuestion("When is an answer grounded?", r"valid marker|valid citation|at least one"),
    DemoQuestion("What does DeleteDocument report?", r"chunks|deleted|NOT_FOUND"),
)
