"""Readers for tests that build pipeline parts by hand: the rule reader, whose choices tests can pin down."""

from __future__ import annotations

from ragsvc.reading.rules import RuleReader

RULES = RuleReader(min_coverage=0.5, rare_share=0.002)
