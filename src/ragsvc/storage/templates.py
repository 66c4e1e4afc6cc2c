"""Custom prompt templates (AdminService, R-003-21), kept in the service's database so they survive restarts.

The built-in templates are code (`ragsvc.prompts`), never rows: this table holds only the custom ones. The
admin servicer writes here first and then updates the in-memory `TemplateRegistry` the pipeline reads.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass

from ragsvc.domain import CitationPolicy, ResponseStyle
from ragsvc.prompts import PromptTemplate
from ragsvc.storage.backend import Backend, Row, utc_now

_COLUMNS = (
    "id, display_name, instructions, user_prompt, language, response_style, stop_sequences, citation_policy, "
    "created_at, updated_at"
)


@dataclass(frozen=True, slots=True)
class StoredTemplate:
    """A custom template and when it was created and last changed (UTC)."""

    template: PromptTemplate
    created_at: dt.datetime
    updated_at: dt.datetime


def _stored(row: Row) -> StoredTemplate:
    template = PromptTemplate(
        version=row["id"],
        length_rule=row["instructions"],
        user=row["user_prompt"],
        display_name=row["display_name"],
        language=row["language"],
        response_style=ResponseStyle(row["response_style"]) if row["response_style"] else None,
        stop=tuple(json.loads(row["stop_sequences"])),
        citation_policy=CitationPolicy(row["citation_policy"]) if row["citation_policy"] else None,
    )
    return StoredTemplate(template, row["created_at"], row["updated_at"])


def _style(template: PromptTemplate) -> str:
    return template.response_style.value if template.response_style is not None else ""


def _policy(template: PromptTemplate) -> str:
    return template.citation_policy.value if template.citation_policy is not None else ""


class TemplateStore:
    def __init__(self, database: Backend) -> None:
        self._db = database

    async def list(self) -> list[StoredTemplate]:
        """Every custom template, by id."""
        rows = await self._db.fetch_all(f"SELECT {_COLUMNS} FROM prompt_templates ORDER BY id")  # noqa: S608 - a constant
        return [_stored(row) for row in rows]

    async def get(self, template_id: str) -> StoredTemplate | None:
        rows = await self._db.fetch_all(f"SELECT {_COLUMNS} FROM prompt_templates WHERE id = ?", (template_id,))  # noqa: S608 - a constant
        return _stored(rows[0]) if rows else None

    async def create(self, template: PromptTemplate) -> StoredTemplate | None:
        """Store a new template; None when one with its id exists."""
        now = utc_now()
        changed = await self._db.execute(
            f"INSERT INTO prompt_templates ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",  # noqa: S608 - a constant
            (
                template.version, template.display_name, template.length_rule, template.user, template.language,
                _style(template), json.dumps(list(template.stop)), _policy(template), now, now,
            ),
        )
        return StoredTemplate(template, now, now) if changed else None

    async def update(self, template: PromptTemplate) -> StoredTemplate | None:
        """Replace the text of an existing template; None when there is none with its id."""
        changed = await self._db.execute(
            "UPDATE prompt_templates SET display_name = ?, instructions = ?, user_prompt = ?, language = ?, "
            "response_style = ?, stop_sequences = ?, citation_policy = ?, updated_at = ? WHERE id = ?",
            (
                template.display_name, template.length_rule, template.user, template.language, _style(template),
                json.dumps(list(template.stop)), _policy(template), utc_now(), template.version,
            ),
        )
        return await self.get(template.version) if changed else None

    async def delete(self, template_id: str) -> bool:
        return bool(await self._db.execute("DELETE FROM prompt_templates WHERE id = ?", (template_id,)))
