"""A blocking client of ``phasedb serve``."""

from __future__ import annotations

import socket
import struct
from typing import Any, Callable, Iterable, List, Optional, Sequence, Tuple, TypeVar, Union

from . import wire
from .wire import Column, TableInfo, Value

T = TypeVar("T")

#: An operation of a transaction, as :meth:`wire.Writer.op` encodes it.
Op = Tuple[Any, ...]


class Error(Exception):
    """The server refused a request: ``kind`` is one of :data:`wire.ERROR_KINDS`."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class Aborted(Exception):
    """A transaction did not commit; nothing of it was applied. ``cause`` is one of
    :data:`wire.ABORT_CAUSES`; ``Conflict`` and ``Stale`` are worth a retry."""

    def __init__(self, cause: str, message: str) -> None:
        super().__init__(f"aborted ({cause}): {message}")
        self.cause = cause
        self.message = message

    @property
    def retryable(self) -> bool:
        """Whether running the transaction again may succeed."""
        return self.cause in ("Conflict", "Stale")


def _check(resp: Tuple[Any, ...]) -> Tuple[Any, ...]:
    if resp[0] == "Error":
        raise Error(resp[1], resp[2])
    if resp[0] == "Aborted":
        raise Aborted(resp[1], resp[2])
    return resp


class Connection:
    """One connection to a server. Requests may be pipelined with :meth:`pipeline`."""

    def __init__(
        self, host: str = "127.0.0.1", port: int = 7600, token: Optional[str] = None,
        timeout: Optional[float] = 30.0,
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._buf = bytearray()
        self._next_id = 1
        self.sock.sendall(wire.hello(token))
        ok, info = wire.welcome(self._read_frame())
        if not ok:
            self.sock.close()
            raise Error(info[0], info[1])
        #: The server's protocol version, concurrency-control protocol and engine threads.
        self.version, self.protocol, self.threads = info

    def close(self) -> None:
        """Closes the connection (open interactive transactions are dropped by the server)."""
        self.sock.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _read_frame(self) -> bytes:
        while True:
            if len(self._buf) >= 4:
                (n,) = struct.unpack_from(">I", self._buf)
                if len(self._buf) >= 4 + n:
                    payload = bytes(self._buf[4 : 4 + n])
                    del self._buf[: 4 + n]
                    return payload
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("the server closed the connection")
            self._buf += chunk

    def pipeline(self, requests: Sequence[Union[str, Tuple[Any, ...]]]) -> List[Tuple[Any, ...]]:
        """Sends every request, then reads their responses, in order. Errors and aborts are
        returned as responses (``("Error", kind, message)``, ``("Aborted", cause, message)``)."""
        first = self._next_id
        out = bytearray()
        for r in requests:
            out += wire.request(self._next_id, r)
            self._next_id += 1
        self.sock.sendall(out)
        responses = []
        for i in range(len(requests)):
            req_id, resp = wire.response(self._read_frame())
            if req_id != first + i:
                _check(resp)
                raise ConnectionError(f"response {req_id} to request {first + i}")
            responses.append(resp)
        return responses

    def call(self, request: Union[str, Tuple[Any, ...]]) -> Tuple[Any, ...]:
        """Sends one request and returns its response; raises :class:`Error` or
        :class:`Aborted`."""
        return _check(self.pipeline([request])[0])

    def ping(self) -> float:
        """Health check; returns the server's uptime in seconds."""
        return float(self.call("Ping")[1])

    def stats(self) -> dict:
        """The engine's counters: committed, conflicts, aborted, latency percentiles."""
        return dict(self.call("Stats")[1])

    def create_table(
        self, name: str, columns: Iterable[Column], capacity: int = 1024, ordered: bool = False
    ) -> TableInfo:
        """Creates a table; ``ordered`` adds the index range scans need."""
        info = TableInfo(0, name, list(columns), capacity, ordered)
        return self.call(("CreateTable", info))[1]  # type: ignore[no-any-return]

    def list_tables(self) -> List[TableInfo]:
        """Every table."""
        return list(self.call("ListTables")[1])

    def describe_table(self, name: str) -> TableInfo:
        """Table ``name``."""
        return self.call(("DescribeTable", name))[1]  # type: ignore[no-any-return]

    def drop_table(self, name: str) -> None:
        """Drops table ``name``."""
        self.call(("DropTable", name))

    def execute(self, ops: Sequence[Op]) -> List[Tuple[str, Any]]:
        """Runs ``ops`` as one transaction, atomically, in one round trip; returns one result per
        operation: ``("Row", values or None)``, ``("Done", bool)`` or ``("Rows", [(key,
        values)])``."""
        return list(self.call(("Execute", list(ops)))[1])

    def call_procedure(self, name: str, args: Sequence[Value]) -> List[Value]:
        """Runs a stored procedure (``ycsb``, ``tpcc.new_order``, ...; see the protocol doc)."""
        return list(self.call(("Call", name, list(args)))[1])

    def begin(self) -> "Transaction":
        """Starts an interactive transaction."""
        return Transaction(self, self.call("Begin")[1])

    def transact(self, body: Callable[["Transaction"], T], attempts: int = 100) -> T:
        """Runs ``body(tx)`` as an interactive transaction and commits it, running it again when
        the server reports a conflict or stale reads (up to ``attempts`` times)."""
        for attempt in range(attempts):
            tx = self.begin()
            try:
                result = body(tx)
                tx.commit()
                return result
            except Aborted as e:
                if not e.retryable or attempt == attempts - 1:
                    raise
            finally:
                tx.close()
        raise AssertionError("unreachable")


class Transaction:
    """An interactive transaction: reads are answered at once, writes are buffered by the server
    and applied at :meth:`commit`, which checks that every read still holds."""

    def __init__(self, conn: Connection, txn: int) -> None:
        self.conn = conn
        self.txn = txn
        self.open = True

    def statement(self, op: Op) -> Tuple[str, Any]:
        """Runs one statement; an :class:`Aborted` ends the transaction."""
        try:
            return self.conn.call(("Statement", self.txn, op))[1]  # type: ignore[no-any-return]
        except (Aborted, Error):
            self.open = False
            raise

    def get(self, table: int, key: int, columns: Sequence[int] = ()) -> Optional[List[Value]]:
        """Columns ``columns`` (all if empty) of row ``key``, or ``None``."""
        return self.statement(("Get", table, key, list(columns)))[1]  # type: ignore[no-any-return]

    def update(self, table: int, key: int, values: Sequence[Tuple[int, Value]]) -> bool:
        """Overwrites columns of row ``key``; False if there is no such row."""
        return bool(self.statement(("Update", table, key, list(values)))[1])

    def put(self, table: int, key: int, values: Sequence[Tuple[int, Value]]) -> bool:
        """Updates row ``key`` or inserts it; True if it existed."""
        return bool(self.statement(("Put", table, key, list(values)))[1])

    def delete(self, table: int, key: int) -> bool:
        """Deletes row ``key``; False if there is no such row."""
        return bool(self.statement(("Delete", table, key))[1])

    def commit(self) -> None:
        """Commits; raises :class:`Aborted` (nothing applied) if a read no longer holds."""
        self.open = False
        self.conn.call(("Commit", self.txn))

    def rollback(self) -> None:
        """Applies nothing."""
        if self.open:
            self.open = False
            self.conn.call(("Rollback", self.txn))

    def close(self) -> None:
        """Rolls back unless committed or ended."""
        if self.open:
            self.rollback()
