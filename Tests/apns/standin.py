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
  on a connection with a client certificate (--client-ca; certificate auth), instead of the
  token checks below (authorization is then ignored, as Apple does):
    certificate expired, not yet valid, or its
    serial listed by --revoked                      403 BadCertificate
    Apple's environment OIDs present (.3.1 development,
    .3.2 production) without --environment's        403 BadCertificateEnvironment
    no apns-topic and more than one topic           400 MissingTopic (one topic: it is used)
    apns-topic not the subject's UID nor in Apple's
    topics extension (1.2.840.113635.100.6.3.6)     400 TopicDisallowed
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
  jwt_claims}, decoded without verification; null when absent), certificate (the connection's
  client certificate: {uid, cn, serial, topics}; null without one), body (UTF-8 text),
  body_bytes, status (null when not answered), reason, apns_id.
"""

import base64
import json
import os
import re
import ssl
import sys
import time
import uuid

import datetime

import h2.errors
import h2.exceptions
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature
from hyperframe.frame import GoAwayFrame

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import standin_common  # noqa: E402
from standin_common import Stream, h2_settings, record_headers, sha256_hex  # noqa: E402

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
        digest = sha256_hex(value)
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


DEVELOPMENT_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.3.1")
PRODUCTION_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.3.2")
TOPICS_OID = x509.ObjectIdentifier("1.2.840.113635.100.6.3.6")
UID_OID = x509.ObjectIdentifier("0.9.2342.19200300.100.1.1")


def der_items(data):
    """The (tag, value) pairs of a run of DER elements."""
    items, i = [], 0
    while i + 2 <= len(data):
        tag, length = data[i], data[i + 1]
        i += 2
        if length & 0x80:
            count = length & 0x7F
            length = int.from_bytes(data[i:i + count], "big")
            i += count
        items.append((tag, data[i:i + length]))
        i += length
    return items


def extension_topics(der):
    """Apple's topics extension: a SEQUENCE of UTF8String topics, each followed by a SEQUENCE of
    its types."""
    (tag, body), = der_items(der)[:1] or [(0, b"")]
    return [value.decode("utf-8") for tag, value in der_items(body) if tag == 0x0C] if tag == 0x30 else []


class ClientCertificate:
    """What a client's TLS certificate says, as Apple reads it."""

    def __init__(self, der):
        cert = x509.load_der_x509_certificate(der)
        self.serial = cert.serial_number
        uids = cert.subject.get_attributes_for_oid(UID_OID)
        cns = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)
        self.uid = uids[0].value if uids else None
        self.cn = cns[0].value if cns else None
        self.not_before = cert.not_valid_before_utc
        self.not_after = cert.not_valid_after_utc
        oids = {e.oid for e in cert.extensions}
        self.environments = {name for oid, name in ((DEVELOPMENT_OID, "development"), (PRODUCTION_OID, "production"))
                             if oid in oids}
        self.topics = []
        if TOPICS_OID in oids:
            self.topics = extension_topics(cert.extensions.get_extension_for_oid(TOPICS_OID).value.value)
        if self.uid and self.uid not in self.topics:
            self.topics.insert(0, self.uid)

    def record(self):
        return {"uid": self.uid, "cn": self.cn, "serial": self.serial, "topics": self.topics}


class APNsHandler(standin_common.H2Handler):
    """One HTTP/2 connection, answered as Apple answers; --goaway-after and --stall applied."""

    body_keep = BODY_KEEP
    whole_frames = True  # aioapns parses each DATA frame as a whole JSON text

    def __init__(self, conn):
        super().__init__(conn)
        self.team = None
        self.seen = 0
        self.goaway_last = None
        self.certificate = None
        ssl_object = conn.transport.get_extra_info("ssl_object") if conn.transport else None
        der = ssl_object.getpeercert(binary_form=True) if ssl_object is not None else None
        if der:
            self.certificate = ClientCertificate(der)

    @property
    def max_streams(self):
        return self.server.opts.max_concurrent_streams

    def settings_sent(self):
        # The SETTINGS just sent advertise --max-concurrent-streams; h2 itself would treat a
        # stream over it as a connection error, so it gets no limit and on_request refuses such
        # a stream alone (REFUSED_STREAM), as RFC 9113 section 5.1.2 allows.
        self.h2.local_settings = h2_settings(2**31 - 1)

    def lost_note(self, sid):
        if self.goaway_last is not None and sid > self.goaway_last:
            return "not answered: above the GOAWAY's last_stream_id"
        return "connection closed before an answer"

    def on_request(self, event):
        if len(self.streams) >= self.max_streams:
            stream = Stream(event.headers)
            self.record(event.stream_id, stream, None, "refused: over SETTINGS_MAX_CONCURRENT_STREAMS", None)
            try:
                self.h2.reset_stream(event.stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            except h2.exceptions.ProtocolError:
                pass
            return
        super().on_request(event)
        self.seen += 1
        n = self.server.opts.goaway_after
        if n and self.seen == n and self.goaway_last is None and self.server.goaway_applies(self.conn.conn_id):
            self.goaway_last = event.stream_id
            # Written by hand: h2 refuses to send anything after its own GOAWAY, and the
            # streams at or below last_stream_id still get their answers.
            frame = GoAwayFrame(0)
            frame.last_stream_id = event.stream_id
            frame.error_code = 0
            self.flush()
            self.conn.transport.write(frame.serialize())

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
            self.h2.close_connection(last_stream_id=self.goaway_last)
        except h2.exceptions.ProtocolError:
            pass
        self.flush()
        self.conn.transport.close()

    def check(self, stream):
        """(status, reason, apns_id, extra JSON fields) for a complete request."""
        opts = self.server.opts
        headers = standin_common.first_values(stream.headers)
        once = [name for name, _ in stream.headers if name.startswith("apns-") or name == "authorization"]
        duplicate = len(once) != len(set(once))
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

        if self.certificate is not None:
            # Certificate auth: the certificate decides; authorization is ignored.
            cert = self.certificate
            now = datetime.datetime.now(datetime.timezone.utc)
            if not cert.not_before <= now <= cert.not_after or cert.serial in opts.revoked:
                return fail(403, "BadCertificate")
            if cert.environments and opts.environment not in cert.environments:
                return fail(403, "BadCertificateEnvironment")
            topic = headers.get("apns-topic")
            if not topic:
                if len(cert.topics) != 1:
                    return fail(400, "MissingTopic")
                topic = cert.topics[0]
            if topic not in cert.topics:
                return fail(400, "TopicDisallowed")
            return self.check_push(stream, headers, fail, answer_id, token, topic_checked=True)

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

        return self.check_push(stream, headers, fail, answer_id, token)

    def check_push(self, stream, headers, fail, answer_id, token, topic_checked=False):
        """The checks after authentication: the topic (unless the certificate checked it), push
        type, priority, expiration, collapse id, body; then the designated device tokens."""
        opts = self.server.opts
        topic = headers.get("apns-topic")
        if not topic_checked and not topic:
            return fail(400, "MissingTopic")
        if not topic_checked and topic not in opts.topic:
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
        if status == 200:
            self.respond(sid, [(":status", "200"), ("apns-id", apns_id), ("apns-unique-id", str(uuid.uuid4()))])
            return
        body = json.dumps({"reason": reason, **extra}, separators=(",", ":")).encode()
        self.respond(sid, [
            (":status", str(status)),
            ("apns-id", apns_id),
            ("content-type", "application/json"),
            ("content-length", str(len(body))),
        ], body)

    def record_unanswered(self, sid, stream, note):
        self.record(sid, stream, None, note, None)

    def record(self, sid, stream, status, reason, apns_id):
        rec = self.server.recorder
        stream.recorded = True
        if rec.file is None:
            return
        authorization = None
        for name, value in stream.headers:
            if name == "authorization":
                digest, jwt_header, jwt_claims, _ = self.server.tokens.decode(value)
                authorization = {"sha256": digest, "jwt_header": jwt_header, "jwt_claims": jwt_claims}
        headers = record_headers(stream.headers)
        path = headers.get(":path", "")
        token = path[len("/3/device/"):] if isinstance(path, str) and path.startswith("/3/device/") else None
        rec.add({
            "conn": self.conn.conn_id,
            "stream": sid,
            "alpn": self.conn.alpn if self.conn.tls else "h2c",
            "time": round(time.time(), 6),
            "method": headers.get(":method"),
            "path": path,
            "token": token,
            "headers": headers,
            "authorization": authorization,
            "certificate": self.certificate.record() if self.certificate else None,
            "body": bytes(stream.body).decode("utf-8", "replace"),
            "body_bytes": stream.size,
            "status": status,
            "reason": reason,
            "apns_id": apns_id,
        })


class Server(standin_common.Server):
    """HTTP/2 only: a client that negotiates no ALPN is spoken to in HTTP/2 all the same."""

    h2_handler = APNsHandler

    def ssl_context(self):
        ctx = super().ssl_context()
        if ctx is not None and self.opts.client_ca:
            # Certificates are asked for and verified against the CA; their dates are checked
            # per push (403 BadCertificate), as Apple answers an expired one.
            ctx.verify_mode = ssl.CERT_OPTIONAL
            ctx.load_verify_locations(self.opts.client_ca)
            ctx.verify_flags |= 0x200000  # X509_V_FLAG_NO_CHECK_TIME
        return ctx

    def __init__(self, opts):
        keys = Keys()
        for spec in opts.team:
            keys.add(spec)
        self.tokens = TokenCheck(keys)
        super().__init__(opts)
        self.goaway_connections = set()

    def goaway_applies(self, conn_id):
        limit = self.opts.goaway_connections
        if limit and conn_id not in self.goaway_connections and len(self.goaway_connections) >= limit:
            return False
        self.goaway_connections.add(conn_id)
        return True


def main(argv=None):
    parser = standin_common.arg_parser(
        __doc__,
        "standin.py --port 0 --cert server.pem --key server.key "
        "--team ABCDE12345:KEY1234567:AuthKey.pub.pem --topic com.example.app --record rec.jsonl",
        cleartext="cleartext h2c", stall="accept TLS and HTTP/2 but never answer a stream")
    parser.add_argument("--team", action="append", default=[], required=True, metavar="TEAMID:KEYID:PEMFILE",
                        help="a provider key: its team (iss), key ID (kid) and P-256 public key in PEM "
                             "(a private key such as a .p8 also works); repeatable")
    parser.add_argument("--topic", action="append", default=[], required=True,
                        help="an accepted apns-topic; repeatable")
    parser.add_argument("--goaway-after", type=int, default=0, metavar="N",
                        help="after the Nth stream of a connection send GOAWAY with last_stream_id = that "
                             "stream; answer streams at or below it, never those above, then close")
    parser.add_argument("--goaway-connections", type=int, default=0, metavar="K",
                        help="apply --goaway-after to the first K connections only (default 0: every one)")
    parser.add_argument("--max-concurrent-streams", type=int, default=1000, metavar="N",
                        help="SETTINGS_MAX_CONCURRENT_STREAMS (default 1000)")
    parser.add_argument("--client-ca", metavar="PEMFILE",
                        help="ask for client certificates signed by this CA (Apple's, for certificate auth)")
    parser.add_argument("--environment", choices=("production", "development"), default="production",
                        help="this server's environment, for BadCertificateEnvironment (default production)")
    parser.add_argument("--revoked", action="append", type=int, default=[], metavar="SERIAL",
                        help="a revoked client certificate's serial number (403 BadCertificate); repeatable")
    standin_common.serve(Server, parser, argv)


if __name__ == "__main__":
    sys.exit(main())
