#!/usr/bin/env python3
"""A strict stand-in for Apple's APNs provider API, for tests that cannot reach Apple.

It speaks HTTP/2 only (over TLS when --cert/--key are given, cleartext HTTP/2 with prior
knowledge otherwise): ALPN "h2" is offered, and a client that negotiates no ALPN at all (as
aioapns does) is spoken to in HTTP/2 all the same. Every request is checked the way Apple
checks it, and answered with Apple's status, `apns-id` header and JSON `{"reason": ...}` body.

Checks, in this order (the first failing one answers):
  method is POST                                   else 405 MethodNotAllowed
  path is /3/device/<token>                         else 404 BadPath
  token is 64 hexadecimal digits                    else 400 BadDeviceToken
  apns-* headers appear at most once                else 400 DuplicateHeaders
  apns-id, when present, is a UUID                  else 400 BadMessageId
  authorization: bearer <ES256 JWT>                 missing: 403 MissingProviderToken
    header {alg: ES256, kid}, claims {iss, iat}     bad signature, unknown kid, kid not of the
                                                    team iss: 403 InvalidProviderToken
    iat (integer or float) within the last hour,    else 403 ExpiredProviderToken
    at most 60 s in the future
    one team per connection                         another team: 403 InvalidProviderToken
  apns-topic present                                else 400 MissingTopic
  apns-topic is one of --topic                      else 400 BadTopic
  apns-push-type, when present, a known type        else 400 InvalidPushType
  apns-priority, when present, 10, 5 or 1           else 400 BadPriority
  apns-expiration, when present, an integer         else 400 BadExpirationDate
  apns-collapse-id at most 64 bytes                 else 400 BadCollapseId
  body not empty                                    else 400 PayloadEmpty
  body at most 4096 bytes (5120 for voip)           else 413 PayloadTooLarge
Then designated device tokens (by their first four hex digits) answer as Apple would:
  dead...  410 Unregistered, with "timestamp" (ms since the epoch) in the JSON
  bad0...  400 BadDeviceToken
  4290...  429 TooManyRequests
  5000...  500 InternalServerError
  5030...  503 ServiceUnavailable
Every other push: 200, no body, `apns-id` (the request's, verbatim, or a new upper-case UUID)
and `apns-unique-id`. Every answer carries `apns-id`.

Options that misbehave on purpose: --stall (never answer), --goaway-after N (GOAWAY after the
Nth stream of a connection; streams above it are never answered; --goaway-connections K limits
that to the first K connections). A stream over --max-concurrent-streams is refused alone
(RST_STREAM REFUSED_STREAM), the connection goes on.

--record FILE appends one JSON object per request, written before its answer is sent:
  conn, stream, alpn, time, method, path, token, headers (all, pseudo-headers included;
  a repeated header's values as a list), authorization ({sha256 of the header value, jwt_header,
  jwt_claims}, decoded without verification; null when absent), body (UTF-8 text), body_bytes,
  status (null when not answered), reason, apns_id.
"""

import argparse
import asyncio
import base64
import hashlib
import json
import re
import signal
import ssl
import sys
import time
import uuid

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from hyperframe.frame import GoAwayFrame

PUSH_TYPES = {
    "alert", "background", "voip", "complication", "fileprovider", "mdm", "location",
    "liveactivity", "pushtotalk", "widgets", "controls",
}
PRIORITIES = {"10", "5", "1"}
TOKEN_RE = re.compile(r"^[0-9a-fA-F]{64}$")
UUID_RE = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
DESIGNATED = {
    "dead": (410, "Unregistered"),
    "bad0": (400, "BadDeviceToken"),
    "4290": (429, "TooManyRequests"),
    "5000": (500, "InternalServerError"),
    "5030": (503, "ServiceUnavailable"),
}
MAX_PAYLOAD = 4096
MAX_PAYLOAD_VOIP = 5120
TOKEN_MAX_AGE = 3600
TOKEN_MAX_SKEW = 60
# Bytes of a body kept for checking and the record; larger bodies are only counted.
BODY_KEEP = 64 * 1024


def b64url_decode(text):
    text = text.strip()
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class Keys:
    """Provider keys: kid -> (team, public key)."""

    def __init__(self):
        self.by_kid = {}

    def add(self, spec):
        try:
            team, kid, path = spec.split(":", 2)
        except ValueError:
            raise SystemExit(f"standin: --team wants TEAMID:KEYID:PEMFILE, got {spec!r}")
        with open(path, "rb") as f:
            pem = f.read()
        if b"PRIVATE KEY" in pem:
            key = serialization.load_pem_private_key(pem, password=None).public_key()
        else:
            key = serialization.load_pem_public_key(pem)
        if not isinstance(key, ec.EllipticCurvePublicKey) or key.curve.name != "secp256r1":
            raise SystemExit(f"standin: {path} is not a P-256 key")
        self.by_kid[kid] = (team, key)


class TokenCheck:
    """Verifies provider tokens; a token's signature is verified once and remembered."""

    def __init__(self, keys):
        self.keys = keys
        self.cache = {}

    def decode(self, value):
        """(digest, jwt_header, jwt_claims, error) for an authorization header value; the
        header and claims are decoded without verification, error is None or a reason that
        does not depend on the time."""
        hit = self.cache.get(value)
        if hit is not None:
            return hit
        if len(self.cache) > 50000:
            self.cache.clear()
        digest = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
        jwt_header = jwt_claims = None
        error = None
        try:
            scheme, _, token = value.partition(" ")
            if scheme.lower() != "bearer" or not token:
                raise ValueError("not a bearer token")
            parts = token.strip().split(".")
            if len(parts) != 3:
                raise ValueError("not a JWT")
            jwt_header = json.loads(b64url_decode(parts[0]))
            jwt_claims = json.loads(b64url_decode(parts[1]))
            signature = b64url_decode(parts[2])
            if not isinstance(jwt_header, dict) or not isinstance(jwt_claims, dict):
                raise ValueError("JWT parts are not objects")
            if jwt_header.get("alg") != "ES256":
                raise ValueError("alg is not ES256")
            kid = jwt_header.get("kid")
            if kid not in self.keys.by_kid:
                raise ValueError("unknown kid")
            team, key = self.keys.by_kid[kid]
            if jwt_claims.get("iss") != team:
                raise ValueError("iss is not the key's team")
            iat = jwt_claims.get("iat")
            if isinstance(iat, bool) or not isinstance(iat, (int, float)):
                raise ValueError("iat is not a number")
            if len(signature) != 64:
                raise ValueError("signature is not 64 bytes (r||s)")
            der = encode_dss_signature(int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:], "big"))
            key.verify(der, (parts[0] + "." + parts[1]).encode("ascii"), ec.ECDSA(hashes.SHA256()))
        except (ValueError, InvalidSignature, UnicodeError, TypeError, AttributeError):
            error = "InvalidProviderToken"
        result = (digest, jwt_header, jwt_claims, error)
        self.cache[value] = result
        return result


class Recorder:
    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8") if path else None
        self.pending = []

    def add(self, entry):
        if self.file:
            self.pending.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))

    def flush(self):
        if self.file and self.pending:
            self.file.write("\n".join(self.pending) + "\n")
            self.file.flush()
            self.pending.clear()


class Stream:
    __slots__ = ("headers", "body", "size", "recorded")

    def __init__(self, headers):
        self.headers = headers
        self.body = bytearray()
        self.size = 0
        self.recorded = False


class APNsProtocol(asyncio.Protocol):
    next_id = 0

    def __init__(self, server):
        self.server = server
        APNsProtocol.next_id += 1
        self.conn_id = APNsProtocol.next_id
        self.transport = None
        self.alpn = None
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.local_settings = self.settings(server.opts.max_concurrent_streams)
        self.streams = {}
        self.pending = {}  # stream id -> body bytes waiting for flow-control window
        self.team = None
        self.seen = 0
        self.goaway_last = None
        self.closing = False

    @staticmethod
    def settings(max_streams):
        return h2.settings.Settings(
            client=False,
            initial_values={
                h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_streams,
                h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
                h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
            },
        )

    # -- transport --------------------------------------------------------------------------

    def connection_made(self, transport):
        self.transport = transport
        ssl_object = transport.get_extra_info("ssl_object")
        self.alpn = ssl_object.selected_alpn_protocol() if ssl_object else "h2c"
        self.server.connections.add(self)
        self.conn.initiate_connection()
        # The SETTINGS just sent advertise --max-concurrent-streams; h2 itself would treat a
        # stream over it as a connection error, so it gets no limit and on_request refuses such
        # a stream alone (REFUSED_STREAM), as RFC 9113 section 5.1.2 allows.
        self.conn.local_settings = self.settings(2**31 - 1)
        self.conn.increment_flow_control_window((1 << 24) - 65535)
        self.flush()

    def connection_lost(self, exc):
        self.server.connections.discard(self)
        for sid, stream in list(self.streams.items()):
            if not stream.recorded:
                above = self.goaway_last is not None and sid > self.goaway_last
                self.record(sid, stream, None, "not answered: above the GOAWAY's last_stream_id" if above
                            else "connection closed before an answer", None)
        self.streams.clear()
        self.server.recorder.flush()

    def flush(self):
        # The record goes out before the answers it describes.
        self.server.recorder.flush()
        data = self.conn.data_to_send()
        if data and self.transport and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data):
        try:
            events = self.conn.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.on_request(event)
            elif isinstance(event, h2.events.DataReceived):
                self.on_data(event)
            elif isinstance(event, h2.events.StreamEnded):
                self.on_end(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                stream = self.streams.pop(event.stream_id, None)
                self.pending.pop(event.stream_id, None)
                if stream is not None:
                    self.record(event.stream_id, stream, None, "reset by the client", None)
            elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                self.send_pending()
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.closing = True
        self.flush()
        if self.closing and not self.streams and not self.pending:
            self.transport.close()

    # -- requests ---------------------------------------------------------------------------

    def on_request(self, event):
        if len(self.streams) >= self.server.opts.max_concurrent_streams:
            stream = Stream(event.headers)
            self.record(event.stream_id, stream, None, "refused: over SETTINGS_MAX_CONCURRENT_STREAMS", None)
            try:
                self.conn.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            except h2.exceptions.ProtocolError:
                pass
            return
        self.streams[event.stream_id] = Stream(event.headers)
        self.seen += 1
        n = self.server.opts.goaway_after
        if n and self.seen == n and self.goaway_last is None and self.server.goaway_applies(self.conn_id):
            self.goaway_last = event.stream_id
            # Written by hand: h2 refuses to send anything after its own GOAWAY, and the
            # streams at or below last_stream_id still get their answers.
            frame = GoAwayFrame(0)
            frame.last_stream_id = event.stream_id
            frame.error_code = 0
            self.flush()
            self.transport.write(frame.serialize())

    def on_data(self, event):
        stream = self.streams.get(event.stream_id)
        if stream is not None:
            stream.size += len(event.data)
            if len(stream.body) < BODY_KEEP:
                stream.body += event.data[: BODY_KEEP - len(stream.body)]
        try:
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        except h2.exceptions.StreamClosedError:
            pass

    def on_end(self, sid):
        stream = self.streams.get(sid)
        if stream is None:
            return
        if self.goaway_last is not None and sid > self.goaway_last:
            del self.streams[sid]
            self.record(sid, stream, None, "not answered: above the GOAWAY's last_stream_id", None)
            self.maybe_close_after_goaway()
            return
        if self.server.opts.stall:
            # Kept open and never answered.
            self.record(sid, stream, None, "stalled", None)
            return
        del self.streams[sid]
        status, reason, apns_id, extra = self.check(stream)
        self.record(sid, stream, status, reason, apns_id)
        self.answer(sid, status, reason, apns_id, extra)
        self.maybe_close_after_goaway()

    def maybe_close_after_goaway(self):
        if self.goaway_last is None:
            return
        if any(s <= self.goaway_last for s in self.streams) or self.pending:
            return
        try:
            self.conn.close_connection(last_stream_id=self.goaway_last)
        except h2.exceptions.ProtocolError:
            pass
        self.flush()
        self.transport.close()

    def check(self, stream):
        """(status, reason, apns_id, extra JSON fields) for a complete request."""
        opts = self.server.opts
        headers = {}
        duplicate = False
        for name, value in stream.headers:
            if name in headers:
                if name.startswith("apns-") or name == "authorization":
                    duplicate = True
                continue
            headers[name] = value
        apns_id = headers.get("apns-id")
        if apns_id is None or not UUID_RE.match(apns_id):
            answer_id = str(uuid.uuid4()).upper()
        else:
            answer_id = apns_id

        def fail(status, reason, **extra):
            return status, reason, answer_id, extra

        if headers.get(":method") != "POST":
            return fail(405, "MethodNotAllowed")
        path = headers.get(":path", "")
        if not path.startswith("/3/device/"):
            return fail(404, "BadPath")
        token = path[len("/3/device/"):]
        if not TOKEN_RE.match(token):
            return fail(400, "BadDeviceToken")
        if duplicate:
            return fail(400, "DuplicateHeaders")
        if apns_id is not None and not UUID_RE.match(apns_id):
            return fail(400, "BadMessageId")

        authorization = headers.get("authorization")
        if not authorization:
            return fail(403, "MissingProviderToken")
        _, _, claims, error = self.server.tokens.decode(authorization)
        if error:
            return fail(403, error)
        age = time.time() - claims["iat"]
        if age > TOKEN_MAX_AGE or age < -TOKEN_MAX_SKEW:
            return fail(403, "ExpiredProviderToken")
        if self.team is None:
            self.team = claims["iss"]
        elif self.team != claims["iss"]:
            return fail(403, "InvalidProviderToken")

        topic = headers.get("apns-topic")
        if not topic:
            return fail(400, "MissingTopic")
        if topic not in opts.topic:
            return fail(400, "BadTopic")
        push_type = headers.get("apns-push-type")
        if push_type is not None and push_type not in PUSH_TYPES:
            return fail(400, "InvalidPushType")
        priority = headers.get("apns-priority")
        if priority is not None and priority not in PRIORITIES:
            return fail(400, "BadPriority")
        expiration = headers.get("apns-expiration")
        if expiration is not None and not re.fullmatch(r"[0-9]{1,19}", expiration):
            return fail(400, "BadExpirationDate")
        collapse = headers.get("apns-collapse-id")
        if collapse is not None and len(collapse.encode("utf-8", "surrogateescape")) > 64:
            return fail(400, "BadCollapseId")
        if stream.size == 0:
            return fail(400, "PayloadEmpty")
        if stream.size > (MAX_PAYLOAD_VOIP if push_type == "voip" else MAX_PAYLOAD):
            return fail(413, "PayloadTooLarge")

        designated = DESIGNATED.get(token[:4].lower())
        if designated:
            status, reason = designated
            if status == 410:
                return fail(status, reason, timestamp=int(time.time() * 1000) - 86_400_000)
            return fail(status, reason)
        return 200, None, answer_id, {}

    def answer(self, sid, status, reason, apns_id, extra):
        try:
            if status == 200:
                self.conn.send_headers(sid, [
                    (":status", "200"),
                    ("apns-id", apns_id),
                    ("apns-unique-id", str(uuid.uuid4())),
                ], end_stream=True)
                return
            body = json.dumps({"reason": reason, **extra}, separators=(",", ":")).encode()
            self.conn.send_headers(sid, [
                (":status", str(status)),
                ("apns-id", apns_id),
                ("content-type", "application/json"),
                ("content-length", str(len(body))),
            ])
            self.pending[sid] = body
            self.send_pending()
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self.pending.pop(sid, None)

    def send_pending(self):
        for sid in list(self.pending):
            body = self.pending[sid]
            try:
                # One DATA frame per body: aioapns parses each DATA frame as a whole JSON text.
                if self.conn.local_flow_control_window(sid) < len(body):
                    continue
                self.conn.send_data(sid, body, end_stream=True)
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
                pass
            del self.pending[sid]

    def record(self, sid, stream, status, reason, apns_id):
        rec = self.server.recorder
        stream.recorded = True
        if rec.file is None:
            return
        headers = {}
        authorization = None
        for name, value in stream.headers:
            if name == "authorization":
                digest, jwt_header, jwt_claims, _ = self.server.tokens.decode(value)
                authorization = {"sha256": digest, "jwt_header": jwt_header, "jwt_claims": jwt_claims}
                value = "sha256:" + digest
            if name in headers:
                old = headers[name]
                headers[name] = (old if isinstance(old, list) else [old]) + [value]
            else:
                headers[name] = value
        path = headers.get(":path", "")
        token = path[len("/3/device/"):] if isinstance(path, str) and path.startswith("/3/device/") else None
        rec.add({
            "conn": self.conn_id,
            "stream": sid,
            "alpn": self.alpn,
            "time": round(time.time(), 6),
            "method": headers.get(":method"),
            "path": path,
            "token": token,
            "headers": headers,
            "authorization": authorization,
            "body": bytes(stream.body).decode("utf-8", "replace"),
            "body_bytes": stream.size,
            "status": status,
            "reason": reason,
            "apns_id": apns_id,
        })


class Server:
    def __init__(self, opts):
        self.opts = opts
        keys = Keys()
        for spec in opts.team:
            keys.add(spec)
        self.tokens = TokenCheck(keys)
        self.recorder = Recorder(opts.record)
        self.connections = set()
        self.goaway_connections = set()

    def goaway_applies(self, conn_id):
        limit = self.opts.goaway_connections
        if limit and conn_id not in self.goaway_connections and len(self.goaway_connections) >= limit:
            return False
        self.goaway_connections.add(conn_id)
        return True

    def ssl_context(self):
        if not self.opts.cert:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.opts.cert, self.opts.key)
        ctx.set_alpn_protocols(["h2"])
        return ctx

    async def run(self):
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: APNsProtocol(self), self.opts.host, self.opts.port, ssl=self.ssl_context(), backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(f"standin listening on {port}", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()
        for c in list(self.connections):
            c.transport.close()
        self.recorder.flush()


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="standin.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=__doc__,
        epilog="Example:\n  standin.py --port 0 --cert server.pem --key server.key "
               "--team ABCDE12345:KEY1234567:AuthKey.pub.pem --topic com.example.app --record rec.jsonl",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0,
                        help="port; 0 picks a free one. Prints 'standin listening on PORT' once listening")
    parser.add_argument("--cert", help="server certificate chain (PEM); without --cert/--key: cleartext h2c")
    parser.add_argument("--key", help="server private key (PEM)")
    parser.add_argument("--team", action="append", default=[], required=True, metavar="TEAMID:KEYID:PEMFILE",
                        help="a provider key: its team (iss), key ID (kid) and P-256 public key in PEM "
                             "(a private key such as a .p8 also works); repeatable")
    parser.add_argument("--topic", action="append", default=[], required=True,
                        help="an accepted apns-topic; repeatable")
    parser.add_argument("--record", help="append one JSON line per request to this file")
    parser.add_argument("--stall", action="store_true",
                        help="accept TLS and HTTP/2 but never answer a stream")
    parser.add_argument("--goaway-after", type=int, default=0, metavar="N",
                        help="after the Nth stream of a connection send GOAWAY with last_stream_id = that "
                             "stream; answer streams at or below it, never those above, then close")
    parser.add_argument("--goaway-connections", type=int, default=0, metavar="K",
                        help="apply --goaway-after to the first K connections only (default 0: every one)")
    parser.add_argument("--max-concurrent-streams", type=int, default=1000, metavar="N",
                        help="SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)")
    opts = parser.parse_args(argv)
    if bool(opts.cert) != bool(opts.key):
        parser.error("--cert and --key go together")
    try:
        asyncio.run(Server(opts).run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
