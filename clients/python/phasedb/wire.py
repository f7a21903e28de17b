"""Encoding and decoding of the phasedb client protocol (docs/wire-protocol.md).

Messages are postcard encodings of the Rust types in ``crates/proto``: varint integers (zigzag
for signed ones), a varint variant index before an enum's fields, a varint length before
sequences, strings and byte strings, little-endian ``f64``. Messages are plain Python values:
an enum variant is a tuple ``(name, field, ...)`` or the bare name when it has no fields.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any, List, Optional, Sequence, Tuple, Union

MAGIC = b"PHDC"
VERSION = 1

COLUMN_KINDS = ["U64", "I64", "F64", "Fixed", "Bounded", "Tuple", "TopK"]
ARITH = ["Add", "Max", "Min", "Mult"]
ORDERED = ["OPut", "TopK"]
ABORT_CAUSES = [
    "Conflict",
    "Stale",
    "DuplicateKey",
    "Invalid",
    "UserAbort",
    "ShuttingDown",
    "NotDurable",
]
ERROR_KINDS = [
    "Malformed",
    "TooLarge",
    "Version",
    "Unauthorized",
    "NoSuchTable",
    "TableExists",
    "BadTable",
    "NoSuchTransaction",
    "BadCall",
    "ShuttingDown",
]

#: A column value: ``int`` columns take ``("U64", n)`` / ``("I64", n)``, floats ``("F64", x)``,
#: byte columns ``("Bytes", b"...")``; ``Tuple`` and ``TopK`` columns read as
#: ``("Tuples", [(order, core, b"...")])`` (best first) and are written by ``Ordered`` only.
Value = Tuple[str, Any]


class DecodeError(Exception):
    """Bytes that are not a valid message."""


# The group byte of a column whose group the server chooses (the protocol's AUTO_GROUP).
AUTO_GROUP = 0xFF


@dataclass
class Column:
    """A column of a table: name, kind (``"U64"``, ``"I64"``, ``"F64"``, ``("Fixed", n)``,
    ``("Bounded", n)``, ``("Tuple", n)``: an ordered tuple of up to n bytes, ``("TopK", k, n)``: the k
    best of them) and column group (columns of one group share a version). A table whose columns
    all leave ``group`` as ``None`` gets automatic groups: the server groups the columns by how
    transactions use them; give every column a group, or none."""

    name: str
    kind: Union[str, Tuple[Any, ...]]
    group: Optional[int] = None


@dataclass
class TableInfo:
    """A table as the server knows it; operations name it by ``id``."""

    id: int
    name: str
    columns: List[Column] = field(default_factory=list)
    capacity: int = 0
    ordered: bool = False


class Writer:
    """Appends postcard-encoded values to a buffer."""

    def __init__(self) -> None:
        self.buf = bytearray()

    def varint(self, n: int) -> None:
        if n < 0:
            raise ValueError("varint of a negative number")
        while True:
            b = n & 0x7F
            n >>= 7
            if n:
                self.buf.append(b | 0x80)
            else:
                self.buf.append(b)
                return

    def i64(self, n: int) -> None:
        self.varint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)

    def f64(self, x: float) -> None:
        self.buf += struct.pack("<d", x)

    def bool(self, b: bool) -> None:
        self.buf.append(1 if b else 0)

    def bytes(self, b: bytes) -> None:
        self.varint(len(b))
        self.buf += b

    def str(self, s: str) -> None:
        self.bytes(s.encode())

    def value(self, v: Value) -> None:
        kind, x = v
        if kind == "U64":
            self.varint(0)
            self.varint(int(x))
        elif kind == "I64":
            self.varint(1)
            self.i64(int(x))
        elif kind == "F64":
            self.varint(2)
            self.f64(float(x))
        elif kind == "Bytes":
            self.varint(3)
            self.bytes(bytes(x))  # type: ignore[arg-type]
        else:
            raise ValueError(f"unknown value kind {kind!r}")

    def values(self, vals: Sequence[Tuple[int, Value]]) -> None:
        self.varint(len(vals))
        for col, v in vals:
            self.varint(col)
            self.value(v)

    def columns(self, cols: Sequence[int]) -> None:
        self.varint(len(cols))
        for c in cols:
            self.varint(c)

    def column_kind(self, kind: Union[str, Tuple[Any, ...]]) -> None:
        if isinstance(kind, tuple) and kind[0] == "TopK":
            _, k, n = kind
            self.varint(COLUMN_KINDS.index("TopK"))
            self.buf.append(k)
            self.varint(n)
        elif isinstance(kind, tuple):
            name, n = kind
            self.varint(COLUMN_KINDS.index(name))
            self.varint(n)
        else:
            self.varint(COLUMN_KINDS.index(kind))

    def op(self, op: Tuple[Any, ...]) -> None:
        """Encodes an operation: ``("Get", table, key, columns)``, ``("Insert"|"Update"|"Put",
        table, key, [(column, value)])``, ``("Delete", table, key)``, ``("Scan", table, lo, hi,
        limit, columns)``, ``("Apply", table, key, column, arith, arg, commute)`` or ``("Ordered",
        table, key, column, "OPut" | "TopK", order, b"value")``."""
        name = op[0]
        if name == "Get":
            self.varint(0)
            self.varint(op[1])
            self.varint(op[2])
            self.columns(op[3])
        elif name in ("Insert", "Update", "Put"):
            self.varint({"Insert": 1, "Update": 2, "Put": 3}[name])
            self.varint(op[1])
            self.varint(op[2])
            self.values(op[3])
        elif name == "Delete":
            self.varint(4)
            self.varint(op[1])
            self.varint(op[2])
        elif name == "Scan":
            self.varint(5)
            for x in op[1:5]:
                self.varint(x)
            self.columns(op[5])
        elif name == "Apply":
            self.varint(6)
            self.varint(op[1])
            self.varint(op[2])
            self.varint(op[3])
            self.varint(ARITH.index(op[4]))
            self.i64(op[5])
            self.bool(op[6])
        elif name == "Ordered":
            self.varint(7)
            self.varint(op[1])
            self.varint(op[2])
            self.varint(op[3])
            self.varint(ORDERED.index(op[4]))
            self.i64(op[5])
            self.bytes(bytes(op[6]))
        else:
            raise ValueError(f"unknown operation {name!r}")


def frame(payload: bytes) -> bytes:
    """The payload with its big-endian length prefix."""
    return struct.pack(">I", len(payload)) + payload


def hello(token: Optional[str]) -> bytes:
    """The hello frame."""
    w = Writer()
    w.buf += MAGIC
    w.varint(VERSION)
    if token is None:
        w.varint(0)
    else:
        w.varint(1)
        w.str(token)
    return frame(bytes(w.buf))


def request(req_id: int, req: Union[str, Tuple[Any, ...]]) -> bytes:
    """A request frame. ``req`` is ``"Ping"``, ``"Stats"``, ``"ListTables"``, ``"Begin"``,
    ``("CreateTable", TableInfo)``, ``("DescribeTable", name)``, ``("DropTable", name)``,
    ``("Execute", [op, ...])``, ``("Statement", txn, op)``, ``("Commit", txn)``,
    ``("Rollback", txn)`` or ``("Call", name, [value, ...])``."""
    w = Writer()
    w.varint(req_id)
    name = req if isinstance(req, str) else req[0]
    simple = {"Ping": 0, "Stats": 1, "ListTables": 3, "Begin": 7}
    if name in simple:
        w.varint(simple[name])
    elif name == "CreateTable":
        t: TableInfo = req[1]  # type: ignore[index]
        w.varint(2)
        w.str(t.name)
        w.varint(len(t.columns))
        for c in t.columns:
            w.str(c.name)
            w.column_kind(c.kind)
            w.buf.append(AUTO_GROUP if c.group is None else c.group)
        w.varint(t.capacity)
        w.bool(t.ordered)
    elif name in ("DescribeTable", "DropTable"):
        w.varint(4 if name == "DescribeTable" else 5)
        w.str(req[1])  # type: ignore[index]
    elif name == "Execute":
        w.varint(6)
        ops = req[1]  # type: ignore[index]
        w.varint(len(ops))
        for op in ops:
            w.op(op)
    elif name == "Statement":
        w.varint(8)
        w.varint(req[1])  # type: ignore[index]
        w.op(req[2])  # type: ignore[index]
    elif name in ("Commit", "Rollback"):
        w.varint(9 if name == "Commit" else 10)
        w.varint(req[1])  # type: ignore[index]
    elif name == "Call":
        w.varint(11)
        w.str(req[1])  # type: ignore[index]
        args = req[2]  # type: ignore[index]
        w.varint(len(args))
        for a in args:
            w.value(a)
    else:
        raise ValueError(f"unknown request {name!r}")
    return frame(bytes(w.buf))


class Reader:
    """Reads postcard-encoded values from a payload; every bound is checked."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise DecodeError("truncated message")
        b = self.data[self.at]
        self.at += 1
        return b

    def varint(self) -> int:
        n, shift = 0, 0
        while True:
            b = self.byte()
            n |= (b & 0x7F) << shift
            if not b & 0x80:
                return n
            shift += 7
            if shift > 63:
                raise DecodeError("varint too long")

    def i64(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def f64(self) -> float:
        if self.at + 8 > len(self.data):
            raise DecodeError("truncated f64")
        (x,) = struct.unpack_from("<d", self.data, self.at)
        self.at += 8
        return float(x)

    def bool(self) -> bool:
        return self.byte() != 0

    def bytes(self) -> bytes:
        n = self.varint()
        if self.at + n > len(self.data):
            raise DecodeError("truncated bytes")
        b = self.data[self.at : self.at + n]
        self.at += n
        return bytes(b)

    def str(self) -> str:
        return self.bytes().decode()

    def seq(self, item: Any) -> List[Any]:
        return [item() for _ in range(self.varint())]

    def value(self) -> Value:
        tag = self.varint()
        if tag == 0:
            return ("U64", self.varint())
        if tag == 1:
            return ("I64", self.i64())
        if tag == 2:
            return ("F64", self.f64())
        if tag == 3:
            return ("Bytes", self.bytes())
        if tag == 4:
            return ("Tuples", self.seq(lambda: (self.i64(), self.varint(), self.bytes())))
        raise DecodeError(f"unknown value tag {tag}")

    def values(self) -> List[Value]:
        return self.seq(self.value)

    def op_result(self) -> Tuple[str, Any]:
        tag = self.varint()
        if tag == 0:
            return ("Row", self.values() if self.byte() else None)
        if tag == 1:
            return ("Done", self.bool())
        if tag == 2:
            return ("Rows", self.seq(lambda: (self.varint(), self.values())))
        raise DecodeError(f"unknown result tag {tag}")

    def table_info(self) -> TableInfo:
        tid = self.varint()
        name = self.str()

        def column() -> Column:
            cname = self.str()
            kind_tag = self.varint()
            if kind_tag >= len(COLUMN_KINDS):
                raise DecodeError("unknown column kind")
            kind: Union[str, Tuple[Any, ...]] = COLUMN_KINDS[kind_tag]
            if kind_tag == 6:
                kind = ("TopK", self.byte(), self.varint())
            elif kind_tag >= 3:
                kind = (COLUMN_KINDS[kind_tag], self.varint())
            group = self.byte()
            return Column(cname, kind, None if group == AUTO_GROUP else group)

        cols = self.seq(column)
        return TableInfo(tid, name, cols, self.varint(), self.bool())

    def end(self) -> None:
        if self.at != len(self.data):
            raise DecodeError("bytes after the message")


def response(payload: bytes) -> Tuple[int, Tuple[Any, ...]]:
    """Decodes a response frame's payload: ``(id, (name, fields...))``."""
    r = Reader(payload)
    req_id = r.varint()
    tag = r.varint()
    out: Tuple[Any, ...]
    if tag == 0:
        out = ("Pong", r.f64(), r.varint())
    elif tag == 1:
        names = ["committed", "conflicts", "aborted"]
        stats = {n: r.varint() for n in names}
        for n in ["latency_p50_us", "latency_p99_us", "latency_p999_us"]:
            stats[n] = r.f64()  # type: ignore[assignment]
        stats["connections"] = r.varint()
        stats["uptime_s"] = r.f64()  # type: ignore[assignment]
        out = ("Stats", stats)
    elif tag == 2:
        out = ("Table", r.table_info())
    elif tag == 3:
        out = ("Tables", r.seq(r.table_info))
    elif tag == 4:
        out = ("Done",)
    elif tag == 5:
        out = ("Results", r.seq(r.op_result))
    elif tag == 6:
        out = ("Begun", r.varint())
    elif tag == 7:
        out = ("Result", r.op_result())
    elif tag == 8:
        out = ("Committed",)
    elif tag == 9:
        cause = r.varint()
        out = ("Aborted", ABORT_CAUSES[cause] if cause < len(ABORT_CAUSES) else "?", r.str())
    elif tag == 10:
        out = ("Values", r.values())
    elif tag == 11:
        kind = r.varint()
        out = ("Error", ERROR_KINDS[kind] if kind < len(ERROR_KINDS) else "?", r.str())
    else:
        raise DecodeError(f"unknown response tag {tag}")
    r.end()
    return req_id, out


def welcome(payload: bytes) -> Tuple[bool, Any]:
    """Decodes the hello's answer: ``(True, (version, protocol, threads))`` or
    ``(False, (error kind, message))``."""
    r = Reader(payload)
    if r.varint() == 0:
        out = (True, (r.varint(), r.str(), r.varint()))
    else:
        kind = r.varint()
        out = (False, (ERROR_KINDS[kind] if kind < len(ERROR_KINDS) else "?", r.str()))
    r.end()
    return out
