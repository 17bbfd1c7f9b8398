"""Loads `shoal stress`'s table with a distinct random value in every row, without a driver.

`shoal stress --workload write` writes one random value, generated once per run,
into every row, so a flushed SSTable compresses it ~10x (LZ4 finds the
repeats within a chunk) and a data set "4x memory" is far smaller on disk. This
loader speaks just enough of the CQL native protocol v4 (STARTUP, QUERY, PREPARE,
EXECUTE) to write rows (pk = 0..N-1, ck = 0, v = `value_size` bytes of
os.urandom) into `(pk bigint, ck int, v blob, PRIMARY KEY (pk, ck))`, the table
`shoal stress --workload read` reads, pipelining `window` EXECUTEs per
connection (stream ids) and checking every answer. Standard library only.
"""
import os
import socket
import struct
import time

OP_ERROR, OP_STARTUP, OP_READY, OP_QUERY, OP_RESULT, OP_PREPARE, OP_EXECUTE = 0, 1, 2, 7, 8, 9, 10
CONSISTENCY_ONE = 1
HEADER = struct.Struct(">BBhBi")


class CqlError(Exception):
    pass


def _string(s):
    b = s.encode()
    return struct.pack(">H", len(b)) + b


def _long_string(s):
    b = s.encode()
    return struct.pack(">i", len(b)) + b


class Connection:
    def __init__(self, port, host="127.0.0.1", timeout=60):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.request(OP_STARTUP, struct.pack(">H", 1) + _string("CQL_VERSION") + _string("3.0.0"),
                     want=OP_READY)

    def close(self):
        self.sock.close()

    def _frame(self, stream, opcode, body):
        return HEADER.pack(0x04, 0, stream, opcode, len(body)) + body

    def _read_frame(self):
        while True:
            if len(self.buf) >= 9:
                _, _, stream, opcode, length = HEADER.unpack_from(self.buf)
                if len(self.buf) >= 9 + length:
                    body = bytes(self.buf[9:9 + length])
                    del self.buf[:9 + length]
                    return stream, opcode, body
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise CqlError("connection closed")
            self.buf += chunk

    @staticmethod
    def _error(body):
        code = struct.unpack_from(">i", body)[0]
        n = struct.unpack_from(">H", body, 4)[0]
        return f"error 0x{code:04x}: {body[6:6 + n].decode(errors='replace')}"

    def request(self, opcode, body, want=OP_RESULT):
        self.sock.sendall(self._frame(0, opcode, body))
        _, op, reply = self._read_frame()
        if op == OP_ERROR:
            raise CqlError(self._error(reply))
        if op != want:
            raise CqlError(f"unexpected opcode {op}")
        return reply

    def query(self, cql):
        return self.request(OP_QUERY, _long_string(cql) + struct.pack(">HB", CONSISTENCY_ONE, 0))

    def prepare(self, cql):
        reply = self.request(OP_PREPARE, _long_string(cql))
        kind = struct.unpack_from(">i", reply)[0]
        if kind != 4:
            raise CqlError(f"PREPARE answered result kind {kind}")
        n = struct.unpack_from(">H", reply, 4)[0]
        return reply[6:6 + n]

    def send_executes(self, prepared_id, rows, first_stream=0):
        """Writes one EXECUTE per row (a tuple of serialized values), streams first_stream..,
        in one sendall; the answers are read by collect()."""
        head = struct.pack(">H", len(prepared_id)) + prepared_id
        frames = []
        for i, values in enumerate(rows):
            body = [head, struct.pack(">HBH", CONSISTENCY_ONE, 0x01, len(values))]
            for v in values:
                body.append(struct.pack(">i", len(v)))
                body.append(v)
            b = b"".join(body)
            frames.append(HEADER.pack(0x04, 0, first_stream + i, OP_EXECUTE, len(b)))
            frames.append(b)
        self.sock.sendall(b"".join(frames))

    def collect(self, n):
        """Reads n answers; raises on the first error among them."""
        first_error = None
        for _ in range(n):
            _, op, reply = self._read_frame()
            if op == OP_ERROR and first_error is None:
                first_error = self._error(reply)
            elif op != OP_RESULT and first_error is None:
                first_error = f"unexpected opcode {op}"
        if first_error:
            raise CqlError(first_error)


def load(port, keyspace, table, keys, value_size=1024, window=1000, create=True, log=None,
         timeout_s=600):
    """Writes rows pk = 0..keys-1 (ck 0) with random values. Returns (rows, seconds)."""
    if not 0 < window <= 16384:
        raise ValueError("window must be in 1..16384 (two windows of stream ids in flight)")
    conn = Connection(port)
    try:
        if create:
            conn.query(f"CREATE KEYSPACE IF NOT EXISTS {keyspace} WITH replication = "
                       "{'class': 'SimpleStrategy', 'replication_factor': 1}")
            conn.query(f"CREATE TABLE IF NOT EXISTS {keyspace}.{table} "
                       "(pk bigint, ck int, v blob, PRIMARY KEY (pk, ck))")
        pid = conn.prepare(f"INSERT INTO {keyspace}.{table} (pk, ck, v) VALUES (?, ?, ?)")
        ck0 = struct.pack(">i", 0)
        t0 = last = time.monotonic()
        sent = done = 0
        outstanding = []        # two windows in flight: the next is built while one is served
        while done < keys:
            if sent < keys:
                n = min(window, keys - sent)
                blob = os.urandom(n * value_size)
                rows = [(struct.pack(">q", sent + i), ck0, blob[i * value_size:(i + 1) * value_size])
                        for i in range(n)]
                # Window k uses streams window*(k%2) ..: the two in flight never share one.
                conn.send_executes(pid, rows, first_stream=window * ((sent // window) % 2))
                outstanding.append(n)
                sent += n
                if len(outstanding) < 2 and sent < keys:
                    continue
            conn.collect(outstanding.pop(0))
            done = sent - sum(outstanding)
            now = time.monotonic()
            if now - t0 > timeout_s:
                raise CqlError(f"load not finished after {timeout_s} s ({done:,} of {keys:,} rows)")
            if log and now - last >= 10:
                last = now
                log(f"    {done:,} rows in {now - t0:.0f} s ({done / (now - t0):,.0f}/s)")
        return done, time.monotonic() - t0
    finally:
        conn.close()
