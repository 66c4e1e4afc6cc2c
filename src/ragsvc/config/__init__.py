"""Settings: typed, grouped per component, read from the environment and validated once (see `settings`)."""

from ragsvc.config.settings import (
    POSTGRES_SCHEMES,
    BudgetSettings,
    EmbedderKind,
    GenerationSettings,
    GeneratorKind,
    HardeningSettings,
    IngestSettings,
    OperationSettings,
    ReaderKind,
    RecordsSettings,
    RetrievalSettings,
    ServerSettings,
    Settings,
    SharedStateSettings,
    TrustSettings,
)

__all__ = [
    "POSTGRES_SCHEMES",
    "BudgetSettings",
    "EmbedderKind",
    "GenerationSettings",
    "GeneratorKind",
    "HardeningSettings",
    "IngestSettings",
    "OperationSettings",
    "ReaderKind",
    "RecordsSettings",
    "RetrievalSettings",
    "ServerSettings",
    "Settings",
    "SharedStateSettings",
    "TrustSettings",
]
