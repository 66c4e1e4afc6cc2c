"""Query classification (R-000-14): FACTUAL, PROCEDURAL, CLARIFICATION or GREETING.

Every class still goes through retrieval, and the class is reported (a follow-up is searched as a standalone
question whatever its class: see answering/conversation.py). This is the cheap rule-based classifier used when no
LLM classifies.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ragsvc.domain import ChatMessage, QueryClass, Role

_GREETING = re.compile(
    r"^(hi|hello|hey|good (morning|afternoon|evening)|thanks|thank you|cheers|bye|goodbye)\b[\s!.,?]*"
    r"(there|all|everyone|again|a lot|so much)?[\s!.?]*$",
    re.IGNORECASE,
)
_PROCEDURAL = re.compile(
    r"^(how (do|can|should|would|to)|what (are|is) the steps|steps to|walk me through|guide me|"
    r"what should i do|how does one)\b|\b(set up|configure|install|enable|disable|step by step)\b",
    re.IGNORECASE,
)
_CLARIFICATION = re.compile(
    r"^(and|also|but|so|what about|how about|why( not)?|really|which one|what do you mean|can you (explain|clarify)|"
    r"more (details|detail|about)|tell me more|elaborate|what else)\b"
    r"|\b(it|that|this|those|these|they|them)\b[^.?!]{0,30}[?]?$",
    re.IGNORECASE,
)
_MAX_CLARIFICATION_WORDS = 8


def classify(query: str, history: Sequence[ChatMessage] = ()) -> QueryClass:
    """The class of `query`; CLARIFICATION needs a conversation to follow up on."""
    text = query.strip()
    if _GREETING.match(text):
        return QueryClass.GREETING
    has_history = any(message.role is Role.USER for message in history)
    if has_history and len(text.split()) <= _MAX_CLARIFICATION_WORDS and _CLARIFICATION.search(text):
        return QueryClass.CLARIFICATION
    if _PROCEDURAL.search(text):
        return QueryClass.PROCEDURAL
    return QueryClass.FACTUAL
