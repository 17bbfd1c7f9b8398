"""Bad input at the wire level, spoken with raw sockets (no driver).

Every malformed request must get the protocol's own error with a readable
message, never a crash or a hung connection; the node keeps serving others.
"""
import os
import socket
import struct

import pytest

from conftest import HOST, IS_CASSANDRA, PORT

OPTIONS, STARTUP, QUERY, READY, SUPPORTED, ERROR, RESULT = 0x05, 0x01, 0x07, 0x02, 0x06, 0x00, 0x08
PROTOCOL_ERROR, INVALID = 0x000A, 0x2200


def frame(opcode, body=b"", stream=1, version=4, flags=0, length=None):
    n = len(body) if length is None else length
    return struct.pack(">BBhBI", version, flags, stream, opcode, n) + body


def string_map(entries):
    out = struct.pack(">H", len(entries))
    for k, v in entries.items():
        out += struct.pack(">H", len(k)) + k.encode() + struct.pack(">H", len(v)) + v.encode()
    return out


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed after %d of %d bytes" % (len(data), n))
        data += chunk
    return data


def read_frame(sock):
    version, flags, stream, opcode, length = struct.unpack(">BBhBI", recv_exact(sock, 9))
    return version, stream, opcode, recv_exact(sock, length)


def error_of(body):
    code, = struct.unpack(">i", body[:4])
    n, = struct.unpack(">H", body[4:6])
    return code, body[6:6 + n].decode()


@pytest.fixture
def conn():
    s = socket.create_connection((HOST, PORT), timeout=10)
    yield s
    s.close()


def startup(sock):
    sock.sendall(frame(STARTUP, string_map({"CQL_VERSION": "3.0.0"})))
    _, _, opcode, _ = read_frame(sock)
    assert opcode == READY


def long_string(text_bytes):
    return struct.pack(">i", len(text_bytes)) + text_bytes


def query_body(text_bytes):
    # [long string] query, [consistency] ONE, flags 0
    return long_string(text_bytes) + struct.pack(">HB", 1, 0)


def test_options_lists_cql_version_and_compression(conn):
    conn.sendall(frame(OPTIONS))
    _, stream, opcode, body = read_frame(conn)
    assert (stream, opcode) == (1, SUPPORTED)
    assert b"CQL_VERSION" in body and b"COMPRESSION" in body
    if not IS_CASSANDRA:
        assert b"SCYLLA_NR_SHARDS" in body and b"SCYLLA_SHARD_AWARE_PORT" in body


@pytest.mark.parametrize("version", [5, 6, 3, 0x41])
def test_other_protocol_versions_are_refused_so_drivers_fall_back(conn, version):
    if version == 3:
        conn.sendall(struct.pack(">BBhBI", 3, 0, 7, OPTIONS, 0))
    else:
        conn.sendall(frame(OPTIONS, version=version, stream=7))
    _, stream, opcode, body = read_frame(conn)
    assert opcode == ERROR
    code, message = error_of(body)
    assert code == PROTOCOL_ERROR
    assert "unsupported protocol version" in message.lower() or "invalid or unsupported" in message.lower()


def test_unknown_opcode_is_a_protocol_error_and_the_connection_lives_on(conn):
    conn.sendall(frame(0x1F, b"", stream=3))
    _, stream, opcode, body = read_frame(conn)
    assert (stream, opcode) == (3, ERROR)
    assert error_of(body)[0] == PROTOCOL_ERROR
    conn.sendall(frame(OPTIONS, stream=4))
    assert read_frame(conn)[2] == SUPPORTED


def test_body_shorter_than_it_claims(conn):
    startup(conn)
    body = struct.pack(">i", 100) + b"SELECT"  # claims 100 bytes of query text
    conn.sendall(frame(QUERY, body, stream=5))
    _, stream, opcode, reply = read_frame(conn)
    assert (stream, opcode) == (5, ERROR)
    code, message = error_of(reply)
    assert code == PROTOCOL_ERROR, message
    conn.sendall(frame(OPTIONS, stream=6))
    assert read_frame(conn)[2] == SUPPORTED


def test_invalid_utf8_query_text(conn):
    startup(conn)
    conn.sendall(frame(QUERY, query_body(b"SELECT \xff\xfe FROM x"), stream=8))
    _, stream, opcode, reply = read_frame(conn)
    assert (stream, opcode) == (8, ERROR)
    assert error_of(reply)[0] in (PROTOCOL_ERROR, 0x2000)


def test_frame_larger_than_the_limit_is_refused(conn):
    conn.sendall(frame(QUERY, b"", stream=9, length=300 * 1024 * 1024))
    _, stream, opcode, reply = read_frame(conn)
    assert opcode == ERROR
    code, message = error_of(reply)
    assert code == PROTOCOL_ERROR
    if not IS_CASSANDRA:
        assert "native_transport_max_frame_size_in_mb" in message


def test_compressed_flag_without_negotiation(conn):
    startup(conn)
    conn.sendall(frame(QUERY, query_body(b"SELECT * FROM system.local"), stream=10, flags=0x01))
    _, stream, opcode, reply = read_frame(conn)
    assert opcode == ERROR and error_of(reply)[0] == PROTOCOL_ERROR


def test_query_before_startup_or_garbage_does_not_hurt_the_node():
    for garbage in (b"\x00" * 64, os.urandom(4096), b"GET / HTTP/1.1\r\n\r\n"):
        s = socket.create_connection((HOST, PORT), timeout=10)
        s.sendall(garbage)
        s.settimeout(5)
        try:
            while s.recv(65536):
                pass
        except (socket.timeout, ConnectionError):
            pass
        s.close()
    s = socket.create_connection((HOST, PORT), timeout=10)
    s.sendall(frame(OPTIONS))
    assert read_frame(s)[2] == SUPPORTED
    s.close()


def test_many_streams_in_flight_are_all_answered(conn):
    startup(conn)
    streams = list(range(1, 2001))
    request = b"".join(frame(QUERY, query_body(b"SELECT key FROM system.local"), stream=i) for i in streams)
    conn.sendall(request)
    seen = set()
    for _ in streams:
        _, stream, opcode, _ = read_frame(conn)
        assert opcode == RESULT
        seen.add(stream)
    assert seen == set(streams)


def test_too_many_bind_values(conn):
    startup(conn)
    values = struct.pack(">H", 2) + struct.pack(">i", 4) + b"\x00\x00\x00\x01" + struct.pack(">i", 4) + b"\x00\x00\x00\x02"
    body = long_string(b"SELECT * FROM system.local WHERE key = ?") + struct.pack(">HB", 1, 0x01) + values
    conn.sendall(frame(QUERY, body, stream=11))
    _, stream, opcode, reply = read_frame(conn)
    assert (stream, opcode) == (11, ERROR)
    code, message = error_of(reply)
    assert code == INVALID, message
    assert "bound variables" in message or "markers" in message
