"""PostgreSQL as the storage of a working dir: the connection every PostgreSQL store shares,
and the KV store (one JSONB table per namespace).

Every store of one ``GraphRAG`` (one config) shares a :class:`PostgresDatabase`: during a
write they all write into the one transaction it holds, begun at the first
``index_start_callback`` (or first write) under a transaction-scoped advisory lock on the
workspace, so writers queue and readers never wait; ``index_commit_callback`` commits it
and ``index_abort_callback`` rolls it back. A killed writer's connection drops, and the
server rolls back and releases the lock itself.

Table names are built from the validated workspace and namespace; every value travels
as a query parameter.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, AsyncIterator, ClassVar, Optional, Union

from graphrag.config import GraphRAGConfig
from graphrag.errors import StoreUnavailableError, WorkingDirLockedError

from .base import BaseKVStorage, PreparedWrite
from .db_common import require_extra, validated_name, workspace_of

if TYPE_CHECKING:
    from psycopg import AsyncConnection, sql
    from psycopg_pool import AsyncConnectionPool

    from graphrag.schema import JSONValue

DSN_ENV = "GRAPHRAG_POSTGRES_DSN"


# Connections per event loop's pool; one of them is kept for a write's transaction.
POOL_SIZE = 8


class PostgresDatabase:
    """One database and workspace as the stores of one config see it: a pool per event loop,
    and during a write the one connection whose transaction every store writes into."""

    def __init__(self, dsn: str, workspace: str, lock_timeout: float, connect_timeout: float = 10.0) -> None:
        require_extra("postgres", "psycopg", "psycopg_pool")
        self._dsn = dsn  # a secret: never logged or put in a message
        self.workspace = workspace
        # How long a server that does not answer is waited for before it counts as down.
        self._connect_timeout = max(1.0, float(connect_timeout))
        self._lock_timeout_ms = max(1, int(lock_timeout * 1000))
        self._pools: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Future]" = (
            weakref.WeakKeyDictionary())
        self._turns: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]" = (
            weakref.WeakKeyDictionary())
        self._write: Optional[AsyncConnection] = None
        self._write_turn = asyncio.Lock()  # replaced on the loop of each write
        self._stamped: tuple[Any, str] = (None, "")  # (write connection, commit id) last stamped
        self._write_started: Optional[asyncio.Future] = None
        self._ready: set[str] = set()
        # Idle connections of a closed event loop's pool, taken up by the next loop's pool: each
        # synchronous call runs on a loop of its own, and connecting anew cost ~5-10 ms a query.
        self._parked: list[Any] = []
        weakref.finalize(self, _finish, self._parked)

    def table(self, namespace: str, kind: str) -> str:
        return f"graphrag_{self.workspace}_{validated_name('namespace', namespace)}_{kind}"

    def identifier(self, name: str) -> sql.Identifier:
        from psycopg import sql

        return sql.Identifier(name)

    async def _pool(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        opening = self._pools.get(loop)
        if opening is None:
            opening = self._pools[loop] = asyncio.ensure_future(self._open_pool())
        try:
            return await asyncio.shield(opening)
        except BaseException:
            if opening.done():
                self._pools.pop(loop, None)  # a failed open is not kept
            raise

    async def _open_pool(self) -> AsyncConnectionPool:
        from psycopg import AsyncConnection
        from psycopg_pool import AsyncConnectionPool

        # Weak: a parked connection's class must not keep its database alive, or the finalizer
        # that closes parked connections would never run.
        adopt = weakref.WeakMethod(self._adopt)

        class Connection(AsyncConnection):
            """A parked connection if one is still good, else a new one."""

            @classmethod
            async def connect(cls, conninfo: str = "", **kwargs: Any) -> Any:  # type: ignore[override]
                database_adopt = adopt()
                return (database_adopt and database_adopt()) or await super().connect(conninfo, **kwargs)

        timeout = self._connect_timeout
        pool = AsyncConnectionPool(self._dsn, min_size=1, max_size=POOL_SIZE, open=False, timeout=timeout,
                                   connection_class=Connection,
                                   kwargs={"autocommit": True, "connect_timeout": int(timeout)})
        try:
            await pool.open(wait=True, timeout=timeout)
        except BaseException:
            await pool.close()
            raise
        return pool

    def unreachable(self, store: str) -> StoreUnavailableError:
        """The error for a server that cannot be reached (it names no host: the DSN is a secret)."""
        return StoreUnavailableError(
            f"cannot reach PostgreSQL for the {store} store (workspace {self.workspace!r}): check that the server "
            f"runs and {DSN_ENV} or storage_options['dsn']", store=store)

    async def close(self) -> None:
        """Close this event loop's pool (a write in progress is rolled back first), parking its
        idle connections for the next loop's."""
        await self.abort()
        opening = self._pools.pop(asyncio.get_running_loop(), None)
        if opening is not None and opening.done() and not opening.exception():
            pool = opening.result()
            while pool.get_stats().get("pool_available", 0) > 0 and len(self._parked) < 8:
                self._parked.append(await pool.getconn())  # taken out: closing the pool leaves it open
            await pool.close()

    def forget_parked(self) -> list[Any]:
        """The parked connections, no longer used or closed by this database (a forked child's)."""
        parked, self._parked[:] = list(self._parked), []
        return parked

    def _adopt(self) -> Optional[AsyncConnection]:
        """A parked connection that is idle and whose server has not gone (its socket has nothing
        to read: a server that closed it would have sent EOF), ready for the running loop."""
        import select

        from psycopg.pq import TransactionStatus

        while self._parked:
            conn = self._parked.pop()
            try:
                usable = (not conn.closed and conn.pgconn.transaction_status == TransactionStatus.IDLE
                          and not select.select([conn.pgconn.socket], [], [], 0)[0])
            except Exception:
                usable = False
            if usable:
                # psycopg serialises a connection's statements with an asyncio lock, which binds
                # to a loop only when a task waits on it; no task does, since a pooled connection
                # serves one task and the write's one statement at a time (``_write_turn``).
                return conn
            conn.pgconn.finish()
        return None

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[Any]:
        """The write's connection during a write (its own writes visible), else a pooled one."""
        if self._write is not None:
            async with self._write_turn:
                yield self._write
            return
        async with self.autocommit() as conn:
            yield conn

    @contextlib.asynccontextmanager
    async def autocommit(self) -> AsyncIterator[Any]:
        """A pooled connection outside the write: what it writes is durable at once.

        Callers beyond the pool's size wait their turn here, with no deadline: thousands of the
        engine's own statements at once (an extraction's cache look-ups) are a queue, not a server
        that cannot be reached, which is what the pool's timeout tells."""
        pool = await self._pool()
        turns = self._turns.setdefault(asyncio.get_running_loop(), asyncio.Semaphore(POOL_SIZE - 1))
        async with turns, pool.connection() as conn:
            yield conn

    async def begin_write(self) -> None:
        """Begin the write (taking the writer lock) if it has not begun."""
        if self._write is None:
            if self._write_started is None or self._write_started.done() and self._write_started.exception():
                self._write_started = asyncio.ensure_future(self._begin_write())
            await asyncio.shield(self._write_started)

    @contextlib.asynccontextmanager
    async def writing(self) -> AsyncIterator[Any]:
        """The write's connection, beginning the write if needed; the stores of a write take
        turns on it, one statement (or pipeline) at a time."""
        await self.begin_write()
        async with self._write_turn:
            yield self._write

    async def _begin_write(self) -> None:
        from psycopg import errors

        pool = await self._pool()
        conn = await pool.getconn()
        try:
            await conn.execute("BEGIN")
            await conn.execute("SELECT set_config('lock_timeout', %s, true)", (f"{self._lock_timeout_ms}ms",))
            await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))",
                               (f"graphrag writer {self.workspace}",))
            await conn.execute("SELECT set_config('lock_timeout', '0', true)")
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await conn.execute("ROLLBACK")
            await pool.putconn(conn)
            if isinstance(exc, errors.LockNotAvailable):
                raise WorkingDirLockedError(
                    f"another process is writing to PostgreSQL workspace {self.workspace!r}; gave up after "
                    f"{self._lock_timeout_ms / 1000:g}s. Wait for it to finish or raise lock_timeout.") from None
            raise
        self._write_turn = asyncio.Lock()
        self._write = conn

    @property
    def writing_now(self) -> bool:
        return self._write is not None

    async def commit(self) -> None:
        await self._end_write("COMMIT")

    async def abort(self) -> None:
        await self._end_write("ROLLBACK")

    async def _end_write(self, statement: str) -> None:
        conn, self._write, self._write_started = self._write, None, None
        if conn is None:
            return
        try:
            async with self._write_turn:
                await conn.execute(statement)
        except Exception:
            if statement == "COMMIT" or not conn.broken:
                raise  # a lost connection's transaction is rolled back by the server already
        finally:
            opening = self._pools.get(asyncio.get_running_loop())
            if opening is not None and opening.done():
                await opening.result().putconn(conn)

    async def ensure_table(self, name: str, ddl: list[Any]) -> None:
        """Create a table (and its indexes) on first use, once per process; concurrent
        creators queue on an advisory lock so ``IF NOT EXISTS`` cannot race."""
        if name in self._ready:
            return
        async with self.autocommit() as conn:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", ("graphrag ddl",))
                for statement in ddl:
                    await conn.execute(statement)
        self._ready.add(name)

    async def stamp(self, commit_id: str) -> None:
        """Record ``commit_id`` in the write's transaction, so that after a crash the working dir's
        manifest can tell whether this transaction committed (:meth:`committed`)."""
        from psycopg import sql

        if self._stamped == (self._write, commit_id):
            return  # the stores of one write share its transaction
        name = self.table("commits", "log")
        await self.ensure_table(name, [sql.SQL("CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY)").format(
            self.identifier(name))])
        async with self.writing() as conn:
            await conn.execute(sql.SQL("INSERT INTO {} (id) VALUES (%s) ON CONFLICT DO NOTHING").format(
                self.identifier(name)), (commit_id,))
        self._stamped = (self._write, commit_id)

    def committed(self, commit_id: str) -> bool:
        """Whether a transaction stamped ``commit_id`` committed (checked without an event loop)."""
        from psycopg import sql

        name = self.table("commits", "log")
        if self.sync_query("SELECT to_regclass(%s)", (name,), store="kv")[0][0] is None:
            return False
        return bool(self.sync_query(sql.SQL("SELECT 1 FROM {} WHERE id = %s").format(self.identifier(name)),
                                    (commit_id,), store="kv"))

    def sync_query(self, query: Union[str, sql.SQL, sql.Composed], params: tuple = (), store: str = "vector"
                   ) -> list[tuple]:
        """One statement on a short-lived synchronous connection (checks made before a loop runs,
        and recovery); a server out of reach is :class:`StoreUnavailableError` naming ``store``."""
        import psycopg

        try:
            with psycopg.connect(self._dsn, autocommit=True, connect_timeout=int(self._connect_timeout)) as conn:
                return conn.execute(query, params).fetchall()
        except psycopg.OperationalError:
            raise self.unreachable(store) from None


def _finish(connections: list[Any]) -> None:
    """Close parked connections (no event loop needed: libpq closes the socket)."""
    while connections:
        connections.pop().pgconn.finish()


_databases: dict[int, PostgresDatabase] = {}
# A forked child shares its parent's sockets: it must neither use nor close the parent's parked
# connections (closing one sends the server a goodbye on the parent's session), so it keeps them.
_inherited: list[Any] = []


def _forget_parked_in_child() -> None:
    for database in _databases.values():
        _inherited.extend(database.forget_parked())


os.register_at_fork(after_in_child=_forget_parked_in_child)


def database_for(config: GraphRAGConfig) -> PostgresDatabase:
    """The database shared by every store opened with this config object."""
    key = id(config)
    database = _databases.get(key)
    if database is None:
        dsn = config.storage_options.get("dsn") or os.environ.get(DSN_ENV) or ""  # "": libpq's PG* variables
        database = _databases[key] = PostgresDatabase(dsn, workspace_of(config), config.lock_timeout,
                                                      config.storage_options.get("connect_timeout", 10.0))
        weakref.finalize(config, _databases.pop, key, None)
    return database


@dataclass
class PostgresStore:
    """What the three PostgreSQL stores share: their database, and taking part in its write."""

    # Upserts bypass the write and are durable at once (the LLM response cache).
    durable: bool = field(default=False, kw_only=True)
    store_kind: ClassVar[str] = "kv"  # what StoreUnavailableError.store says

    @property
    def db(self) -> PostgresDatabase:
        return database_for(self.global_config)  # type: ignore[attr-defined]

    def _use_tables(self, **tables: str) -> None:
        """The table names ``{name}`` placeholders in this store's statements stand for."""
        self._tables = {key: self.db.identifier(name) for key, name in tables.items()}
        self._statements: dict[str, str] = {}

    def _sql(self, query: str) -> str:
        """``query`` with its table names filled in, composed once per store (composing costs
        more than a small query's round trip)."""
        statement = self._statements.get(query)
        if statement is None:
            from psycopg import sql

            statement = self._statements[query] = sql.SQL(query).format(**self._tables).as_string(None)
        return statement

    async def _ready(self) -> None:
        """Create the store's tables if this process has not yet."""

    @contextlib.asynccontextmanager
    async def _reaching(self) -> AsyncIterator[None]:
        """A lost or refused connection becomes :class:`StoreUnavailableError` naming this store."""
        from psycopg import OperationalError
        from psycopg_pool import PoolTimeout

        try:
            yield
        except (OperationalError, PoolTimeout, StoreUnavailableError):
            raise self.db.unreachable(self.store_kind) from None

    async def reachable(self) -> None:
        async with self._reaching():
            async with self.db.connection() as conn:
                await conn.execute("SELECT 1")

    async def _rows(self, query: str, params: tuple = ()) -> list[tuple]:
        async with self._reaching():
            await self._ready()
            async with self.db.connection() as conn:
                return await (await conn.execute(self._sql(query), params)).fetchall()  # type: ignore[arg-type]

    async def _execute(self, query: str, params: tuple = (), upsert: bool = False) -> None:
        async with self._reaching():
            await self._ready()
            async with self._writing(upsert) as conn:
                await conn.execute(self._sql(query), params)

    @contextlib.asynccontextmanager
    async def _writing(self, upsert: bool = False) -> AsyncIterator[Any]:
        """Where a write goes: the write's transaction; a durable store's upserts, straight in."""
        if self.durable and upsert:
            async with self.db.autocommit() as conn:
                yield conn
        else:
            async with self.db.writing() as conn:
                yield conn

    async def index_start_callback(self) -> None:
        async with self._reaching():
            await self.db.begin_write()

    async def prepare_commit(self, commit_id: str) -> Optional[PreparedWrite]:
        """The write's transaction, stamped with ``commit_id`` (every store of it says so)."""
        if not self.db.writing_now:
            return None
        async with self._reaching():
            await self.db.stamp(commit_id)
        return PreparedWrite()

    def finish_commit(self, commit_id: str, redo: Optional[bytes]) -> bool:
        return self.db.committed(commit_id)

    async def index_commit_callback(self) -> None:
        async with self._reaching():
            await self.db.commit()

    async def index_abort_callback(self) -> None:
        await self.db.abort()

    async def close(self) -> None:
        await self.db.close()


def dumps(value: JSONValue) -> str:
    return json.dumps(value, ensure_ascii=False)


@dataclass
class PostgresKVStorage(PostgresStore, BaseKVStorage):
    """A namespace as a table of ``id text primary key, value jsonb``.

    A ``cached`` store (one queries read by record: reports, chunks) keeps the records it
    read, valid while the table's version, bumped in every write's transaction, stays the
    same: a global query reads every report, and decoding them again each time would cost
    more than the rest of the query.
    """

    cached: bool = field(default=False, kw_only=True)

    def __post_init__(self) -> None:
        self._name = self.db.table(self.namespace, "kv")
        self._use_tables(table=self._name, versions=f"graphrag_{self.db.workspace}_versions")
        self._cache: dict[str, Any] = {}
        self._keys: Optional[list[str]] = None  # every id, in order, at the cached version
        self._joining: Optional[tuple[asyncio.AbstractEventLoop, set[str], asyncio.Future]] = None
        self._cache_version: Optional[int] = None

    @classmethod
    def options_for(cls, *, read_by_record: bool = False, durable_upserts: bool = False) -> dict[str, Any]:
        return {"durable": durable_upserts, "cached": read_by_record and not durable_upserts}

    async def _ready(self) -> None:
        from psycopg import sql

        await self.db.ensure_table(self._name, [
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (id text PRIMARY KEY, value jsonb NOT NULL)").format(
                self._tables["table"]),
            sql.SQL("CREATE TABLE IF NOT EXISTS {} (name text PRIMARY KEY, version bigint NOT NULL)").format(
                self._tables["versions"])])

    async def _execute(self, query: str, params: tuple = (), upsert: bool = False) -> None:
        await super()._execute(query, params, upsert)
        if self.cached:
            await super()._execute("INSERT INTO {versions} (name, version) VALUES (%s, 1) ON CONFLICT (name) "
                                   "DO UPDATE SET version = {versions}.version + 1", (self._name,))

    _KEYS = "SELECT id FROM {table} ORDER BY id"

    async def _version_and_rows(self, query: Optional[str], params: tuple = ()) -> tuple[int, list[tuple]]:
        """The table's version and then ``query``'s rows, sent together in one round trip (a
        pipeline): the rows are at least as new as the version, never older."""
        async with self._reaching():
            await self._ready()
            async with self.db.connection() as conn:
                async with conn.pipeline():
                    version = await conn.execute(self._sql("SELECT version FROM {versions} WHERE name = %s"),
                                                 (self._name,))
                    rows = await conn.execute(self._sql(query), params) if query else None  # type: ignore[arg-type]
                found = await version.fetchall()
                return (found[0][0] if found else 0), (await rows.fetchall() if rows is not None else [])

    def _serving_cache(self) -> bool:
        """Whether kept records may be served: a cached store, not during a write (it sees its own changes)."""
        return self.cached and not self.db.writing_now

    def _at_version(self, version: int) -> bool:
        """Drop what was kept if the table moved on since; True if it had not."""
        if version == self._cache_version:
            return True
        self._cache, self._keys, self._cache_version = {}, None, version
        return False

    async def all_keys(self) -> list[str]:
        if not self._serving_cache():
            return [k for (k,) in await self._rows(self._KEYS)]
        # Kept with the records while the version holds: a global query lists every report.
        kept = self._keys is not None
        version, rows = await self._version_and_rows(None if kept else self._KEYS)
        if self._at_version(version) and kept:
            return list(self._keys)  # type: ignore[arg-type]
        if kept:  # moved on: the keys were not read with the version
            rows = await self._rows(self._KEYS)
        self._keys = [k for (k,) in rows]
        return list(self._keys)

    async def get_by_id(self, id: str) -> Optional[Any]:
        """Reads asked for together (a global query's map calls each look up the LLM cache) share
        one statement: the first starts a read that waits one turn of the event loop for the rest."""
        loop = asyncio.get_running_loop()
        if self._joining is None or self._joining[0] is not loop or self._joining[2].done():
            ids: set[str] = set()
            self._joining = (loop, ids, asyncio.ensure_future(self._read_joined(ids)))
        _, ids, read = self._joining
        ids.add(id)
        return (await asyncio.shield(read)).get(id)

    async def _read_joined(self, ids: set[str]) -> dict[str, Any]:
        await asyncio.sleep(0)  # the other reads asked for in this turn join
        if self._joining is not None and self._joining[1] is ids:
            self._joining = None
        return dict(await self._rows("SELECT id, value FROM {table} WHERE id = ANY(%s)", (list(ids),)))

    async def get_by_ids(self, ids: list[str], fields: Optional[set[str]] = None) -> list[Optional[Any]]:
        if not ids:
            return []
        if self._serving_cache():
            # Those not kept are read with the version, in one round trip; if it moved on, the
            # ones that were kept are read again.
            missing = [i for i in dict.fromkeys(ids) if i not in self._cache]
            version, rows = await self._version_and_rows(
                "SELECT id, value FROM {table} WHERE id = ANY(%s)" if missing else None, (missing,))
            if not self._at_version(version):
                read = set(missing)
                stale = [i for i in dict.fromkeys(ids) if i not in read]
                if stale:
                    rows += await self._rows("SELECT id, value FROM {table} WHERE id = ANY(%s)", (stale,))
                    missing += stale
            self._cache.update(dict.fromkeys(missing))
            self._cache.update(rows)
            found = {i: self._cache[i] for i in ids if self._cache[i] is not None}
        else:
            found = dict(await self._rows("SELECT id, value FROM {table} WHERE id = ANY(%s)", (list(ids),)))
        if fields is not None:
            found = {k: {f: v for f, v in r.items() if f in fields} for k, r in found.items()}
        return [found.get(i) for i in ids]

    async def filter_keys(self, keys: list[str]) -> set[str]:
        if not keys:
            return set()
        stored = {k for (k,) in await self._rows("SELECT id FROM {table} WHERE id = ANY(%s)", (list(keys),))}
        return set(keys) - stored

    async def count(self) -> int:
        return (await self._rows("SELECT count(*) FROM {table}"))[0][0]

    async def upsert(self, data: dict[str, Any]) -> None:
        if data:
            await self._execute(
                "INSERT INTO {table} (id, value) SELECT id, value::jsonb FROM unnest(%s::text[], %s::text[]) "
                "AS u(id, value) ON CONFLICT (id) DO UPDATE SET value = EXCLUDED.value",
                (list(data), [dumps(v) for v in data.values()]), upsert=True)

    async def delete(self, ids: list[str]) -> None:
        if ids:
            await self._execute("DELETE FROM {table} WHERE id = ANY(%s)", (list(ids),))

    async def drop(self) -> None:
        await self._execute("DELETE FROM {table}")
