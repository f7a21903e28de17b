package site.ycsb.db.phasedb;

import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.Vector;

import site.ycsb.ByteArrayByteIterator;
import site.ycsb.ByteIterator;
import site.ycsb.DB;
import site.ycsb.DBException;
import site.ycsb.Status;

/**
 * YCSB binding for {@code phasedb serve}: each YCSB operation is one one-shot transaction over the
 * phasedb client protocol ({@code docs/wire-protocol.md}). One connection per YCSB client thread.
 *
 * <p>The table is created on first use: {@code fieldcount} columns {@code field0..} of up to
 * {@code fieldlength} bytes, ordered (for scans). YCSB keys ({@code user} and digits) map to the
 * number they end in; other keys to a 64-bit FNV-1a hash.
 *
 * <p>Properties: {@code phasedb.host} (127.0.0.1), {@code phasedb.port} (7600),
 * {@code phasedb.token} (none).
 */
public class PhasedbClient extends DB {
  private static final byte[] MAGIC = "PHDC".getBytes(StandardCharsets.US_ASCII);
  private static final int VERSION = 1;
  // Request variants.
  private static final int REQ_CREATE_TABLE = 2;
  private static final int REQ_DESCRIBE_TABLE = 4;
  private static final int REQ_EXECUTE = 6;
  // Op variants.
  private static final int OP_GET = 0;
  private static final int OP_UPDATE = 2;
  private static final int OP_PUT = 3;
  private static final int OP_DELETE = 4;
  private static final int OP_SCAN = 5;
  // Response variants.
  private static final int RESP_TABLE = 2;
  private static final int RESP_RESULTS = 5;
  private static final int RESP_ABORTED = 9;
  private static final int RESP_ERROR = 11;
  private static final int ERROR_TABLE_EXISTS = 5;

  private Socket socket;
  private OutputStream out;
  private DataInputStream in;
  private long nextId = 1;
  private int tableId;
  private final Map<String, Integer> columns = new HashMap<>();
  private final List<String> columnNames = new ArrayList<>();

  @Override
  public void init() throws DBException {
    Properties p = getProperties();
    String host = p.getProperty("phasedb.host", "127.0.0.1");
    int port = Integer.parseInt(p.getProperty("phasedb.port", "7600"));
    String token = p.getProperty("phasedb.token");
    String table = p.getProperty("table", "usertable");
    int fieldCount = Integer.parseInt(p.getProperty("fieldcount", "10"));
    int fieldLength = Integer.parseInt(p.getProperty("fieldlength", "100"));
    long records = Long.parseLong(p.getProperty("recordcount", "1000"));
    try {
      socket = new Socket(host, port);
      socket.setTcpNoDelay(true);
      out = socket.getOutputStream();
      in = new DataInputStream(new java.io.BufferedInputStream(socket.getInputStream(), 1 << 16));
      Writer w = new Writer();
      w.raw(MAGIC);
      w.varint(VERSION);
      if (token == null) {
        w.raw(new byte[] {0});
      } else {
        w.raw(new byte[] {1});
        w.str(token);
      }
      send(w);
      Reader hello = new Reader(readFrame());
      if (hello.varint() != 0) {
        long kind = hello.varint();
        throw new DBException("phasedb refused the connection (" + kind + "): " + hello.str());
      }
      Reader r = describe(table);
      if (r == null) {
        Writer c = request(REQ_CREATE_TABLE);
        c.str(table);
        c.varint(fieldCount);
        for (int i = 0; i < fieldCount; i++) {
          c.str("field" + i);
          c.varint(4); // Bounded(n)
          c.varint(fieldLength);
          c.raw(new byte[] {0}); // column group 0
        }
        c.varint(records);
        c.raw(new byte[] {1}); // ordered
        send(c);
        r = response();
        int tag = (int) r.varint();
        if (tag == RESP_ERROR && r.varint() == ERROR_TABLE_EXISTS) {
          r = describe(table); // another client thread created it
        } else if (tag != RESP_TABLE) {
          throw new DBException("cannot create table " + table);
        }
        if (r == null) {
          throw new DBException("table " + table + " vanished");
        }
      }
      tableId = (int) r.varint();
      r.str();
      long n = r.varint();
      for (int i = 0; i < n; i++) {
        String name = r.str();
        long kind = r.varint();
        if (kind >= 3) {
          r.varint();
        }
        r.u8();
        columns.put(name, i);
        columnNames.add(name);
      }
    } catch (IOException e) {
      throw new DBException("cannot reach phasedb at " + host + ":" + port, e);
    }
  }

  /** The table's description (positioned at its TableInfo), or null if there is none. */
  private Reader describe(String table) throws IOException {
    Writer w = request(REQ_DESCRIBE_TABLE);
    w.str(table);
    send(w);
    Reader r = response();
    return r.varint() == RESP_TABLE ? r : null;
  }

  @Override
  public void cleanup() throws DBException {
    try {
      if (socket != null) {
        socket.close();
      }
    } catch (IOException e) {
      throw new DBException(e);
    }
  }

  /** The row key of a YCSB key. */
  static long key(String key) {
    int i = key.length();
    while (i > 0 && Character.isDigit(key.charAt(i - 1))) {
      i--;
    }
    if (i < key.length() && key.length() - i <= 18) {
      return Long.parseLong(key.substring(i));
    }
    long h = 0xcbf29ce484222325L;
    for (byte b : key.getBytes(StandardCharsets.UTF_8)) {
      h = (h ^ (b & 0xff)) * 0x100000001b3L;
    }
    return h;
  }

  private void columnList(Writer w, Set<String> fields) {
    if (fields == null) {
      w.varint(0);
      return;
    }
    w.varint(fields.size());
    for (String f : fields) {
      Integer c = columns.get(f);
      w.varint(c == null ? Integer.MAX_VALUE : c);
    }
  }

  private List<String> names(Set<String> fields) {
    return fields == null ? columnNames : new ArrayList<>(fields);
  }

  private void values(Writer w, Map<String, ByteIterator> values) {
    w.varint(values.size());
    for (Map.Entry<String, ByteIterator> e : values.entrySet()) {
      Integer c = columns.get(e.getKey());
      w.varint(c == null ? Integer.MAX_VALUE : c);
      w.varint(3); // Value::Bytes
      w.bytes(e.getValue().toArray());
    }
  }

  /** Starts a one-shot transaction of one operation of variant {@code op}. */
  private Writer execute(int op) {
    Writer w = request(REQ_EXECUTE);
    w.varint(1);
    w.varint(op);
    w.varint(tableId);
    return w;
  }

  /** Sends {@code w} and returns its results' reader positioned at the first OpResult, or null. */
  private Reader results(Writer w) throws IOException {
    send(w);
    Reader r = response();
    if (r.varint() != RESP_RESULTS) {
      return null;
    }
    r.varint(); // one result
    return r;
  }

  private void readRow(Reader r, List<String> names, Map<String, ByteIterator> into) {
    long n = r.varint();
    for (int i = 0; i < n; i++) {
      long tag = r.varint();
      byte[] v;
      if (tag == 3) {
        v = r.bytes();
      } else {
        v = Long.toString(tag == 2 ? r.fixed64() : r.varint()).getBytes(StandardCharsets.UTF_8);
      }
      if (into != null) {
        into.put(names.get(i), new ByteArrayByteIterator(v));
      }
    }
  }

  @Override
  public Status read(String table, String key, Set<String> fields,
      Map<String, ByteIterator> result) {
    try {
      Writer w = execute(OP_GET);
      w.varint(key(key));
      columnList(w, fields);
      Reader r = results(w);
      if (r == null || r.varint() != 0) {
        return Status.ERROR;
      }
      if (r.u8() == 0) {
        return Status.NOT_FOUND;
      }
      readRow(r, names(fields), result);
      return Status.OK;
    } catch (IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status scan(String table, String startkey, int recordcount, Set<String> fields,
      Vector<HashMap<String, ByteIterator>> result) {
    try {
      Writer w = execute(OP_SCAN);
      w.varint(key(startkey));
      w.varintUnsigned(-1L); // hi = u64::MAX
      w.varint(recordcount);
      columnList(w, fields);
      Reader r = results(w);
      if (r == null || r.varint() != 2) {
        return Status.ERROR;
      }
      long rows = r.varint();
      List<String> names = names(fields);
      for (long i = 0; i < rows; i++) {
        r.varint(); // key
        HashMap<String, ByteIterator> row = new HashMap<>();
        readRow(r, names, row);
        result.add(row);
      }
      return Status.OK;
    } catch (IOException e) {
      return Status.ERROR;
    }
  }

  private Status write(int op, String key, Map<String, ByteIterator> vals) {
    try {
      Writer w = execute(op);
      w.varint(key(key));
      if (vals != null) {
        values(w, vals);
      }
      Reader r = results(w);
      if (r == null || r.varint() != 1) {
        return Status.ERROR;
      }
      return r.u8() != 0 || op == OP_PUT ? Status.OK : Status.NOT_FOUND;
    } catch (IOException e) {
      return Status.ERROR;
    }
  }

  @Override
  public Status update(String table, String key, Map<String, ByteIterator> values) {
    return write(OP_UPDATE, key, values);
  }

  @Override
  public Status insert(String table, String key, Map<String, ByteIterator> values) {
    return write(OP_PUT, key, values);
  }

  @Override
  public Status delete(String table, String key) {
    return write(OP_DELETE, key, null);
  }

  private Writer request(int variant) {
    Writer w = new Writer();
    w.varint(nextId++);
    w.varint(variant);
    return w;
  }

  private void send(Writer w) throws IOException {
    byte[] payload = w.buf.toByteArray();
    byte[] frame = new byte[4 + payload.length];
    int n = payload.length;
    frame[0] = (byte) (n >>> 24);
    frame[1] = (byte) (n >>> 16);
    frame[2] = (byte) (n >>> 8);
    frame[3] = (byte) n;
    System.arraycopy(payload, 0, frame, 4, n);
    out.write(frame);
    out.flush();
  }

  private byte[] readFrame() throws IOException {
    int n = in.readInt();
    if (n < 0 || n > (64 << 20)) {
      throw new IOException("frame of " + n + " bytes");
    }
    byte[] b = new byte[n];
    in.readFully(b);
    return b;
  }

  /** The next response, positioned after its id. */
  private Reader response() throws IOException {
    Reader r = new Reader(readFrame());
    r.varint();
    return r;
  }

  /** Postcard encoding (docs/wire-protocol.md). */
  private static final class Writer {
    final ByteArrayOutputStream buf = new ByteArrayOutputStream(256);

    void raw(byte[] b) {
      buf.write(b, 0, b.length);
    }

    void varint(long n) {
      varintUnsigned(n);
    }

    void varintUnsigned(long n) {
      while ((n & ~0x7FL) != 0) {
        buf.write((int) ((n & 0x7F) | 0x80));
        n >>>= 7;
      }
      buf.write((int) n);
    }

    void bytes(byte[] b) {
      varint(b.length);
      raw(b);
    }

    void str(String s) {
      bytes(s.getBytes(StandardCharsets.UTF_8));
    }
  }

  /** Postcard decoding. */
  private static final class Reader {
    private final byte[] b;
    private int at;

    Reader(byte[] b) {
      this.b = b;
    }

    int u8() {
      return b[at++] & 0xff;
    }

    long varint() {
      long n = 0;
      for (int shift = 0; shift < 64; shift += 7) {
        int x = u8();
        n |= (long) (x & 0x7F) << shift;
        if ((x & 0x80) == 0) {
          return n;
        }
      }
      throw new IllegalStateException("varint too long");
    }

    long fixed64() {
      long n = 0;
      for (int i = 0; i < 8; i++) {
        n |= (long) u8() << (8 * i);
      }
      return n;
    }

    byte[] bytes() {
      int n = (int) varint();
      byte[] v = java.util.Arrays.copyOfRange(b, at, at + n);
      at += n;
      return v;
    }

    String str() {
      return new String(bytes(), StandardCharsets.UTF_8);
    }
  }
}
