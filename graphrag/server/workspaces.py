"""Workspaces per request: the ``X-Workspace`` header selects an index of its own.

A named workspace is a working dir of its own, ``workspaces/NAME`` under the server's, and,
for the stores on a database, a workspace option of its own (``storage_options["workspace"]``)
derived from the server's one and the name, so two names never meet in a database (whose
workspace names are lower case and short: see ``database_workspace``). Each has its own
``GraphService``: its readers over its last commit, its one writer, its jobs and its
document statuses; so one workspace's write never waits for another's, and a reader never
waits for a write. No header is the server's own working dir, as before workspaces.

A workspace is created by its first insert or upload; any other call on a workspace that
does not exist is a 404 (a reprocess or a scan too: a new workspace has no failed documents
and no input folder, and a call that fails must leave no empty workspace behind). ``Workspaces`` stands where the HTTP
API and the MCP tools take a ``GraphService``: each call goes to the service of the workspace
the request named (a context variable, set per HTTP request by ``selecting_workspace`` and
per MCP message by ``WorkspaceMiddleware``).
"""
from __future__ import annotations

import contextvars
import dataclasses
import hashlib
import os
import re
from typing import Any, Awaitable, Callable, Optional

from graphrag.errors import InvalidInputError, WorkspaceNotFound
from graphrag.server.jobs import JOBS_FILE
from graphrag.server.security import ASGIApp
from graphrag.server.service import JOBS_DIR, GraphService

WORKSPACE_HEADER = "X-Workspace"
WORKSPACES_DIR = "workspaces"
VALID_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# The service methods that create a missing workspace; every other call needs it to exist.
CREATING = frozenset({"insert", "insert_read"})

# The workspace the request being served named (None: the default one).
requested: contextvars.ContextVar[Optional[str]] = contextvars.ContextVar("graphrag_workspace", default=None)


def database_workspace(base: str, name: str) -> str:
    """The database workspace of workspace ``name`` on a server whose own is ``base``: a hash,
    since a database's workspace names are lower case and at most 24 characters (``Team`` and
    ``team`` are two workspaces here)."""
    return "ws" + hashlib.blake2b(f"{base}/{name}".encode("utf-8"), digest_size=11).hexdigest()


class Workspaces:
    """The server's workspaces, each a ``GraphService``, opened on first use. Attributes not
    defined here are the requested workspace's service's (``service.query(...)``)."""

    def __init__(self, default: GraphService) -> None:
        self.default = default
        self._named: dict[str, GraphService] = {}
        self._started = False

    @classmethod
    def of(cls, service: "GraphService | Workspaces") -> "Workspaces":
        """A service with its workspaces (the same object if it is one already)."""
        return service if isinstance(service, Workspaces) else cls(service)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.current(create=attribute in CREATING), attribute)

    def current(self, create: bool = False) -> GraphService:
        """The service of the workspace this request named; ``create``: make it if missing."""
        name = requested.get()
        if name is None:
            return self.default
        if not VALID_NAME.fullmatch(name):
            raise InvalidInputError(f"{WORKSPACE_HEADER} must be 1 to 64 letters, digits, _ or -, not {name[:80]!r}")
        service = self._named.get(name)
        if service is not None:
            return service
        folder = self._folder(name)
        if not os.path.isdir(folder) and (not create or self.default.read_only):
            raise WorkspaceNotFound(f"no workspace {name!r} (a write creates it)", missing=[name])
        return self._open(name)

    def names(self) -> list[str]:
        """The named workspaces that exist (each was written to once)."""
        root = os.path.join(self.default.config.working_dir, WORKSPACES_DIR)
        try:
            found = os.listdir(root)
        except FileNotFoundError:
            return []
        return sorted(n for n in found if VALID_NAME.fullmatch(n) and os.path.isdir(os.path.join(root, n)))

    async def start(self) -> None:
        """The default workspace, and each named one holding jobs a stopped server left."""
        await self.default.start()
        self._started = True
        for name in self.names():
            if _has_kept_jobs(self._folder(name)):
                self._open(name)

    async def stop(self) -> None:
        for service in [self.default, *self._named.values()]:
            await service.stop()
        self._named.clear()
        self._started = False

    def _folder(self, name: str) -> str:
        return os.path.join(self.default.config.working_dir, WORKSPACES_DIR, name)

    def _open(self, name: str) -> GraphService:
        from graphrag.storage.db_common import workspace_of

        config = self.default.config
        options = {**config.storage_options, "workspace": database_workspace(workspace_of(config), name)}
        folder = self._folder(name)
        if not self.default.read_only:
            os.makedirs(folder, exist_ok=True)
        service = GraphService(dataclasses.replace(config, working_dir=folder, storage_options=options),
                               read_only=self.default.read_only)
        self._named[name] = service
        if self._started:  # opened by a request: the loop runs
            service.jobs.start()
        return service


def _has_kept_jobs(folder: str) -> bool:
    """Whether a stopped server left jobs to run in this working dir (request files beside the job list)."""
    try:
        return any(f != JOBS_FILE for f in os.listdir(os.path.join(folder, JOBS_DIR)))
    except FileNotFoundError:
        return False


def selecting_workspace(app: ASGIApp) -> ASGIApp:
    """``app`` with each HTTP request's ``X-Workspace`` header as the requested workspace."""
    header = WORKSPACE_HEADER.lower().encode("latin-1")

    async def with_workspace(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        value = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == header), None)
        token = requested.set(value)
        try:
            await app(scope, receive, send)
        finally:
            requested.reset(token)

    return with_workspace


class WorkspaceMiddleware:
    """MCP's message middleware: a tool call runs in the workspace its HTTP request's
    ``X-Workspace`` header named (over stdio, the default one)."""

    async def __call__(self, ctx: Any, call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        token = requested.set(headers.get(WORKSPACE_HEADER) if headers is not None else None)
        try:
            return await call_next(ctx)
        finally:
            requested.reset(token)
