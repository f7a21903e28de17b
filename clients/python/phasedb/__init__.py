"""Python client of phasedb's server (``phasedb serve``): pure Python, no dependencies.

>>> from phasedb import Connection, Column
>>> with Connection("127.0.0.1", 7600) as db:          # doctest: +SKIP
...     t = db.create_table("accounts", [Column("balance", "I64")])
...     db.execute([("Put", t.id, 1, [(0, ("I64", 100))])])
"""

from .client import Aborted, Connection, Error, Transaction
from .wire import Column, DecodeError, TableInfo, Value

__all__ = [
    "Aborted",
    "Column",
    "Connection",
    "DecodeError",
    "Error",
    "TableInfo",
    "Transaction",
    "Value",
]
__version__ = "0.1.0"
