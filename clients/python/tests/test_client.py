"""The Python client against a real server: ``phasedb serve`` started from ``$PHASEDB_BIN`` (or
``target/release/phasedb``) on a free loopback port."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import unittest
from pathlib import Path
from typing import Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from phasedb import Aborted, Column, Connection, Error  # noqa: E402
from phasedb import wire  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


class Server:
    """A ``phasedb serve`` process; stopped with SIGTERM."""

    def __init__(self, *args: str) -> None:
        binary = os.environ.get("PHASEDB_BIN", str(ROOT / "target" / "release" / "phasedb"))
        self.proc = subprocess.Popen(
            [binary, "serve", "--listen", "127.0.0.1:0", "--threads", "2", *args],
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stderr is not None
        line = self.proc.stderr.readline()
        m = re.search(r"on ([\d.]+):(\d+)", line)
        if not m:
            self.proc.kill()
            raise RuntimeError(f"server did not start: {line}")
        self.host, self.port = m.group(1), int(m.group(2))

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=20)
        assert self.proc.stderr is not None
        self.proc.stderr.close()
        return code


class ClientTest(unittest.TestCase):
    server: Server

    @classmethod
    def setUpClass(cls) -> None:
        cls.server = Server()

    @classmethod
    def tearDownClass(cls) -> None:
        assert cls.server.stop() == 0

    def connect(self, token: Optional[str] = None) -> Connection:
        return Connection(self.server.host, self.server.port, token)

    def test_the_encoder_writes_the_documented_frames(self) -> None:
        self.assertEqual(wire.request(1, "Ping"), bytes([0, 0, 0, 2, 1, 0]))
        get = wire.request(2, ("Execute", [("Get", 0, 300, [])]))
        self.assertEqual(get, bytes([0, 0, 0, 8, 2, 6, 1, 0, 0, 0xAC, 2, 0]))

    def test_tables_one_shot_transactions_and_scans(self) -> None:
        with self.connect() as db:
            t = db.create_table(
                "py_accounts",
                [Column("balance", "I64", group=0), Column("owner", ("Bounded", 16), group=1)],
                ordered=True,
            )
            self.assertEqual(db.describe_table("py_accounts").id, t.id)
            results = db.execute(
                [
                    ("Put", t.id, 1, [(0, ("I64", 100)), (1, ("Bytes", b"ada"))]),
                    ("Put", t.id, 2, [(0, ("I64", -5))]),
                    ("Apply", t.id, 1, 0, "Add", 7, False),
                ]
            )
            self.assertEqual(results, [("Done", False), ("Done", False), ("Done", True)])
            rows = db.execute([("Scan", t.id, 0, 10, 10, [])])[0]
            self.assertEqual(
                rows,
                ("Rows", [(1, [("I64", 107), ("Bytes", b"ada")]), (2, [("I64", -5), ("Bytes", b"")])]),
            )
            with self.assertRaises(Aborted) as e:
                db.execute([("Put", t.id, 3, [(0, ("I64", 1))]), ("Insert", t.id, 1, [])])
            self.assertEqual(e.exception.cause, "DuplicateKey")
            self.assertEqual(db.execute([("Get", t.id, 3, [])]), [("Row", None)])
            db.drop_table("py_accounts")
            with self.assertRaises(Error) as err:
                db.describe_table("py_accounts")
            self.assertEqual(err.exception.kind, "NoSuchTable")

    def test_oput_and_topk_keep_the_best_tuples(self) -> None:
        with self.connect() as db:
            t = db.create_table(
                "py_leaders",
                [Column("best", ("Tuple", 8), group=0), Column("top", ("TopK", 2, 4), group=1)],
            )
            self.assertEqual(db.describe_table("py_leaders").columns[1].kind, ("TopK", 2, 4))
            db.execute([("Insert", t.id, 1, [])])
            for order, name in [(5, b"e"), (9, b"i"), (2, b"b")]:
                db.execute(
                    [
                        ("Ordered", t.id, 1, 0, "OPut", order, name),
                        ("Ordered", t.id, 1, 1, "TopK", order, name),
                    ]
                )
            tx = db.begin()
            self.assertEqual(tx.statement(("Ordered", t.id, 1, 1, "TopK", -1, b"low")), ("Done", True))
            tx.commit()
            [(_, row)] = db.execute([("Get", t.id, 1, [])])
            best, top = row
            self.assertEqual([(o, v) for o, _, v in best[1]], [(9, b"i")])
            self.assertEqual([(o, v) for o, _, v in top[1]], [(9, b"i"), (5, b"e")])
            with self.assertRaises(Aborted) as e:
                db.execute([("Ordered", t.id, 1, 1, "OPut", 1, b"")])
            self.assertEqual(e.exception.cause, "Invalid")

    def test_transfers_with_retry_on_conflict_keep_the_total(self) -> None:
        with self.connect() as db:
            t = db.create_table("py_bank", [Column("balance", "I64")])
            db.execute([("Put", t.id, k, [(0, ("I64", 100))]) for k in range(3)])

        def transfers(i: int) -> None:
            with self.connect() as conn:
                for n in range(30):
                    src, dst = (i + n) % 3, (i + n + 1) % 3

                    def body(tx):  # type: ignore[no-untyped-def]
                        a = tx.get(t.id, src, [0])[0][1]
                        b = tx.get(t.id, dst, [0])[0][1]
                        tx.update(t.id, src, [(0, ("I64", a - 1))])
                        tx.update(t.id, dst, [(0, ("I64", b + 1))])

                    conn.transact(body)

        threads = [threading.Thread(target=transfers, args=(i,)) for i in range(3)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        with self.connect() as db:
            rows = db.execute([("Get", t.id, k, [0]) for k in range(3)])
            self.assertEqual(sum(r[1][0][1] for r in rows), 300)
            self.assertGreaterEqual(db.stats()["committed"], 90)

    def test_stale_reads_abort_the_commit(self) -> None:
        with self.connect() as a, self.connect() as b:
            t = a.create_table("py_stale", [Column("v", "U64")])
            a.execute([("Put", t.id, 1, [(0, ("U64", 1))])])
            tx = a.begin()
            self.assertEqual(tx.get(t.id, 1), [("U64", 1)])
            b.execute([("Put", t.id, 1, [(0, ("U64", 2))])])
            tx.put(t.id, 1, [(0, ("U64", 3))])
            with self.assertRaises(Aborted) as e:
                tx.commit()
            self.assertTrue(e.exception.retryable)
            self.assertEqual(a.execute([("Get", t.id, 1, [])]), [("Row", [("U64", 2)])])

    def test_columns_without_groups_make_an_automatic_table(self) -> None:
        with self.connect() as db:
            t = db.create_table("py_auto", [Column("a", "I64"), Column("b", "I64")])
            self.assertEqual([c.group for c in db.describe_table("py_auto").columns], [None, None])
            db.execute([("Put", t.id, 1, [(0, ("I64", 3)), (1, ("I64", 4))])])
            self.assertEqual(db.execute([("Get", t.id, 1, [1])]), [("Row", [("I64", 4)])])
            with self.assertRaises(Error) as err:
                db.create_table("py_mixed", [Column("a", "I64", group=0), Column("b", "I64")])
            self.assertIn("no group while others have one", str(err.exception))

    def test_procedures_by_name(self) -> None:
        with self.connect() as db:
            db.call_procedure("ycsb.setup", [("U64", 100), ("U64", 2), ("U64", 8)])
            args = [("U64", x) for x in (0, 1, 1, 0, 2, 1, 3, 0, 5)]
            self.assertEqual(db.call_procedure("ycsb", args), [])


class TokenTest(unittest.TestCase):
    def test_a_token_is_required_when_configured(self) -> None:
        path = Path(os.environ.get("TMPDIR", "/tmp")) / f"phasedb-token-{os.getpid()}"
        path.write_text("sesame\n")
        server = Server("--token-file", str(path))
        try:
            with self.assertRaises(Error) as e:
                Connection(server.host, server.port, "wrong")
            self.assertEqual(e.exception.kind, "Unauthorized")
            with Connection(server.host, server.port, "sesame") as db:
                db.ping()
        finally:
            self.assertEqual(server.stop(), 0)
            path.unlink()


if __name__ == "__main__":
    unittest.main()
