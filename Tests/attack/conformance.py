"""RFC 9113's protocol errors sent to a relay's listener, frame by frame: each case opens a
connection (preface and SETTINGS exchanged), sends its frames, and reads what comes back until
the answer the RFC requires (a GOAWAY or RST_STREAM with its error code, or a PING's
acknowledgement where the connection must go on), or until the connection closes or 3 s pass.
"""

import socket
import ssl
import struct
import time

from hpack import Encoder

from attacks import (ACK, CONTINUATION, DATA, END_HEADERS, END_STREAM, GOAWAY, HEADERS, PING, PREFACE, PRIORITY,
                     RST_STREAM, SETTINGS, WINDOW_UPDATE, frame, settings)

NO_ERROR, PROTOCOL_ERROR, INTERNAL_ERROR, FLOW_CONTROL_ERROR, SETTINGS_TIMEOUT, STREAM_CLOSED, FRAME_SIZE_ERROR, \
    REFUSED_STREAM, CANCEL, COMPRESSION_ERROR = range(10)
HEADER_TABLE_SIZE, ENABLE_PUSH, MAX_CONCURRENT_STREAMS, INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 1, 2, 3, 4, 5


def request(stream, end_stream=False, extra=(), encoder=None, fields=None):
    """A request's HEADERS frame (literal fields)."""
    fields = fields or [(":method", "POST"), (":scheme", "https"), (":authority", "localhost"),
                        (":path", "/3/device/" + "ab" * 32), ("apns-topic", "com.example.pushmedia")]
    block = (encoder or Encoder()).encode(list(fields) + list(extra))
    return frame(HEADERS, END_HEADERS | (END_STREAM if end_stream else 0), stream, block)


def goaway(code):
    return ("goaway", code)


def reset(stream, code):
    return ("reset", stream, code)


PING_OK = ("ping",)

# (name, what the RFC says, the frames sent, the answer expected)
CASES = [
    # Frame sizes (section 4.2, 6.x)
    ("frame_over_max_frame_size", "4.2: a frame over SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR",
     lambda: request(1) + frame(DATA, 0, 1, b"x" * 16385), goaway(FRAME_SIZE_ERROR)),
    ("ping_of_7_bytes", "6.7: a PING whose length is not 8 is a connection FRAME_SIZE_ERROR",
     lambda: frame(PING, 0, 0, b"x" * 7), goaway(FRAME_SIZE_ERROR)),
    ("settings_of_5_bytes", "6.5: a SETTINGS length not a multiple of 6 is a FRAME_SIZE_ERROR",
     lambda: frame(SETTINGS, 0, 0, b"x" * 5), goaway(FRAME_SIZE_ERROR)),
    ("settings_ack_with_payload", "6.5: a SETTINGS ACK with a payload is a FRAME_SIZE_ERROR",
     lambda: frame(SETTINGS, ACK, 0, struct.pack(">HI", 3, 100)), goaway(FRAME_SIZE_ERROR)),
    ("rst_stream_of_3_bytes", "6.4: a RST_STREAM whose length is not 4 is a FRAME_SIZE_ERROR",
     lambda: request(1) + frame(RST_STREAM, 0, 1, b"xxx"), goaway(FRAME_SIZE_ERROR)),
    ("window_update_of_3_bytes", "6.9: a WINDOW_UPDATE whose length is not 4 is a FRAME_SIZE_ERROR",
     lambda: frame(WINDOW_UPDATE, 0, 0, b"xxx"), goaway(FRAME_SIZE_ERROR)),
    ("priority_of_4_bytes", "6.3: a PRIORITY whose length is not 5 is a stream FRAME_SIZE_ERROR",
     lambda: request(1) + frame(PRIORITY, 0, 1, b"xxxx"), reset(1, FRAME_SIZE_ERROR)),
    # Stream identifiers and states (5.1, 6.x)
    ("data_on_stream_0", "6.1: DATA on stream 0 is a connection PROTOCOL_ERROR",
     lambda: frame(DATA, 0, 0, b"x"), goaway(PROTOCOL_ERROR)),
    ("headers_on_stream_0", "6.2: HEADERS on stream 0 is a connection PROTOCOL_ERROR",
     lambda: request(0), goaway(PROTOCOL_ERROR)),
    ("settings_on_a_stream", "6.5: SETTINGS on a stream is a connection PROTOCOL_ERROR",
     lambda: frame(SETTINGS, 0, 1), goaway(PROTOCOL_ERROR)),
    ("ping_on_a_stream", "6.7: PING on a stream is a connection PROTOCOL_ERROR",
     lambda: frame(PING, 0, 1, b"x" * 8), goaway(PROTOCOL_ERROR)),
    ("rst_stream_on_stream_0", "6.4: RST_STREAM on stream 0 is a connection PROTOCOL_ERROR",
     lambda: frame(RST_STREAM, 0, 0, struct.pack(">I", CANCEL)), goaway(PROTOCOL_ERROR)),
    ("rst_stream_on_idle_stream", "5.1: RST_STREAM on an idle stream is a connection PROTOCOL_ERROR",
     lambda: frame(RST_STREAM, 0, 1, struct.pack(">I", CANCEL)), goaway(PROTOCOL_ERROR)),
    ("data_on_idle_stream", "5.1: DATA on an idle stream is a connection PROTOCOL_ERROR",
     lambda: frame(DATA, 0, 1, b"x"), goaway(PROTOCOL_ERROR)),
    ("even_stream_from_client", "5.1.1: a client's stream id must be odd; even is a PROTOCOL_ERROR",
     lambda: request(2), goaway(PROTOCOL_ERROR)),
    # RFC 9113 makes this a connection PROTOCOL_ERROR; libnghttp2 ignores such HEADERS instead,
    # since it cannot tell them from a late trailer on a stream it reset. What must hold: the
    # stream is never served, and the connection goes on.
    ("stream_id_going_down", "5.1.1: a new stream id lower than one used is never served",
     lambda: request(5, end_stream=True, extra=[("content-length", "0")]) + request(3, end_stream=True)
     + frame(PING, 0, 0, b"pingpong"), ("ignored", 3)),
    ("data_after_end_stream", "5.1: DATA on a half-closed (remote) stream is a STREAM_CLOSED error",
     lambda: request(1, end_stream=False, extra=[("apns-push-type", "background")])
     + frame(DATA, END_STREAM, 1, b'{"aps":{}}') + frame(DATA, 0, 1, b"x"), ("stream-closed", 1)),
    ("continuation_without_headers", "6.10: CONTINUATION not after HEADERS is a PROTOCOL_ERROR",
     lambda: frame(CONTINUATION, END_HEADERS, 1, b"\x82"), goaway(PROTOCOL_ERROR)),
    ("frame_inside_a_header_block", "6.10: another frame between HEADERS and CONTINUATION is a PROTOCOL_ERROR",
     lambda: frame(HEADERS, 0, 1, Encoder().encode([(":method", "POST")])) + frame(PING, 0, 0, b"x" * 8),
     goaway(PROTOCOL_ERROR)),
    ("headers_depending_on_itself", "5.3.1: a stream that depends on itself is a stream PROTOCOL_ERROR",
     lambda: frame(PRIORITY, 0, 1, struct.pack(">IB", 1, 16)), reset(1, PROTOCOL_ERROR)),
    # Flow control (6.9)
    ("window_update_of_0_on_connection", "6.9: a WINDOW_UPDATE of 0 on stream 0 is a connection PROTOCOL_ERROR",
     lambda: frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0)), goaway(PROTOCOL_ERROR)),
    ("window_update_of_0_on_stream", "6.9: a WINDOW_UPDATE of 0 on a stream is a stream PROTOCOL_ERROR",
     lambda: request(1) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0)), reset(1, PROTOCOL_ERROR)),
    ("connection_window_overflow", "6.9.1: a window past 2^31-1 on the connection is a FLOW_CONTROL_ERROR",
     lambda: frame(WINDOW_UPDATE, 0, 0, struct.pack(">I", 0x7FFFFFFF)), goaway(FLOW_CONTROL_ERROR)),
    ("stream_window_overflow", "6.9.1: a window past 2^31-1 on a stream is a stream FLOW_CONTROL_ERROR",
     lambda: request(1) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7FFFFFFF)), reset(1, FLOW_CONTROL_ERROR)),
    # RFC 9113 makes this a connection error; libnghttp2 resets the stream whose window overflowed
    # (RST_STREAM FLOW_CONTROL_ERROR) and keeps the connection. Either way the error is named.
    ("initial_window_overflowing_a_stream", "6.9.2: a SETTINGS_INITIAL_WINDOW_SIZE that takes a stream's "
     "window past 2^31-1 is a FLOW_CONTROL_ERROR",
     lambda: request(1) + frame(WINDOW_UPDATE, 0, 1, struct.pack(">I", 0x7FFFFFFF - 65535))
     + settings((INITIAL_WINDOW_SIZE, 65536)), ("flow-control", 1)),
    # SETTINGS values (6.5.2)
    ("settings_enable_push_2", "6.5.2: SETTINGS_ENABLE_PUSH other than 0 or 1 is a PROTOCOL_ERROR",
     lambda: settings((ENABLE_PUSH, 2)), goaway(PROTOCOL_ERROR)),
    ("settings_initial_window_too_large", "6.5.2: SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1 is a FLOW_CONTROL_ERROR",
     lambda: settings((INITIAL_WINDOW_SIZE, 0x80000000)), goaway(FLOW_CONTROL_ERROR)),
    ("settings_max_frame_size_too_small", "6.5.2: SETTINGS_MAX_FRAME_SIZE under 16384 is a PROTOCOL_ERROR",
     lambda: settings((MAX_FRAME_SIZE, 16383)), goaway(PROTOCOL_ERROR)),
    ("settings_max_frame_size_too_large", "6.5.2: SETTINGS_MAX_FRAME_SIZE past 2^24-1 is a PROTOCOL_ERROR",
     lambda: settings((MAX_FRAME_SIZE, 1 << 24)), goaway(PROTOCOL_ERROR)),
    ("settings_unknown_ignored", "6.5.2: an unknown setting is ignored; the connection goes on",
     lambda: settings((0x99, 1)) + frame(PING, 0, 0, b"pingpong"), PING_OK),
    ("unknown_frame_ignored", "5.5: a frame of an unknown type is ignored; the connection goes on",
     lambda: frame(0x42, 0, 0, b"hello") + frame(PING, 0, 0, b"pingpong"), PING_OK),
    # HPACK (4.3) and fields (8.2, 8.3)
    ("hpack_index_out_of_range", "4.3: a field index past the tables is a COMPRESSION_ERROR",
     lambda: frame(HEADERS, END_HEADERS, 1, b"\xff\x80\x10"), goaway(COMPRESSION_ERROR)),
    ("hpack_table_size_over_setting", "4.3: a table size update past SETTINGS_HEADER_TABLE_SIZE is a COMPRESSION_ERROR",
     lambda: frame(HEADERS, END_HEADERS, 1, b"\x3f\xe1\xff\x03" + Encoder().encode([(":method", "POST")])),
     goaway(COMPRESSION_ERROR)),
    ("hpack_bad_huffman", "4.3: a Huffman string with bad padding is a COMPRESSION_ERROR",
     lambda: frame(HEADERS, END_HEADERS, 1, b"\x00\x81\xff\x81\x00"), goaway(COMPRESSION_ERROR)),
    ("upper_case_field_name", "8.2.1: an upper-case field name makes the request malformed: PROTOCOL_ERROR",
     lambda: request(1, True, extra=[("X-Upper", "1")]), reset(1, PROTOCOL_ERROR)),
    ("connection_specific_field", "8.2.2: a connection-specific field makes the request malformed",
     lambda: request(1, True, extra=[("connection", "keep-alive")]), reset(1, PROTOCOL_ERROR)),
    ("pseudo_field_after_regular", "8.3: a pseudo-field after a regular field makes the request malformed",
     lambda: request(1, True, fields=[(":method", "POST"), (":scheme", "https"), ("apns-topic", "t"),
                                      (":path", "/3/device/x"), (":authority", "localhost")]),
     reset(1, PROTOCOL_ERROR)),
    ("missing_path", "8.3.1: a request without :path is malformed",
     lambda: request(1, True, fields=[(":method", "POST"), (":scheme", "https"), (":authority", "localhost")]),
     reset(1, PROTOCOL_ERROR)),
    ("content_length_mismatch", "8.1.1: a body whose length is not content-length's is malformed",
     lambda: request(1, extra=[("content-length", "10")]) + frame(DATA, END_STREAM, 1, b"{}"),
     reset(1, PROTOCOL_ERROR)),
    ("te_other_than_trailers", "8.2.2: te with a value other than trailers makes the request malformed",
     lambda: request(1, True, extra=[("te", "gzip")]), reset(1, PROTOCOL_ERROR)),
    ("ping_answered", "6.7: a PING is answered with the same 8 bytes and ACK",
     lambda: frame(PING, 0, 0, b"pingpong"), PING_OK),
]


def exchange(port, ca, tls, payload, timeout=3.0):
    """Sends the preface, SETTINGS (and their ACK once the server's come), then `payload`; the
    frames that come back until the connection closes or `timeout` passes: (type, flags, stream,
    payload) each."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    sock = raw
    if tls:
        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["h2"])
        sock = ctx.wrap_socket(raw, server_hostname="localhost")
    sock.settimeout(0.2)
    frames, buffer = [], b""
    try:
        sock.sendall(PREFACE + settings() + frame(SETTINGS, ACK, 0) + payload)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except socket.timeout:
                if frames and frames[-1][0] == GOAWAY:
                    break
                continue
            except (ConnectionError, ssl.SSLError, OSError):
                break
            if not data:
                break
            buffer += data
            while len(buffer) >= 9 and len(buffer) >= 9 + int.from_bytes(buffer[:3], "big"):
                length = int.from_bytes(buffer[:3], "big")
                frames.append((buffer[3], buffer[4], int.from_bytes(buffer[5:9], "big") & 0x7FFFFFFF,
                               buffer[9:9 + length]))
                buffer = buffer[9 + length:]
            if any(f[0] == GOAWAY for f in frames) or any(f[0] == PING and f[1] & ACK for f in frames) or \
                    any(f[0] == RST_STREAM for f in frames):
                # Give a moment for what follows (a GOAWAY after a RST_STREAM).
                deadline = min(deadline, time.monotonic() + 0.3)
    finally:
        sock.close()
    return frames


def describe(frames):
    names = {0: "DATA", 1: "HEADERS", 3: "RST_STREAM", 4: "SETTINGS", 6: "PING", 7: "GOAWAY", 8: "WINDOW_UPDATE"}
    out = []
    for kind, flags, stream, payload in frames:
        text = f"{names.get(kind, kind)}[{stream}]"
        if kind == GOAWAY and len(payload) >= 8:
            text += f"(code {int.from_bytes(payload[4:8], 'big')})"
        if kind == RST_STREAM and len(payload) == 4:
            text += f"(code {int.from_bytes(payload, 'big')})"
        out.append(text)
    return " ".join(out) or "nothing"


def matches(expected, frames):
    goaways = [int.from_bytes(p[4:8], "big") for k, _, _, p in frames if k == GOAWAY and len(p) >= 8]
    resets = {(s, int.from_bytes(p, "big")) for k, _, s, p in frames if k == RST_STREAM and len(p) == 4}
    if expected[0] == "goaway":
        return expected[1] in goaways
    if expected[0] == "reset":
        # A stream error; a connection error with the same code is allowed too (5.4.1: an
        # endpoint may treat a stream error as a connection error).
        return (expected[1], expected[2]) in resets or expected[2] in goaways
    if expected[0] == "stream-closed":
        return (expected[1], STREAM_CLOSED) in resets or STREAM_CLOSED in goaways
    if expected[0] == "flow-control":
        return (expected[1], FLOW_CONTROL_ERROR) in resets or FLOW_CONTROL_ERROR in goaways
    if expected[0] == "ignored":
        served = any(k in (HEADERS, DATA) and s == expected[1] for k, _, s, _ in frames)
        return not served and not goaways and any(k == PING and f & ACK for k, f, _, _ in frames)
    if expected[0] == "ping":
        return any(k == PING and f & ACK and p == b"pingpong" for k, f, _, p in frames) and not goaways
    return False


def run_all(port, ca, tls=True, only=(), prefix=""):
    """(name, passed, detail) per case."""
    out = []
    for name, rule, make, expected in CASES:
        full = f"{prefix}_conformance_{name}"
        if only and not any(o in full for o in only):
            continue
        try:
            frames = exchange(port, ca, tls, make())
        except OSError as e:
            out.append((full, False, f"{rule}; could not connect: {e}"))
            continue
        ok = matches(expected, frames)
        out.append((full, ok, "" if ok else f"{rule}; expected {expected}, got {describe(frames)}"))
    return out
