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

At most ``max_open`` named workspaces stay open (the default one is always open): opening one
more closes the least recently used *idle* one, which no request or MCP call is using (each
holds its workspace, ``Workspaces.using``) and whose queue holds no job. If every open one is
busy, one more opens beyond the limit until some falls idle. A closed workspace reopens on its
next request, over the same working dir.
"""
from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import hashlib
import logging
import os
import re
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, AsyncIterator, Optional

from graphrag.errors import InvalidInputError, WorkspaceNotFound
from graphrag.server import DEFAULT_MAX_OPEN_WORKSPACES
from graphrag.server.jobs import JOBS_FILE
from graphrag.server.security import ASGIApp, Receive, Send
from graphrag.server.service import JOBS_DIR, GraphService

if TYPE_CHECKING:
    from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

logger = logging.getLogger(__name__)

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
    defined here are the requested workspace's service's (``service.query(...)``).

    ``max_open``: the named workspaces kept open at most, while idle (see the module's doc)."""

    def __init__(self, default: GraphService, max_open: int = DEFAULT_MAX_OPEN_WORKSPACES) -> None:
        if max_open < 1:
            raise InvalidInputError(f"max_open must be 1 or more, not {max_open}")
        self.default = default
        self.max_open = max_open
        self._named: OrderedDict[str, GraphService] = OrderedDict()  # least recently used first
        self._users: dict[str, int] = {}  # the requests and MCP calls using each workspace now
        self._closing: dict[str, asyncio.Task] = {}  # a closed workspace's service, stopping
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
            self._named.move_to_end(name)
            return service
        folder = self._folder(name)
        if not os.path.isdir(folder) and (not create or self.default.read_only):
            raise WorkspaceNotFound(f"no workspace {name!r} (a write creates it)", missing=[name])
        return self._open(name)

    @property
    def open_names(self) -> list[str]:
        """The named workspaces open now, least recently used first."""
        return list(self._named)

    @contextlib.asynccontextmanager
    async def using(self, name: Optional[str]) -> AsyncIterator[None]:
        """Workspace ``name`` as the requested one while a request or MCP call is served; its
        service is not closed meanwhile (a name closing is first closed, then reopened)."""
        token = requested.set(name)
        if name is not None:
            self._users[name] = self._users.get(name, 0) + 1
        try:
            closing = self._closing.get(name) if name is not None else None
            if closing is not None:
                await asyncio.wait([closing])  # its outcome is logged by the close itself
            yield
        finally:
            requested.reset(token)
            if name is not None:
                self._users[name] -= 1
                if not self._users[name]:
                    del self._users[name]
                    self._close_idle()

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
        if self._closing:
            await asyncio.wait(list(self._closing.values()))
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
            self._close_idle()
        return service

    def _close_idle(self) -> None:
        """Close the least recently used idle named workspaces beyond ``max_open``."""
        excess = len(self._named) - self.max_open
        for name in [n for n in self._named if self._idle(n)][:max(excess, 0)]:
            self._close(name, self._named.pop(name))

    def _idle(self, name: str) -> bool:
        """No request or MCP call uses the workspace, and its queue holds no job."""
        return name not in self._users and all(j.status not in ("queued", "running")
                                               for j in self._named[name].jobs.all())

    def _close(self, name: str, service: GraphService) -> None:
        closing = asyncio.get_running_loop().create_task(_stopped(name, service), name=f"graphrag-close-{name}")
        self._closing[name] = closing

        def forget(task: asyncio.Task) -> None:
            if self._closing.get(name) is task:
                del self._closing[name]

        closing.add_done_callback(forget)


async def _stopped(name: str, service: GraphService) -> None:
    """Stop a closed workspace's service; a failure is logged, not raised (no request waits on it)."""
    try:
        await service.stop()
    except Exception:
        logger.warning("closing workspace %r failed", name, exc_info=True)


def _has_kept_jobs(folder: str) -> bool:
    """Whether a stopped server left jobs to run in this working dir (request files beside the job list)."""
    try:
        return any(f != JOBS_FILE for f in os.listdir(os.path.join(folder, JOBS_DIR)))
    except FileNotFoundError:
        return False


def selecting_workspace(app: ASGIApp, workspaces: Workspaces) -> ASGIApp:
    """``app`` with each HTTP request's ``X-Workspace`` header as the requested workspace (of ``workspaces``)."""
    header = WORKSPACE_HEADER.lower().encode("latin-1")

    async def with_workspace(scope: dict, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        value = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == header), None)
        async with workspaces.using(value):
            await app(scope, receive, send)

    return with_workspace


class WorkspaceMiddleware:
    """MCP's message middleware: a tool call runs in the workspace its HTTP request's
    ``X-Workspace`` header named (over stdio, the default one), of ``workspaces``."""

    def __init__(self, workspaces: Workspaces) -> None:
        self.workspaces = workspaces

    async def __call__(self, ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        headers = getattr(getattr(ctx, "request", None), "headers", None)
        async with self.workspaces.using(headers.get(WORKSPACE_HEADER) if headers is not None else None):
            return await call_next(ctx)
