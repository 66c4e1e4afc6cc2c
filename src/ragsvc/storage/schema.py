"""The records schema: migrations applied in order at open, written once for both dialects.

A migration names the column kinds whose type differs by dialect as `{id}` (an auto-numbered primary key),
`{timestamp}` and `{blob}` (bytes); ragsvc.storage.dialect renders them. Every other column type reads the same in SQLite and
PostgreSQL. Never edit a migration that has shipped: add one.
"""

from __future__ import annotations

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE answers (
        id {id},
        created_at {timestamp} NOT NULL,
        request_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        query TEXT NOT NULL,
        outcome TEXT NOT NULL,
        answer TEXT NOT NULL,
        grounded INTEGER NOT NULL,
        refusal_reason TEXT NOT NULL,
        action TEXT NOT NULL,
        confidence TEXT NOT NULL,
        citations TEXT NOT NULL,
        flags TEXT NOT NULL,
        model TEXT NOT NULL,
        template_version TEXT NOT NULL,
        timings TEXT NOT NULL,
        error_reason TEXT NOT NULL,
        error_message TEXT NOT NULL,
        packed_chunks TEXT
    );
    CREATE INDEX answers_by_tenant ON answers (tenant_id, created_at);
    CREATE INDEX answers_by_request ON answers (request_id);
    """,
    """
    CREATE TABLE session_messages (
        tenant_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at {timestamp} NOT NULL,
        PRIMARY KEY (tenant_id, session_id, seq)
    );
    CREATE INDEX session_messages_by_age ON session_messages (created_at);
    """,
    """
    CREATE TABLE users (
        id TEXT PRIMARY KEY,
        email TEXT NOT NULL
    );
    CREATE TABLE tags (
        name TEXT PRIMARY KEY,
        owner_user_id TEXT
    );
    """,
    """
    CREATE TABLE prompt_templates (
        id TEXT PRIMARY KEY,
        display_name TEXT NOT NULL,
        instructions TEXT NOT NULL,
        user_prompt TEXT NOT NULL,
        created_at {timestamp} NOT NULL,
        updated_at {timestamp} NOT NULL
    );
    CREATE TABLE settings (
        name TEXT PRIMARY KEY,
        value TEXT NOT NULL,
        updated_at {timestamp} NOT NULL
    );
    """,
    """
    CREATE INDEX answers_by_age ON answers (created_at);
    """,
    # Sessions bound to the caller that created them (with its tags then), and each message with the evidence of
    # its turn (NULL for messages stored before: never put in a prompt again).
    """
    CREATE TABLE sessions (
        tenant_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        owner TEXT NOT NULL,
        owner_tags TEXT NOT NULL,
        created_at {timestamp} NOT NULL,
        PRIMARY KEY (tenant_id, session_id)
    );
    CREATE INDEX sessions_by_age ON sessions (created_at);
    ALTER TABLE session_messages ADD COLUMN evidence TEXT;
    """,
    # The documents each turn's answer cited (a JSON list of ids, on both messages of the turn), for GetSession.
    """
    ALTER TABLE session_messages ADD COLUMN cited_document_ids TEXT;
    """,
    # What was searched for a follow-up (and how it was rewritten), and the draft of a refused answer.
    """
    ALTER TABLE answers ADD COLUMN search_query TEXT NOT NULL DEFAULT '';
    ALTER TABLE answers ADD COLUMN query_rewrite TEXT NOT NULL DEFAULT '';
    ALTER TABLE answers ADD COLUMN draft TEXT NOT NULL DEFAULT '';
    """,
    # The metadata keys each tenant's documents declared, with the type the first of them gave (filters check
    # their keys against it: ragsvc.retrieval.schema).
    """
    CREATE TABLE metadata_keys (
        tenant_id TEXT NOT NULL,
        name TEXT NOT NULL,
        type TEXT NOT NULL,
        created_at {timestamp} NOT NULL,
        PRIMARY KEY (tenant_id, name)
    );
    """,
    # Provenance (R-003-13, R-003-04): each tenant's index version, and the version and language of each answer.
    """
    CREATE TABLE index_versions (
        tenant_id TEXT PRIMARY KEY,
        version BIGINT NOT NULL,
        updated_at {timestamp} NOT NULL
    );
    ALTER TABLE answers ADD COLUMN index_version TEXT NOT NULL DEFAULT '';
    ALTER TABLE answers ADD COLUMN language TEXT NOT NULL DEFAULT '';
    ALTER TABLE prompt_templates ADD COLUMN language TEXT NOT NULL DEFAULT 'en';
    ALTER TABLE prompt_templates ADD COLUMN response_style TEXT NOT NULL DEFAULT '';
    """,
    # Long-running operations (google.longrunning, storage/operations.py): bound to their caller (owner), leased by
    # the replica running them, their result (a packed google.protobuf.Any) or error (a google.rpc.Status) as bytes.
    """
    CREATE TABLE operations (
        seq {id},
        name TEXT NOT NULL UNIQUE,
        kind TEXT NOT NULL,
        owner TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        request_sha256 TEXT NOT NULL,
        state TEXT NOT NULL,
        done INTEGER NOT NULL,
        cancel_requested INTEGER NOT NULL,
        documents_done INTEGER NOT NULL,
        documents_total INTEGER NOT NULL,
        chunks_done BIGINT NOT NULL,
        chunks_total BIGINT NOT NULL,
        current_document_id TEXT NOT NULL,
        response {blob},
        error {blob},
        lease_owner TEXT NOT NULL,
        lease_expires_at {timestamp} NOT NULL,
        created_at {timestamp} NOT NULL,
        started_at {timestamp},
        updated_at {timestamp} NOT NULL,
        finished_at {timestamp}
    );
    CREATE INDEX operations_by_owner ON operations (owner, seq);
    CREATE INDEX operations_by_lease ON operations (done, lease_expires_at);
    CREATE INDEX operations_by_age ON operations (done, finished_at);
    """,
    # Erasure and retention of the audit log's text (storage/answers.py): the caller each row's request came from
    # ('' for the rows written before), and when its text was erased (NULL: it was not). Indexes for erasing by
    # caller, by session, and for the text retention's purge (the rows whose text is still there only, so that each
    # of its batches finds them without passing the erased ones). Nothing is rewritten: on PostgreSQL the new
    # columns need no table rewrite, so the migration of a long log is the three indexes' build.
    """
    ALTER TABLE answers ADD COLUMN caller TEXT NOT NULL DEFAULT '';
    ALTER TABLE answers ADD COLUMN text_erased_at {timestamp};
    CREATE INDEX answers_by_caller ON answers (caller, tenant_id);
    CREATE INDEX answers_by_session ON answers (tenant_id, session_id);
    CREATE INDEX answers_with_text_by_age ON answers (created_at) WHERE text_erased_at IS NULL;
    """,
    # A custom template's stop sequences (a JSON list) and citation policy ('': the server's default).
    """
    ALTER TABLE prompt_templates ADD COLUMN stop_sequences TEXT NOT NULL DEFAULT '[]';
    ALTER TABLE prompt_templates ADD COLUMN citation_policy TEXT NOT NULL DEFAULT '';
    """,
)

# The columns declared {timestamp} above: SQLite keeps them as ISO 8601 text, which the SQLite backend turns
# back into datetimes on the way out (a test checks this set against PostgreSQL's catalogue).
TIMESTAMP_COLUMNS = frozenset(
    {"created_at", "updated_at", "started_at", "finished_at", "lease_expires_at", "text_erased_at"}
)
