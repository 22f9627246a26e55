"""Secrets kept out of what people read: log lines, CLI errors and HTTP error bodies.

A model server may echo the key it was sent in its error ("Incorrect API key provided:
sk-..."), a database driver the DSN it failed to reach; those texts end up in exceptions
that are logged and printed. ``redact`` masks, in any text:

- the values registered as secrets (the server's API key, a configuration's LLM key and
  storage passwords, tokens and DSNs) and the same variables read from the environment;
- anything shaped like an OpenAI-style key (``sk-`` and a run of key characters);
- the token after ``Bearer``, and the password in a ``scheme://user:password@host`` URL.

``RedactSecrets`` is the same as a ``logging.Filter``; ``protect_logs`` attaches it to the
package's loggers and to the handlers the application configured, never configuring one.
"""
from __future__ import annotations

import logging
import os
import re
from typing import TYPE_CHECKING, Iterable, Optional

if TYPE_CHECKING:
    from graphrag.config import GraphRAGConfig

MASK = "***"

# The environment variables whose values are secrets wherever they appear.
SECRET_ENV = ("OPENAI_API_KEY", "GRAPHRAG_API_KEY", "GRAPHRAG_EMBEDDING_API_KEY", "GRAPHRAG_POSTGRES_DSN",
              "GRAPHRAG_NEO4J_PASSWORD", "GRAPHRAG_MILVUS_TOKEN", "GRAPHRAG_RERANK_API_KEY")
# storage_options keys whose values are secrets; any value that is a URL has its password taken.
SECRET_OPTION_WORDS = ("password", "token", "dsn", "secret", "key")
# Registered values shorter than this are not masked: replacing "a" everywhere hides nothing.
MIN_SECRET_CHARS = 6

_SHAPES = (
    (re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"), lambda m: MASK),
    (re.compile(r"(?i)\b(bearer\s+)[^\s'\",;]+"), lambda m: m.group(1) + MASK),
    (re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s:/@]*:)[^\s@/]+(@)"), lambda m: m.group(1) + MASK + m.group(2)),
)

_secrets: set[str] = set()


def register_secret(value: Optional[str]) -> None:
    """A value never to appear in a log line or an error message."""
    if value and len(value) >= MIN_SECRET_CHARS:
        _secrets.add(value)


def register_config_secrets(config: GraphRAGConfig) -> None:
    """The secrets a ``GraphRAGConfig`` holds: its LLM, embedding and rerank endpoint keys, a
    rerank endpoint URL's password and its storage connection settings."""
    for option in ("llm_api_key", "embedding_api_key", "rerank_api_key"):
        register_secret(getattr(config, option, None))
    rerank = getattr(config, "rerank", None)
    if isinstance(rerank, str) and "://" in rerank:
        for password in _url_passwords(rerank):
            register_secret(password)
    for name, value in (getattr(config, "storage_options", None) or {}).items():
        if not isinstance(value, str):
            continue
        if "://" in value:
            for password in _url_passwords(value):
                register_secret(password)
        elif any(word in name.lower() for word in SECRET_OPTION_WORDS):
            register_secret(value)


def _url_passwords(url: str) -> list[str]:
    """The password of a ``scheme://user:password@host`` URL (a URL without one is no secret)."""
    found = _SHAPES[2][0].search(url)
    return [url[found.end(1):found.start(2)]] if found else []


def _known() -> Iterable[str]:
    from_env = [os.environ.get(name) or "" for name in SECRET_ENV]
    passwords = [p for v in from_env if "://" in v for p in _url_passwords(v)]
    known = {*_secrets, *(v for v in from_env if "://" not in v), *passwords}
    # The longest first: a secret containing another is masked whole.
    return sorted((s for s in known if len(s) >= MIN_SECRET_CHARS), key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with every known secret and secret-shaped string masked."""
    for secret in _known():
        if secret in text:
            text = text.replace(secret, MASK)
    for pattern, mask in _SHAPES:
        text = pattern.sub(mask, text)
    return text


class RedactSecrets(logging.Filter):
    """Masks secrets in a record's message and in the traceback it carries (never drops one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        clean = redact(message)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactSecrets()

# Loggers outside the package whose lines may quote a request or an error with a secret in it.
OTHER_LOGGERS = ("openai", "httpx", "httpcore", "uvicorn", "uvicorn.error", "uvicorn.access", "mcp", "neo4j",
                 "pymilvus", "psycopg")


def protect_logs() -> None:
    """Attach ``RedactSecrets`` to every logger of this package created so far, to the
    loggers in ``OTHER_LOGGERS``, and to every handler already configured (the root
    logger's, which an application such as the CLI set up). Safe to call again: loggers
    created since are covered then. Configures no logger and adds no handler."""
    manager = logging.Logger.manager
    names = [n for n in list(manager.loggerDict) if n == "graphrag" or n.startswith("graphrag.")]
    loggers = [logging.getLogger(n) for n in (*names, *OTHER_LOGGERS)] + [logging.getLogger()]
    for logger in loggers:
        for target in (logger, *logger.handlers):
            if _FILTER not in target.filters:
                target.addFilter(_FILTER)
