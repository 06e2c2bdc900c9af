#!/usr/bin/env python3
"""End-to-end test of the APNs relay (`pushmedia serve --apns-port`).

Apple cannot be reached from here, so the upstream is standin.py (a strict stand-in for Apple's
provider API) and the clients are real, unmodified APNs libraries from PyPI (aioapns: TLS
without ALPN; pyapns_client: httpx with ALPN h2), a raw h2 client and h2load. Everything runs on
127.0.0.1: a test CA, server certificate and ES256 provider key made here, a media origin
(http.server) serving samples/media/banner.webp under paths without an extension, the stand-in
and several relays, each a subprocess killed at the end.

Each check prints `ok  name` or `FAIL name: why`; the last line counts them; exit 1 when any
failed. The stand-in checks come first and need no relay.

  python3 Tests/apns/relay_test.py [--bin .build/debug/pushmedia] [--standin-only] [--only NAME]...
"""

import asyncio
import base64
import datetime
import json
import logging
import os
import re
import secrets
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import uuid

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.hazmat.primitives.serialization import pkcs12  # noqa: F401 (serialization.pkcs12)
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import relay_harness  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tracing"))
from trace_checks import expect_logged, expect_relayed_push, named, relay_receiver, trace, traceparent  # noqa: E402
from relay_harness import (  # noqa: E402
    CHECKS, CheckFailed, check, expect, free_port, http_get, image_size, private_pem, run_checks)

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "standin.py")
NODE_SENDER = os.path.join(HERE, "node-sender.js")

TEAM = "TEAM123456"
KEY_ID = "KEY1234567"
OTHER_TEAM = "OTHER12345"
OTHER_KEY_ID = "OTHERKEY12"
TOPIC = "com.example.pushmedia"
ROTATED_KEY_ID = "ROTATED123"
# The held-credentials checks' apps: two of team TEAM (a key each way), one of OTHER_TEAM, and a
# certificate app.
SHOP, NEWS, LEGACY = "com.shop.app", "com.news.app", "com.legacy.app"

RICH_TEXT = {"title": "Hi", "body": "Text"}
CUSTOM = {"k": [1, 2]}

log = logging.getLogger("relay_test")


# The stand-in answers device tokens starting with these with errors (see standin.py --help).
DESIGNATED = ("dead", "bad0", "4290", "5000", "5030")


def device_token(prefix=""):
    while True:
        token = (prefix + secrets.token_hex(32))[:64]
        if prefix or not token.startswith(DESIGNATED):
            return token


# -- material: CA, server certificate, provider keys, tokens ---------------------------------

def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Material(relay_harness.Material):
    """The test CA and server certificate, a client certificate, and provider keys."""

    def __init__(self, folder):
        super().__init__(folder)
        client_key = ec.generate_private_key(ec.SECP256R1())
        client = self.issue("push sender", client_key, ExtendedKeyUsageOID.CLIENT_AUTH)
        self.client_cert = self.write("client.pem", client.public_bytes(serialization.Encoding.PEM))
        self.client_key = self.write("client.key", private_pem(client_key))
        # Provider keys as Apple issues them: AuthKey_<kid>.p8, PKCS #8 PEM.
        self.provider_key = ec.generate_private_key(ec.SECP256R1())
        self.p8 = self.write(f"AuthKey_{KEY_ID}.p8", private_pem(self.provider_key))
        self.p8_text = open(self.p8).read()
        self.other_key = ec.generate_private_key(ec.SECP256R1())
        self.other_p8 = self.write(f"AuthKey_{OTHER_KEY_ID}.p8", private_pem(self.other_key))
        self.stranger_key = ec.generate_private_key(ec.SECP256R1())
        self.stranger_p8 = self.write("AuthKey_STRANGERK1.p8", private_pem(self.stranger_key))
        # Keys the relay holds are the owner's only, as it requires.
        for path in (self.p8, self.other_p8):
            os.chmod(path, 0o600)
        self.rotated_key = ec.generate_private_key(ec.SECP256R1())
        self.rotated_p8 = self.write(f"AuthKey_{ROTATED_KEY_ID}.p8", private_pem(self.rotated_key))
        os.chmod(self.rotated_p8, 0o600)
        self.apple = AppleCA(self)

    def jwt(self, team=TEAM, kid=KEY_ID, iat=None, key=None):
        key = key or (self.other_key if kid == OTHER_KEY_ID else self.provider_key)
        header = b64url(json.dumps({"alg": "ES256", "kid": kid}).encode())
        claims = b64url(json.dumps({"iss": team, "iat": int(time.time()) if iat is None else iat}).encode())
        signing_input = f"{header}.{claims}"
        r, s = decode_dss_signature(key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return signing_input + "." + b64url(r.to_bytes(32, "big") + s.to_bytes(32, "big"))

    def bearer(self, **kw):
        return "bearer " + self.jwt(**kw)

    def client_context(self, alpn=True, certificate=False):
        ctx = ssl.create_default_context(cafile=self.ca)
        if alpn:
            ctx.set_alpn_protocols(["h2"])
        if certificate:
            ctx.load_cert_chain(self.client_cert, self.client_key)
        return ctx


def der(tag, body):
    """A DER element."""
    n = len(body)
    length = bytes([n]) if n < 0x80 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([tag]) + length + body


class AppleCA:
    """A stand-in for Apple's WWDR CA and the push certificates it issues: subject UID (the bundle
    ID) and CN "Apple Push Services: <bundle>", Apple's environment OIDs and topics extension."""

    DEVELOPMENT = x509.ObjectIdentifier("1.2.840.113635.100.6.3.1")
    PRODUCTION = x509.ObjectIdentifier("1.2.840.113635.100.6.3.2")
    TOPICS = x509.ObjectIdentifier("1.2.840.113635.100.6.3.6")
    PASSWORD = "keychain-export-pw"

    def __init__(self, material):
        self.m = material
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Test Worldwide Developer Relations CA"),
                               x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Test Apple")])
        now = material.now
        ca = (x509.CertificateBuilder().subject_name(self.name).issuer_name(self.name)
              .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
              .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=30))
              .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
              .sign(self.key, hashes.SHA256()))
        self.ca = material.write("apple-ca.pem", ca.public_bytes(serialization.Encoding.PEM))
        self.password_file = material.write("legacy.pass", (self.PASSWORD + "\n").encode())
        os.chmod(self.password_file, 0o600)

    def issue(self, name, bundle, environments=("production",), topics=("app", "voip"), expired=False):
        """A push certificate for bundle (RSA 2048, as Apple issues them): name.pem holds it and its
        key; name.p12 the same as PKCS#12 (AES, password PASSWORD). Returns (cert, pem path)."""
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        now = self.m.now
        subject = x509.Name([x509.NameAttribute(x509.ObjectIdentifier("0.9.2342.19200300.100.1.1"), bundle),
                             x509.NameAttribute(NameOID.COMMON_NAME, f"Apple Push Services: {bundle}"),
                             x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, TEAM),
                             x509.NameAttribute(NameOID.COUNTRY_NAME, "US")])
        builder = (x509.CertificateBuilder().subject_name(subject).issuer_name(self.name)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=400 if expired else 1))
                   .not_valid_after(now - datetime.timedelta(days=2) if expired else now + datetime.timedelta(days=20))
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False))
        for environment in environments:
            oid = self.PRODUCTION if environment == "production" else self.DEVELOPMENT
            builder = builder.add_extension(x509.UnrecognizedExtension(oid, b"\x05\x00"), critical=False)
        if topics:
            items = b""
            for suffix in topics:
                topic = bundle if suffix == "app" else f"{bundle}.{suffix}"
                items += der(0x0C, topic.encode()) + der(0x30, der(0x0C, suffix.encode()))
            builder = builder.add_extension(x509.UnrecognizedExtension(self.TOPICS, der(0x30, items)), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        pem = self.m.write(f"{name}.pem", cert.public_bytes(serialization.Encoding.PEM) + private_pem(key))
        os.chmod(pem, 0o600)
        p12 = serialization.pkcs12.serialize_key_and_certificates(
            name.encode(), key, cert, None, serialization.BestAvailableEncryption(self.PASSWORD.encode()))
        os.chmod(self.m.write(f"{name}.p12", p12), 0o600)
        return cert, pem

    def legacy_p12(self, name):
        """name.pem as Keychain exports it: PKCS#12 with RC2-40 for the certificate, 3DES for the
        key, a SHA-1 MAC (OpenSSL 3 with its legacy provider). Returns the path."""
        out = os.path.join(self.m.folder, f"{name}-legacy.p12")
        run = subprocess.run(
            ["openssl", "pkcs12", "-export", "-legacy", "-in", os.path.join(self.m.folder, f"{name}.pem"),
             "-out", out, "-passout", f"pass:{self.PASSWORD}", "-certpbe", "PBE-SHA1-RC2-40",
             "-keypbe", "PBE-SHA1-3DES", "-macalg", "sha1"], capture_output=True, timeout=30)
        if run.returncode != 0:
            raise CheckFailed(f"openssl pkcs12 -export -legacy failed: {run.stderr.decode(errors='replace')[-300:]}")
        info = subprocess.run(["openssl", "pkcs12", "-legacy", "-info", "-noout", "-in", out, "-passin",
                               f"pass:{self.PASSWORD}"], capture_output=True, timeout=30)
        text = (info.stdout + info.stderr).decode(errors="replace")
        if "RC2" not in text:
            raise CheckFailed(f"{out} is not RC2-40 encrypted: {text[-300:]}")
        os.chmod(out, 0o600)
        return out


class Relay(relay_harness.Relay):
    """A relay; h2() sends requests to it on one HTTP/2 connection."""

    def h2(self, world, requests, **kw):
        ctx = world.material.client_context() if self.tls else None
        return h2_run(self.port, requests, ssl_context=ctx, **kw)


# -- a raw HTTP/2 client ------------------------------------------------------------------------

class Response:
    def __init__(self):
        self.status = None
        self.headers = {}
        self.body = bytearray()
        self.error = None
        self.elapsed = None

    def json(self):
        try:
            return json.loads(bytes(self.body))
        except ValueError:
            return None

    def __repr__(self):
        if self.error:
            return f"<error {self.error} after {self.elapsed:.2f}s>"
        return f"<{self.status} {dict(self.headers)} {bytes(self.body)[:200]!r}>"


class Request:
    def __init__(self, path, headers=(), body=b"", method="POST"):
        self.method = method
        self.path = path
        self.headers = list(headers)
        self.body = body


async def h2_exchange(port, requests, ssl_context=None, timeout=15.0, concurrency=100, sequential=False):
    """Sends requests on one HTTP/2 connection (TLS when ssl_context is given, h2c otherwise),
    up to `concurrency` at once (one at a time when sequential), and returns a Response for each
    (with .error set for a stream that was refused, reset or never answered)."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.wait_for(
        asyncio.open_connection("127.0.0.1", port, ssl=ssl_context,
                                server_hostname="localhost" if ssl_context else None), timeout)
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    conn.increment_flow_control_window((1 << 24) - 65535)
    writer.write(conn.data_to_send())
    streams = {}
    window = asyncio.Event()
    closed = []

    def finish(sid, error=None):
        entry = streams.pop(sid, None)
        if entry is None:
            return
        response, future, started = entry
        response.elapsed = loop.time() - started
        if error:
            response.error = error
        if not future.done():
            future.set_result(response)

    async def read_loop():
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError as e:
                    closed.append(f"protocol error: {e}")
                    break
                for event in events:
                    if isinstance(event, h2.events.ResponseReceived):
                        if event.stream_id in streams:
                            streams[event.stream_id][0].status = int(dict(event.headers)[":status"])
                            streams[event.stream_id][0].headers = dict(event.headers)
                    elif isinstance(event, h2.events.DataReceived):
                        if event.stream_id in streams:
                            streams[event.stream_id][0].body += event.data
                        try:
                            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                        except h2.exceptions.StreamClosedError:
                            pass
                    elif isinstance(event, h2.events.StreamEnded):
                        finish(event.stream_id)
                        window.set()
                    elif isinstance(event, h2.events.StreamReset):
                        finish(event.stream_id, f"reset ({event.error_code!r})")
                        window.set()
                    elif isinstance(event, h2.events.ConnectionTerminated):
                        last = event.last_stream_id or 0
                        for sid in [s for s in streams if s > last]:
                            finish(sid, f"refused by GOAWAY (last_stream_id {last})")
                    elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                        window.set()
                writer.write(conn.data_to_send())
        except (ConnectionError, ssl.SSLError, OSError) as e:
            closed.append(f"connection error: {e}")
        closed.append("connection closed")
        for sid in list(streams):
            finish(sid, closed[0])
        window.set()

    reader_task = asyncio.ensure_future(read_loop())
    gate = asyncio.Semaphore(1 if sequential else concurrency)
    authority = "localhost:%d" % port
    scheme = "https" if ssl_context else "http"

    async def one(req):
        response = Response()
        started = loop.time()
        sid = None

        async def attempt():
            nonlocal sid
            async with gate:
                while not closed and conn.open_outbound_streams >= conn.remote_settings.max_concurrent_streams:
                    window.clear()
                    await window.wait()
                if closed:
                    response.error = closed[0]
                    return response
                future = loop.create_future()
                sid = conn.get_next_available_stream_id()
                headers = [(":method", req.method), (":scheme", scheme), (":authority", authority),
                           (":path", req.path)] + req.headers
                conn.send_headers(sid, headers, end_stream=not req.body)
                streams[sid] = (response, future, started)
                body = memoryview(req.body)
                while body and not closed:
                    size = min(conn.local_flow_control_window(sid), conn.max_outbound_frame_size, len(body))
                    if size <= 0:
                        writer.write(conn.data_to_send())
                        window.clear()
                        await window.wait()
                        continue
                    conn.send_data(sid, bytes(body[:size]), end_stream=size == len(body))
                    body = body[size:]
                writer.write(conn.data_to_send())
                return await asyncio.shield(future)

        try:
            return await asyncio.wait_for(attempt(), timeout)
        except asyncio.TimeoutError:
            response.error = f"no answer within {timeout:.1f}s"
            if sid is not None and streams.pop(sid, None) is not None:
                try:
                    conn.reset_stream(sid, h2.errors.ErrorCodes.CANCEL)
                    writer.write(conn.data_to_send())
                except h2.exceptions.ProtocolError:
                    pass
        except (h2.exceptions.ProtocolError, h2.exceptions.StreamClosedError) as e:
            response.error = f"could not send: {e}"
        response.elapsed = loop.time() - started
        return response

    try:
        return await asyncio.gather(*(one(r) for r in requests))
    finally:
        try:
            conn.close_connection()
            writer.write(conn.data_to_send())
        except Exception:
            pass
        writer.close()
        reader_task.cancel()
        try:
            await asyncio.wait_for(writer.wait_closed(), 2)
        except Exception:
            pass


def h2_run(port, requests, ssl_context=None, timeout=15.0, **kw):
    return asyncio.run(asyncio.wait_for(
        h2_exchange(port, requests, ssl_context=ssl_context, timeout=timeout, **kw), timeout + 15))


def push_headers(world, auth=True, push_type="alert", apns_id=None, **extra):
    headers = [("apns-topic", TOPIC)]
    if push_type:
        headers.append(("apns-push-type", push_type))
    if apns_id:
        headers.append(("apns-id", apns_id))
    if auth:
        headers.append(("authorization", world.material.bearer()))
    headers += [(k.replace("_", "-"), v) for k, v in extra.items()]
    return headers


# -- the clients under test ---------------------------------------------------------------------

def rich_message(world, media_path="/img/banner"):
    return {"aps": {"alert": dict(RICH_TEXT), "mutable-content": 1},
            "media_url": world.origin.url(media_path), "custom": CUSTOM}


BACKGROUND = {"aps": {"content-available": 1}, "x": "  spaced  "}


class AioAPNs:
    """aioapns 4.0, pointed at a host by its protocol class attributes; trusts the test CA by
    the ssl_context it is given (a default context holds no ALPN: aioapns negotiates none)."""

    name = "aioapns"

    def __init__(self, world, port, topic=TOPIC, key=None, client_cert=None):
        """`key`: (PEM text, key ID, team), the test's provider key by default; `client_cert`: a
        PEM file with a certificate and its key, for certificate auth instead."""
        self.world, self.port, self.topic = world, port, topic
        self.key = key or (world.material.p8_text, KEY_ID, TEAM)
        self.client_cert = client_cert

    def _run(self, coro_fn, timeout=20.0):
        from aioapns.connection import APNsProductionClientProtocol

        APNsProductionClientProtocol.APNS_SERVER = "127.0.0.1"
        APNsProductionClientProtocol.APNS_PORT = self.port

        async def main():
            from aioapns import APNs

            context = ssl.create_default_context(cafile=self.world.material.ca)
            if self.client_cert:
                client = APNs(client_cert=self.client_cert, topic=self.topic, ssl_context=context,
                              max_connection_attempts=2)
            else:
                text, kid, team = self.key
                client = APNs(key=text, key_id=kid, team_id=team, topic=self.topic, ssl_context=context,
                              max_connection_attempts=2)
            try:
                return await asyncio.wait_for(coro_fn(client), timeout)
            finally:
                client.pool.close()

        return asyncio.run(main())

    def push(self, token, message, push_type=None, priority=None):
        """(status, apns_id matched, reason, timestamp); the apns-id is the one aioapns matched
        the answer to (it pairs answers with requests by the answer's apns-id)."""
        from aioapns import NotificationRequest, PushType

        request = NotificationRequest(device_token=token, message=message,
                                      push_type=PushType(push_type) if push_type else None, priority=priority)

        async def send(client):
            return await client.send_notification(request)

        try:
            result = self._run(send)
        except asyncio.TimeoutError:
            raise CheckFailed("aioapns had no answer within 20s (it never matches an answer whose apns-id "
                              "is not the request's)")
        expect(result.notification_id == request.notification_id,
               f"aioapns matched apns-id {result.notification_id}, sent {request.notification_id}")
        return int(result.status), result.notification_id, result.description, result.timestamp

    @staticmethod
    def body_of(message):
        # aioapns's own serialization.
        return json.dumps(message, ensure_ascii=False).encode()


class PyAPNsClient:
    """pyapns_client 2.0.6, pointed at a host by a mode added to APNSClient.BASE_URLS; trusts
    the test CA by root_cert_path, which it passes to httpx as verify= (an SSLContext works)."""

    name = "pyapns_client"

    def __init__(self, world, port, topic=TOPIC, key=None):
        """`key`: (.p8 path, key ID, team), the test's provider key by default."""
        import pyapns_client

        self.world, self.port, self.topic = world, port, topic
        mode = f"test-{port}"
        pyapns_client.APNSClient.BASE_URLS[mode] = f"https://127.0.0.1:{port}"
        path, kid, team = key or (world.material.p8, KEY_ID, TEAM)
        self.client = pyapns_client.APNSClient(
            mode=mode, root_cert_path=ssl.create_default_context(cafile=world.material.ca),
            auth_key_path=path, auth_key_id=kid, team_id=team)

    @staticmethod
    def notification(message, push_type=None, priority=None, apns_id=None, topic=TOPIC):
        import pyapns_client as P

        aps = message["aps"]
        alert = aps.get("alert")
        payload = P.IOSPayload(
            alert=P.IOSPayloadAlert(title=alert.get("title"), body=alert.get("body")) if alert else None,
            mutable_content=bool(aps.get("mutable-content")),
            content_available=bool(aps.get("content-available")),
            custom={k: v for k, v in message.items() if k != "aps"})
        return P.IOSNotification(payload=payload, topic=topic, apns_id=apns_id or str(uuid.uuid4()),
                                 push_type=push_type, priority=priority)

    def push(self, token, message, push_type=None, priority=None):
        import pyapns_client as P

        n = self.notification(message, push_type, None if priority is None else str(priority), topic=self.topic)
        try:
            self.client.push(n, token)
        except P.APNSConnectionException:
            raise CheckFailed("pyapns_client: no connection or no answer (3 tries)")
        except P.APNSException as e:
            expect(e.apns_id == n.apns_id, f"pyapns_client got apns-id {e.apns_id}, sent {n.apns_id}")
            return e.status_code, e.apns_id, type(e).__name__.removesuffix("Exception"), getattr(e, "timestamp", None)
        finally:
            self.client.close()
        # pyapns_client returns nothing on success: the 200 is all it shows.
        return 200, n.apns_id, None, None

    @staticmethod
    def body_of(message):
        return PyAPNsClient.notification(message).get_json_data()


# -- the world: everything a check may need, made on first use ----------------------------------

class World(relay_harness.World):
    kind, label = "apns", "APNs"
    material_class = Material
    relay_class = Relay
    standin_script = STANDIN
    origin_paths = ("/img/banner", "/img/campaign", "/img/hostile", "/img/slow")
    slow_paths = ("/img/slow",)

    def standin_options(self):
        m = self.material
        return ["--team", f"{TEAM}:{KEY_ID}:{m.p8}", "--team", f"{OTHER_TEAM}:{OTHER_KEY_ID}:{m.other_p8}",
                "--topic", TOPIC]

    def certificates(self):
        """The test Apple CA's push certificates, made once: legacy (production, its app and voip
        topics), single (UID only), development, expired, revoked."""
        def make():
            a = self.material.apple
            return {
                "legacy": a.issue("legacy", LEGACY),
                "single": a.issue("single", "com.single.app", topics=()),
                "development": a.issue("development", "com.dev.app", environments=("development",)),
                "expired": a.issue("expired", "com.old.app", expired=True),
                "revoked": a.issue("revoked", "com.revoked.app"),
            }
        return self.once("certificates", make)

    @property
    def certs(self):
        return self.certificates()

    @property
    def legacy_p12(self):
        """The legacy app's certificate as Keychain exports it (RC2-40)."""
        self.certificates()
        return self.once("legacy-p12", lambda: self.material.apple.legacy_p12("legacy"))

    @property
    def relay_h2c(self):
        return self.relay("relay-h2c", lambda: f"https://localhost:{self.standin.port}", tls=False)


# -- checks -------------------------------------------------------------------------------------

def client_against_standin(world, client_cls):
    client = client_cls(world, world.standin.port)
    token = device_token()
    status, apns_id, reason, _ = client.push(token, {"aps": {"alert": dict(RICH_TEXT)}})
    expect(status == 200, f"push: {status} {reason}")
    entry = world.single_entry(world.standin, token)
    expect(entry["status"] == 200 and entry["apns_id"] == apns_id,
           f"stand-in answered {entry['status']} with apns-id {entry['apns_id']}, client has {apns_id}")
    dead = device_token("dead")
    status, _, reason, timestamp = client.push(dead, {"aps": {"alert": dict(RICH_TEXT)}})
    expect(status == 410 and reason == "Unregistered", f"dead token: {status} {reason}")
    expect(isinstance(timestamp, int) and timestamp > 1_500_000_000_000,
           f"dead token: timestamp {timestamp!r} is not milliseconds since the epoch")
    return entry


@check("standin")
def standin_aioapns(world):
    entry = client_against_standin(world, AioAPNs)
    expect(entry["alpn"] is None, f"aioapns negotiated ALPN {entry['alpn']!r}, expected none")


@check("standin")
def standin_pyapns_client(world):
    entry = client_against_standin(world, PyAPNsClient)
    expect(entry["alpn"] == "h2", f"pyapns_client negotiated ALPN {entry['alpn']!r}, expected h2")
    iat = entry["authorization"]["jwt_claims"]["iat"]
    expect(isinstance(iat, float), f"pyapns_client's iat {iat!r} was expected to be a float")


@check("standin")
def standin_strict(world):
    m = world.material
    old = int(time.time()) - 7200
    token = device_token

    def req(path=None, headers=None, body=b'{"aps":{"alert":"x"}}', method="POST", tok=None, **kw):
        return Request(path or f"/3/device/{tok or token()}",
                       push_headers(world, **kw) if headers is None else headers, body, method)

    base = push_headers(world)
    cases = [
        ("valid", req(), 200, None),
        ("float iat", req(headers=[("apns-topic", TOPIC), ("authorization", "bearer " + m.jwt(iat=time.time()))]),
         200, None),
        ("voip 5120 bytes", req(push_type="voip", body=b'{"aps":{},"p":"' + b"v" * 5103 + b'"}'), 200, None),
        ("voip 5121 bytes", req(push_type="voip", body=b'{"aps":{},"p":"' + b"v" * 5104 + b'"}'),
         413, "PayloadTooLarge"),
        ("GET", req(method="GET", body=b""), 405, "MethodNotAllowed"),
        ("other path", req(path="/4/other"), 404, "BadPath"),
        ("short token", req(path="/3/device/abc"), 400, "BadDeviceToken"),
        ("non-hex token", req(path="/3/device/" + "zz" * 32), 400, "BadDeviceToken"),
        ("no authorization", req(auth=False), 403, "MissingProviderToken"),
        ("foreign key", req(headers=[("apns-topic", TOPIC), ("authorization",
                                                             "bearer " + m.jwt(key=m.stranger_key))]),
         403, "InvalidProviderToken"),
        ("unknown kid", req(headers=[("apns-topic", TOPIC), ("authorization",
                                                             "bearer " + m.jwt(kid="NOPE123456"))]),
         403, "InvalidProviderToken"),
        ("old iat", req(headers=[("apns-topic", TOPIC), ("authorization", "bearer " + m.jwt(iat=old))]),
         403, "ExpiredProviderToken"),
        ("no topic", req(headers=[("authorization", m.bearer())]), 400, "MissingTopic"),
        ("other topic", req(headers=[("apns-topic", "com.other.app"), ("authorization", m.bearer())]),
         400, "BadTopic"),
        ("bad push type", req(push_type="banner"), 400, "InvalidPushType"),
        ("bad priority", req(apns_priority="7"), 400, "BadPriority"),
        ("bad expiration", req(apns_expiration="soon"), 400, "BadExpirationDate"),
        ("long collapse id", req(apns_collapse_id="c" * 65), 400, "BadCollapseId"),
        ("bad apns-id", req(headers=base + [("apns-id", "not-a-uuid")]), 400, "BadMessageId"),
        ("empty body", req(body=b""), 400, "PayloadEmpty"),
        ("4096 bytes", req(body=b'{"aps":{},"p":"' + b"x" * 4079 + b'"}'), 200, None),
        ("4097 bytes", req(body=b'{"aps":{},"p":"' + b"x" * 4080 + b'"}'), 413, "PayloadTooLarge"),
        ("bad0", req(tok=device_token("bad0")), 400, "BadDeviceToken"),
        ("4290", req(tok=device_token("4290")), 429, "TooManyRequests"),
        ("5000", req(tok=device_token("5000")), 500, "InternalServerError"),
        ("dead", req(tok=device_token("dead")), 410, "Unregistered"),
    ]
    responses = h2_run(world.standin.port, [c[1] for c in cases], ssl_context=m.client_context())
    problems = []
    for (label, request, status, reason), r in zip(cases, responses):
        got_reason = (r.json() or {}).get("reason") if r.status and r.status != 200 else None
        if r.error or r.status != status or got_reason != reason or not r.headers.get("apns-id"):
            problems.append(f"{label}: {r!r}, expected {status} {reason}")
        if reason == "Unregistered" and not isinstance((r.json() or {}).get("timestamp"), int):
            problems.append(f"{label}: no integer timestamp in {bytes(r.body)!r}")
    # One team per connection: a second team's valid token on the same connection is refused.
    mixed = h2_run(world.standin.port, [
        req(), req(headers=[("apns-topic", TOPIC), ("authorization", m.bearer(team=OTHER_TEAM, kid=OTHER_KEY_ID))]),
    ], ssl_context=m.client_context(), sequential=True)
    if [r.status for r in mixed] != [200, 403] or (mixed[1].json() or {}).get("reason") != "InvalidProviderToken":
        problems.append(f"team mixing: {mixed!r}, expected 200 then 403 InvalidProviderToken")
    expect(not problems, "; ".join(problems))


@check("standin")
def standin_h2load(world):
    expect(shutil.which("h2load"), "h2load is missing (apt-get install nghttp2-client)")
    tokens = [device_token() for _ in range(2000)]
    results = run_h2load(world, f"https://127.0.0.1:{world.standin.port}", tokens,
                         b'{"aps":{"alert":"h2load"}}', clients=2, streams=100)
    entries = world.wait_record(world.standin, set(tokens), len(tokens))
    statuses = {}
    for e in entries:
        statuses[e["status"]] = statuses.get(e["status"], 0) + 1
    expect(results == len(tokens), f"h2load: {results} of {len(tokens)} answered 2xx")
    expect(len(entries) == len(tokens) and statuses == {200: len(tokens)},
           f"stand-in recorded {len(entries)} pushes, statuses {statuses}")


@check("standin")
def standin_certificates(world):
    """Certificate auth as Apple answers it: the certificate's topics (UID, Apple's extension),
    MissingTopic, TopicDisallowed, BadCertificateEnvironment, BadCertificate (expired, revoked),
    authorization ignored."""
    standin = apple_standin(world)
    c = world.certs
    bogus = [("authorization", "bearer not.a.token")]

    def push(topic=None, extra=()):
        headers = ([("apns-topic", topic)] if topic else []) + [("apns-push-type", "alert")] + list(extra)
        return Request(f"/3/device/{device_token()}", headers, b'{"aps":{"alert":"cert"}}')

    cases = [
        ("legacy, its topic", c["legacy"][1], push(LEGACY), 200, None),
        ("legacy, its voip topic", c["legacy"][1], push(LEGACY + ".voip"), 200, None),
        ("legacy, a bogus authorization", c["legacy"][1], push(LEGACY, bogus), 200, None),
        ("legacy, no topic (two topics)", c["legacy"][1], push(), 400, "MissingTopic"),
        ("legacy, another app's topic", c["legacy"][1], push(SHOP), 400, "TopicDisallowed"),
        ("single topic, no apns-topic", c["single"][1], push(), 200, None),
        ("development certificate", c["development"][1], push("com.dev.app"), 403, "BadCertificateEnvironment"),
        ("expired", c["expired"][1], push("com.old.app"), 403, "BadCertificate"),
        ("revoked", c["revoked"][1], push("com.revoked.app"), 403, "BadCertificate"),
    ]
    problems = []
    for label, pem, request, status, reason in cases:
        (r,) = h2_run(standin.port, [request], ssl_context=cert_context(world, pem))
        got = (r.json() or {}).get("reason") if r.status and r.status != 200 else None
        if r.error or r.status != status or got != reason:
            problems.append(f"{label}: {r!r}, expected {status} {reason}")
    entry = world.single_entry(standin, cases[2][2].path.rsplit("/", 1)[1])
    if credential_of(entry) != ("certificate", LEGACY) or entry["certificate"]["topics"] != [LEGACY, LEGACY + ".voip"]:
        problems.append(f"recorded certificate {entry.get('certificate')}")
    expect(not problems, "; ".join(problems))


def run_h2load(world, base, tokens, body, clients=4, streams=100, headers=None, timeout=180.0):
    """Sends one push per token with h2load: `clients` h2load processes of one connection each
    (h2load starts every client at the first URI of its list, so one list per process gives
    every token exactly once). Returns how many answers were 2xx."""
    body_path = os.path.join(world.work, f"h2load-body-{secrets.token_hex(4)}.json")
    with open(body_path, "wb") as f:
        f.write(body)
    headers = headers if headers is not None else [
        f"authorization: {world.material.bearer()}", f"apns-topic: {TOPIC}", "apns-push-type: alert"]
    procs = []
    share = (len(tokens) + clients - 1) // clients
    for i in range(clients):
        part = tokens[i * share:(i + 1) * share]
        if not part:
            continue
        uri_path = os.path.join(world.work, f"h2load-uris-{secrets.token_hex(4)}.txt")
        with open(uri_path, "w") as f:
            f.write("".join(f"{base}/3/device/{t}\n" for t in part))
        argv = ["h2load", "-n", str(len(part)), "-c", "1", "-m", str(streams), "-i", uri_path, "-d", body_path,
                "-N", "30s"]
        for h in headers:
            argv += ["-H", h]
        procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      stdin=subprocess.DEVNULL, start_new_session=True))
    ok = 0
    deadline = time.monotonic() + timeout
    outputs = []
    try:
        for p in procs:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
            text = out.decode("utf-8", "replace")
            outputs.append(text)
            m = re.search(r"status codes: (\d+) 2xx", text)
            ok += int(m.group(1)) if m else 0
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"h2load did not finish within {timeout:.0f}s")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    if ok != len(tokens):
        tail = " | ".join(o.strip().splitlines()[-1] if o.strip() else "" for o in outputs)
        log.info("h2load output: %s", outputs)
        raise CheckFailed(f"h2load: {ok} of {len(tokens)} answered 2xx ({tail})")
    return ok


# b. Real clients through the relay.

def push_until_made(world, client, token, message, made, describe):
    """Pushes `message` to `token` until the stand-in receives a payload that `made(payload)`
    accepts (the relay sends the first pushes on before their media is made), within 10 s:
    that payload. Each push answers 200 with the apns-id the stand-in saw."""
    deadline = time.monotonic() + 10.0
    attempts = 0
    while True:
        attempts += 1
        status, apns_id, reason, _ = client.push(token, message)
        expect(status == 200, f"push {attempts}: {status} {reason}")
        entries = world.wait_record(world.standin, {token}, attempts, timeout=5)
        expect(len(entries) >= attempts, f"push {attempts}: the stand-in recorded {len(entries)} pushes")
        entry = entries[-1]
        expect(entry["apns_id"] == apns_id, f"stand-in answered apns-id {entry['apns_id']}, client has {apns_id}")
        payload = json.loads(entry["body"])
        if made(payload):
            return payload
        expect(time.monotonic() < deadline, f"after {attempts} pushes in 10s {describe(payload)}")
        time.sleep(0.3)


def rich_through_relay(world, client_cls):
    relay = world.relay_tls
    client = client_cls(world, relay.port)
    pattern = relay.store_url_re()
    message = rich_message(world)
    token = device_token()

    def made(payload):
        media = payload.get("media_url")
        return isinstance(media, str) and pattern.match(media)

    payload = push_until_made(world, client, token, message, made,
                              lambda payload: f"the media URL is still {payload.get('media_url')!r}")
    expect(payload["aps"].get("alert") == RICH_TEXT, f"alert changed: {payload['aps'].get('alert')!r}")
    expect(payload.get("custom") == CUSTOM, f"custom changed: {payload.get('custom')!r}")
    status, data = http_get(payload["media_url"])
    expect(status == 200 and data[:3] == b"\xff\xd8\xff",
           f"GET {payload['media_url']}: {status}, starts {data[:8].hex()}")


def unregistered_through_relay(world, client_cls):
    client = client_cls(world, world.relay_tls.port)
    status, _, reason, timestamp = client.push(device_token("dead"), rich_message(world))
    expect(status == 410 and reason == "Unregistered", f"{status} {reason}")
    expect(isinstance(timestamp, int) and timestamp > 1_500_000_000_000, f"timestamp {timestamp!r}")


def background_through_relay(world, client_cls):
    client = client_cls(world, world.relay_tls.port)
    token = device_token()
    status, _, reason, _ = client.push(token, BACKGROUND, push_type="background", priority=5)
    expect(status == 200, f"{status} {reason}")
    entry = world.single_entry(world.standin, token)
    sent = client_cls.body_of(BACKGROUND)
    expect(entry["body"].encode() == sent, f"arrived {entry['body']!r}, sent {sent!r}")
    h = entry["headers"]
    expect(h.get("apns-push-type") == "background" and h.get("apns-priority") == "5",
           f"headers arrived as apns-push-type {h.get('apns-push-type')!r}, apns-priority {h.get('apns-priority')!r}")


@check("relay")
def relay_aioapns_rich(world):
    rich_through_relay(world, AioAPNs)


@check("relay")
def relay_clevertap_slider(world):
    """A CleverTap iOS slider pushed by aioapns through the relay: each item's imageUrl becomes a
    store URL of a 16:9 JPEG or PNG, the item whose image the origin has not is removed with its
    caption and link, and the alert, category and slider's other keys arrive as they were."""
    relay = world.relay_tls
    client = AioAPNs(world, relay.port)
    pattern = relay.store_url_re()
    token = device_token()
    items = [{"caption": "one", "imageUrl": world.origin.url("/img/banner?slide=1"), "actionUrl": "app://1"},
             {"caption": "gone", "imageUrl": world.origin.url("/img/missing"), "actionUrl": "app://x"},
             {"caption": "two", "imageUrl": world.origin.url("/img/banner?slide=2"), "actionUrl": "app://2"}]
    message = {"aps": {"alert": dict(RICH_TEXT), "mutable-content": 1, "category": "CTNotification"},
               "ct_ContentSlider": {"orientation": "landscape", "showsPaging": 1, "items": items}}

    def slides(payload):
        return (payload.get("ct_ContentSlider") or {}).get("items") or []

    def made(payload):
        return len(slides(payload)) == 2 and all(pattern.match(str(s.get("imageUrl"))) for s in slides(payload))

    payload = push_until_made(world, client, token, message, made,
                              lambda payload: f"the slider arrived as {slides(payload)}")
    got = slides(payload)
    expect([(item.get("caption"), item.get("actionUrl")) for item in got] == [("one", "app://1"), ("two", "app://2")],
           f"items arrived as {got}")
    expect(payload["aps"].get("alert") == RICH_TEXT and payload["aps"].get("category") == "CTNotification",
           f"aps changed: {payload['aps']!r}")
    expect(payload["ct_ContentSlider"].get("orientation") == "landscape", f"slider arrived as {payload}")
    for item in got:
        status, body = http_get(item["imageUrl"])
        expect(status == 200, f"GET {item['imageUrl']}: {status}")
        kind, width, height = image_size(body)
        expect(abs(width / height - 16 / 9) < 0.02, f"{item['caption']}: a {width}x{height} {kind}, not 16:9")


@check("relay")
def relay_aioapns_unregistered(world):
    unregistered_through_relay(world, AioAPNs)


@check("relay")
def relay_aioapns_background(world):
    background_through_relay(world, AioAPNs)


@check("relay")
def relay_pyapns_client_rich(world):
    rich_through_relay(world, PyAPNsClient)


@check("relay")
def relay_pyapns_client_unregistered(world):
    unregistered_through_relay(world, PyAPNsClient)


@check("relay")
def relay_pyapns_client_background(world):
    background_through_relay(world, PyAPNsClient)


@check("relay")
def relay_background_bytes(world):
    relay = world.relay_tls
    token = device_token()
    body = b'{ "aps" : {"content-available":1} ,\n\t"x":"  spaced  "   }'
    apns_id = str(uuid.uuid4())
    (r,) = relay.h2(world, [Request(f"/3/device/{token}", push_headers(
        world, push_type="background", apns_id=apns_id, apns_priority="5", apns_collapse_id="c1",
        apns_expiration="0"), body)])
    expect(r.status == 200, f"relay answered {r!r}")
    expect(r.headers.get("apns-id") == apns_id, f"apns-id {r.headers.get('apns-id')!r}, sent {apns_id}")
    entry = world.single_entry(world.standin, token)
    expect(entry["body"].encode() == body, f"arrived {entry['body']!r}, sent {body!r}")
    h = entry["headers"]
    for name, value in (("apns-id", apns_id), ("apns-priority", "5"), ("apns-collapse-id", "c1"),
                        ("apns-expiration", "0"), ("apns-topic", TOPIC), ("apns-push-type", "background")):
        expect(h.get(name) == value, f"{name} arrived as {h.get(name)!r}, sent {value!r}")


# c. The relay's own provider key.

@check("relay")
def relay_own_key(world):
    relay = world.relay("relay-own-key", lambda: f"https://localhost:{world.standin.port}", tls=False,
                        extra=["--apns-key", world.material.p8, "--apns-key-id", KEY_ID, "--apns-team-id", TEAM])
    tokens = [device_token() for _ in range(50)]
    responses = relay.h2(world, [Request(f"/3/device/{t}", push_headers(world, auth=False),
                                         b'{"aps":{"alert":"own key"}}') for t in tokens])
    bad = [r for r in responses if r.status != 200]
    expect(not bad, f"{len(bad)} of 50 not 200, e.g. {bad[:1]!r}")
    entries = world.wait_record(world.standin, set(tokens), 50)
    expect(len(entries) == 50 and all(e["status"] == 200 for e in entries),
           f"stand-in: {len(entries)} recorded, statuses {sorted({e['status'] for e in entries}, key=str)}")
    digests = {(e["authorization"] or {}).get("sha256") for e in entries}
    expect(len(digests) == 1 and None not in digests, f"{len(digests)} distinct provider tokens: {digests}")
    auth = entries[0]["authorization"]
    expect(auth["jwt_header"].get("kid") == KEY_ID and auth["jwt_claims"].get("iss") == TEAM,
           f"token header {auth['jwt_header']}, claims {auth['jwt_claims']}")


# d. Upstream down or stalling.

def expect_503(relay, world, low, high):
    started = time.monotonic()
    (r,) = relay.h2(world, [Request(f"/3/device/{device_token()}", push_headers(world),
                                    json.dumps({"aps": {"alert": dict(RICH_TEXT)}}).encode())], timeout=high + 5)
    took = time.monotonic() - started
    expect(r.status == 503 and r.json() == {"reason": "ServiceUnavailable"},
           f"answered {r!r} after {took:.1f}s, expected 503 ServiceUnavailable")
    expect(low <= took <= high, f"503 after {took:.1f}s, expected {low:.1f}-{high:.1f}s")
    expect(r.headers.get("apns-id"), f"no apns-id in {r.headers}")
    status, _ = http_get(f"http://127.0.0.1:{relay.hook}/healthz")
    expect(status == 200, f"/healthz answered {status} afterwards")


@check("relay")
def relay_upstream_down(world):
    closed = free_port()
    relay = world.relay("relay-closed", lambda: f"https://localhost:{closed}", tls=False)
    expect_503(relay, world, 0.0, 3.0)


@check("relay")
def relay_upstream_stall(world):
    stalled = world.standin_with("standin-stall", "--stall")
    relay = world.relay("relay-stall", lambda: f"https://localhost:{stalled.port}", tls=False,
                        extra=["--apns-upstream-timeout", "2s"])
    expect_503(relay, world, 1.5, 5.0)


# e. A campaign.

@check("relay")
def relay_campaign(world):
    relay = world.relay_h2c
    pattern = relay.store_url_re()
    path = "/img/campaign"
    message = rich_message(world, path)
    tokens = [device_token() for _ in range(10_000)]
    before = world.origin.fetches(path)
    expect(before == 0, f"the origin already served {path} {before} times")
    run_h2load(world, f"http://127.0.0.1:{relay.port}", tokens, json.dumps(message).encode(), clients=4,
               streams=100)
    entries = world.wait_record(world.standin, set(tokens), len(tokens))
    expect(len(entries) == len(tokens), f"the stand-in recorded {len(entries)} of {len(tokens)} pushes")
    expect(len({e["token"] for e in entries}) == len(tokens), "some tokens were pushed twice, others never")
    not_ok = [e for e in entries if e["status"] != 200]
    if not_ok:
        raise CheckFailed(f"{len(not_ok)} answered other than 200, e.g. {not_ok[0]['status']} {not_ok[0]['reason']}")
    fetched = world.origin.fetches(path)
    entries.sort(key=lambda e: e["time"])
    expect(fetched == 1, f"the origin served {path} {fetched} times, expected once: "
                         f"{world.origin.describe(path, since=entries[0]['time'])} (times from the first push "
                         f"the stand-in recorded)")
    urls = []
    for e in entries:
        payload = json.loads(e["body"])
        expect(payload["aps"].get("alert") == RICH_TEXT and payload.get("custom") == CUSTOM,
               f"text changed: {e['body'][:300]}")
        urls.append(payload.get("media_url"))
    first = next((i for i, u in enumerate(urls) if isinstance(u, str) and pattern.match(u)), None)
    expect(first is not None, f"no push carried a store URL; e.g. {urls[0]!r}")
    late = [i for i in range(first, len(urls)) if not (isinstance(urls[i], str) and pattern.match(urls[i]))]
    if late:
        i = late[0]
        raise CheckFailed(f"{len(late)} pushes after the first processed one (#{first}) lack the store URL, "
                          f"e.g. #{i} {urls[i]!r}, {entries[i]['time'] - entries[first]['time']:.3f}s after it")
    print(f"     campaign: {first} of {len(urls)} pushes went out before the media was ready")


# f. Hostile media and wrong requests.

@check("relay")
def relay_hostile_media(world):
    relay = world.relay_tls
    elsewhere = free_port()
    cases = [f"http://127.0.0.1:{elsewhere}/x", "http://169.254.169.254/latest/meta-data"]
    tokens = [device_token() for _ in cases]
    responses = relay.h2(world, [
        Request(f"/3/device/{t}", push_headers(world),
                json.dumps({"aps": {"alert": dict(RICH_TEXT), "mutable-content": 1}, "media_url": url,
                            "custom": CUSTOM}).encode())
        for t, url in zip(tokens, cases)], timeout=20)
    entries = {e["token"]: e for e in world.wait_record(world.standin, set(tokens), len(tokens))}
    for url, token, r in zip(cases, tokens, responses):
        expect(r.status == 200, f"{url}: relay answered {r!r}")
        outcome = r.headers.get("x-pushmedia-outcome")
        expect(outcome and not outcome.startswith("processed") and not outcome.startswith("passthrough"),
               f"{url}: x-pushmedia-outcome {outcome!r}, expected a refusal")
        entry = entries.get(token)
        expect(entry is not None, f"{url}: never reached the stand-in")
        payload = json.loads(entry["body"])
        expect(payload["aps"].get("alert") == RICH_TEXT and payload.get("custom") == CUSTOM,
               f"{url}: text changed: {entry['body']}")
        expect(not relay.store_url_re().match(str(payload.get("media_url"))),
               f"{url}: media URL became {payload.get('media_url')!r}")


def sentinel_after(world, relay, standin, headers):
    """A push sent through `relay` after the ones a check says must not reach `standin`, waited
    for there: the relay forwards what it lets through at once, so once the later push is in, an
    earlier one let through would be too (instead of waiting a while for what should not come)."""
    token = device_token()
    (r,) = relay.h2(world, [Request(f"/3/device/{token}", headers, b'{"aps":{"alert":"sentinel"}}')])
    expect(r.status == 200, f"the sentinel push answered {r!r}")
    world.single_entry(standin, token)


@check("relay")
def relay_bad_method_and_path(world):
    relay = world.relay_tls
    get_token = device_token()
    mark = world.standin.mark()
    responses = relay.h2(world, [
        Request(f"/3/device/{get_token}", push_headers(world), b"", method="GET"),
        Request("/4/other", push_headers(world), b'{"aps":{"alert":"x"}}'),
    ])
    expect(responses[0].status == 405 and responses[0].json() == {"reason": "MethodNotAllowed"},
           f"GET answered {responses[0]!r}")
    expect(responses[1].status == 404 and responses[1].json() == {"reason": "BadPath"},
           f"POST /4/other answered {responses[1]!r}")
    for r in responses:
        expect(r.headers.get("apns-id"), f"no apns-id in {r.headers}")
    sentinel_after(world, relay, world.standin, push_headers(world))
    leaked = [e for e in world.standin.entries(since=mark) if e["token"] == get_token or e["path"] == "/4/other"]
    expect(not leaked, f"reached the stand-in: {[e['path'] for e in leaked]}")


@check("relay")
def relay_body_past_limit(world):
    """A body past the relay's 64 KiB read limit, and past a stream's flow-control window, is
    answered 413 PayloadTooLarge while the client is still sending; the rest is read and dropped
    (not reset: curl and h2-based clients then lose the answer), the connection goes on, and
    nothing reaches the stand-in."""
    relay = world.relay_tls
    big, after, by_client = device_token(), device_token(), device_token()
    mark = world.standin.mark()
    blob = "x" * (1 << 20)
    responses = relay.h2(world, [
        Request(f"/3/device/{big}", push_headers(world), b'{"aps":{"alert":"x"},"blob":"' + blob.encode() + b'"}'),
        Request(f"/3/device/{after}", push_headers(world), b'{"aps":{"alert":"after"}}'),
    ], sequential=True)
    r = responses[0]
    expect(not r.error and r.status == 413 and r.json() == {"reason": "PayloadTooLarge"} and r.headers.get("apns-id"),
           f"a 1 MiB body answered {r!r}")
    expect(not responses[1].error and responses[1].status == 200,
           f"the push after it on the same connection answered {responses[1]!r}")
    status, _, reason, _ = PyAPNsClient(world, relay.port).push(
        by_client, {"aps": {"alert": {"title": "t", "body": "b"}}, "blob": blob})
    expect((status, reason) == (413, "PayloadTooLarge"), f"pyapns_client's 1 MiB push: {status} {reason}")
    sentinel_after(world, relay, world.standin, push_headers(world))
    leaked = [e for e in world.standin.entries(since=mark) if e["token"] in (big, by_client)]
    expect(not leaked, f"reached the stand-in: {[e['token'] for e in leaked]}")


# g. GOAWAY from upstream.

@check("relay")
def relay_goaway(world):
    goaway = world.standin_with("standin-goaway", "--goaway-after", "5", "--goaway-connections", "1")
    relay = world.relay("relay-goaway", lambda: f"https://localhost:{goaway.port}", tls=False)
    tokens = [device_token() for _ in range(20)]
    responses = relay.h2(world, [Request(f"/3/device/{t}", push_headers(world), b'{"aps":{"alert":"go"}}')
                                 for t in tokens], timeout=20)
    bad = [(t[:8], r) for t, r in zip(tokens, responses) if r.status != 200]
    expect(not bad, f"{len(bad)} of 20 not 200: {bad[:3]!r}")
    entries = world.wait_record(goaway, set(tokens), 20)
    answered = [e for e in entries if e["status"] == 200]
    per_token = {}
    for e in answered:
        per_token[e["token"]] = per_token.get(e["token"], 0) + 1
    expect(len(per_token) == 20 and set(per_token.values()) == {1},
           f"{len(per_token)} tokens answered 200, some more than once: {sorted(per_token.values())}")
    conns = {e["conn"] for e in answered}
    expect(len(conns) >= 2, f"all answers on connection(s) {conns}: the GOAWAY was never seen")


@check("relay")
def relay_one_stream_at_a_time(world):
    # Apple allows one stream per connection until a provider token is validated: the relay
    # holds the rest until a stream closes, and the stand-in refuses any stream over its limit.
    narrow = world.standin_with("standin-narrow", "--max-concurrent-streams", "1")
    relay = world.relay("relay-narrow", lambda: f"https://localhost:{narrow.port}", tls=False)
    tokens = [device_token() for _ in range(30)]
    mark = narrow.mark()
    responses = relay.h2(world, [Request(f"/3/device/{t}", push_headers(world), b'{"aps":{"alert":"one"}}')
                                 for t in tokens], timeout=20)
    bad = [(t[:8], r) for t, r in zip(tokens, responses) if r.status != 200]
    expect(not bad, f"{len(bad)} of 30 not 200: {bad[:3]!r}")
    refused = [e for e in narrow.entries(since=mark) if e["status"] != 200]
    expect(not refused, f"the stand-in refused {len(refused)} streams: {refused[:2]!r}")


# h. Who may push: allowed teams, client certificates.

@check("relay")
def relay_allowed_teams(world):
    relay = world.relay("relay-teams", lambda: f"https://localhost:{world.standin.port}", tls=False,
                        extra=["--apns-allow-team", TEAM])
    ours, theirs = device_token(), device_token()
    mark = world.standin.mark()
    stranger = world.material.bearer(team="STRANGER01", kid="STRANGERK1", key=world.material.stranger_key)
    headers = [(k, stranger if k == "authorization" else v) for k, v in push_headers(world)]
    responses = relay.h2(world, [
        Request(f"/3/device/{ours}", push_headers(world), b'{"aps":{"alert":"team"}}'),
        Request(f"/3/device/{theirs}", headers, b'{"aps":{"alert":"stranger"}}'),
    ])
    expect(responses[0].status == 200, f"allowed team: {responses[0]!r}")
    expect(responses[1].status == 403 and responses[1].json() == {"reason": "InvalidProviderToken"},
           f"other team: {responses[1]!r}")
    # The allowed push of the same batch has reached the stand-in: the refused one would have too.
    world.single_entry(world.standin, ours)
    leaked = [e for e in world.standin.entries(since=mark) if e["token"] == theirs]
    expect(not leaked, "the other team's push reached the stand-in")


@check("relay")
def relay_client_certificates(world):
    m = world.material
    relay = world.relay("relay-mtls", lambda: f"https://localhost:{world.standin.port}",
                        extra=["--apns-client-ca", m.ca])
    token = device_token()
    push = [Request(f"/3/device/{token}", push_headers(world), b'{"aps":{"alert":"mtls"}}')]
    (r,) = h2_run(relay.port, push, ssl_context=m.client_context(certificate=True))
    expect(r.status == 200, f"with a client certificate: {r!r}")
    try:
        answers = h2_run(relay.port, push, ssl_context=m.client_context(), timeout=5)
        refused = all(a.status is None for a in answers)
    except Exception:
        refused = True
    expect(refused, "a client without a certificate was served")


# i. SIGTERM: GOAWAY, pushes in flight finish, exit 0.

# e. Traces.

@check("relay")
def relay_traces(world):
    """A rich push carrying the sender's traceparent is one trace at an OTLP receiver: the push's
    span (topic, push type, app), its media's spans, the exchange with the stand-in (apns-id, its
    wait in the fair queue as an event); no device token nor authorization in it. The push's log
    line carries the trace's and the push span's ids."""
    with relay_receiver() as receiver:
        relay = world.relay("relay-traced", lambda: world.standin.base, extra=["--otel-endpoint", receiver.url])
        header, trace_id, parent = traceparent()
        token = device_token()
        apns_id = str(uuid.uuid4())
        bearer = world.material.bearer()
        headers = push_headers(world, auth=False, apns_id=apns_id) + [("authorization", bearer), ("traceparent", header)]
        (r,) = relay.h2(world, [Request(f"/3/device/{token}", headers, json.dumps(rich_message(world)).encode())])
        expect(r.status == 200, f"relay answered {r!r}")
        spans = trace(receiver, trace_id, lambda s: named(s, "apns push") and named(s, "apns upstream"))
        root, upstream = expect_relayed_push(spans, parent, "apns", [token, bearer[7:]], app=TOPIC, topic=TOPIC)
        expect(upstream["attributes"].get("apns.id") == apns_id, f"upstream span {upstream['attributes']}")
        entry = world.single_entry(world.standin, token)
        expect("traceparent" not in entry["headers"], f"the push reached Apple's stand-in with {entry['headers']}")
        expect(named(spans, "pushmedia.fetch"), "no fetch span for the push's media")
        expect_logged(relay.proc.err_path, trace_id, root["span_id"], [token, bearer[7:]])


@check("relay")
def relay_sigterm(world):
    relay = Relay(world, "relay-sigterm", f"https://localhost:{world.standin.port}", tls=False,
                  extra=["--apns-budget", "5s"])
    token = device_token()
    results = []

    def push():
        try:
            results.extend(relay.h2(world, [Request(f"/3/device/{token}", push_headers(world),
                                                    json.dumps(rich_message(world, "/img/slow")).encode())],
                                    timeout=20))
        except Exception as e:
            results.append(e)

    before = world.origin.fetches("/img/slow")
    sender = threading.Thread(target=push)
    sender.start()
    world.origin.wait_fetch("/img/slow", before)  # the push now waits for its media (the origin takes 1.5 s)
    expect(relay.proc.alive(), "the relay exited early")
    relay.proc.p.send_signal(signal.SIGTERM)
    sender.join(timeout=20)
    try:
        code = relay.proc.p.wait(timeout=20)
    except subprocess.TimeoutExpired:
        raise CheckFailed("the relay did not exit within 20 s of SIGTERM")
    expect(code == 0, f"the relay exited {code}: {relay.proc.stderr_tail()}")
    expect(len(results) == 1 and not isinstance(results[0], Exception) and results[0].status == 200,
           f"the push in flight got {results!r}")
    outcome = results[0].headers.get("x-pushmedia-outcome", "")
    expect(outcome.startswith("processed"), f"x-pushmedia-outcome {outcome!r}")
    expect(len(world.wait_record(world.standin, {token}, 1)) == 1, "the push never reached the stand-in")


# j. The Node.js sender of docs/relays.md, only its host changed.

@check("relay")
def relay_node_sender(world):
    node = shutil.which("node") or shutil.which("nodejs")
    expect(node, "node is missing (scripts/apns-relay.sh installs Debian's nodejs)")
    relay = world.relay_tls
    m = world.material
    pattern = relay.store_url_re()
    deadline = time.monotonic() + 15
    while True:
        token = device_token()
        env = dict(os.environ, APNS_HOST=f"localhost:{relay.port}", KEY_FILE=m.p8, KEY_ID=KEY_ID, TEAM_ID=TEAM,
                   TOPIC=TOPIC, DEVICE=token, BODY=json.dumps(rich_message(world)), NODE_EXTRA_CA_CERTS=m.ca)
        run = subprocess.run([node, NODE_SENDER], env=env, capture_output=True, timeout=30)
        expect(run.returncode == 0, f"node exited {run.returncode}: {run.stderr.decode(errors='replace')[-500:]}")
        answer = json.loads(run.stdout.decode().strip().splitlines()[-1])
        expect(answer["status"] == 200 and answer.get("apns-id"), f"node sender got {answer}")
        payload = json.loads(world.single_entry(world.standin, token)["body"])
        expect(payload["aps"].get("alert") == RICH_TEXT and payload.get("custom") == CUSTOM,
               f"text changed: {payload}")
        if pattern.match(str(payload.get("media_url"))):
            expect(str(answer.get("outcome", "")).startswith("processed"), f"x-pushmedia-outcome {answer}")
            return
        expect(time.monotonic() < deadline, f"no store URL within 15 s: {payload.get('media_url')!r}")
        time.sleep(0.5)


# k. Held credentials: certificates and many apps (--relay-credentials).

def apple_standin(world):
    """A stand-in that also takes certificate auth (the test Apple CA), knows the rotated key,
    and accepts the held-credentials apps' topics; a serial is revoked."""
    a = world.material.apple
    world.certificates()
    return world.standin_with(
        "standin-cert", "--client-ca", a.ca, "--revoked", str(world.certs["revoked"][0].serial_number),
        "--team", f"{TEAM}:{ROTATED_KEY_ID}:{world.material.rotated_p8}",
        "--topic", SHOP, "--topic", SHOP + ".voip", "--topic", NEWS)


def cert_context(world, pem=None):
    ctx = world.material.client_context()
    if pem:
        ctx.load_cert_chain(pem)
    return ctx


def credentials_yaml(world, apps, name="credentials.yaml"):
    """A credentials file holding `apps` (shop, news, legacy, old, shop-rotated), mode 600."""
    m = world.material
    entries = {
        "shop": f"  - {{name: shop, team_id: {TEAM}, key_id: {KEY_ID}, key: {m.p8}, topics: [{SHOP}, {SHOP}.voip]}}\n",
        "shop-rotated": f"  - {{name: shop, team_id: {TEAM}, key_id: {ROTATED_KEY_ID}, key: {m.rotated_p8}, "
                        f"topics: [{SHOP}, {SHOP}.voip]}}\n",
        "news": f"  - {{name: news, team_id: {OTHER_TEAM}, key_id: {OTHER_KEY_ID}, key: {m.other_p8}, topics: [{NEWS}]}}\n",
        "legacy": f"  - name: legacy\n    certificate: {world.legacy_p12}\n    password_file: {m.apple.password_file}\n"
                  f"    environment: production\n",
        "old": f"  - {{name: old, certificate: {world.certs['expired'][1]}}}\n",
    }
    text = "# the relay's apps\napns:\n" + "".join(entries[a] for a in apps)
    path = m.write(name, text.encode())
    os.chmod(path, 0o600)
    return path


def credential_of(entry):
    """Under which credential a recorded push reached the stand-in: ("key", iss, kid) or
    ("certificate", uid)."""
    if entry.get("certificate"):
        return ("certificate", entry["certificate"]["uid"])
    auth = entry.get("authorization") or {}
    return ("key", (auth.get("jwt_claims") or {}).get("iss"), (auth.get("jwt_header") or {}).get("kid"))


@check("relay")
def relay_held_credentials_three_apps(world):
    """aioapns and pyapns_client, holding only a key Apple does not know, push through a relay
    holding three apps of two teams (two keys, a Keychain-style RC2-40 .p12): each push reaches the
    stand-in under its app's credential; an app with no entry is refused (no pass-through with a
    file); an expired certificate's pushes get 403 BadCertificate while the others go on; /readyz
    and /metrics tell the certificates' days left (legacy's 20 days: expires_soon); no secret is
    logged."""
    standin = apple_standin(world)
    path = credentials_yaml(world, ["shop", "news", "legacy", "old"], "three-apps.yaml")
    relay = world.relay("relay-held", lambda: standin.base, extra=["--relay-credentials", path])
    m = world.material
    throwaway = ((open(m.stranger_p8).read(), "STRANGERK1", "STRANGER01"), (m.stranger_p8, "STRANGERK1", "STRANGER01"))
    expected = {SHOP: ("key", TEAM, KEY_ID), SHOP + ".voip": ("key", TEAM, KEY_ID), NEWS: ("key", OTHER_TEAM, OTHER_KEY_ID),
                LEGACY: ("certificate", LEGACY)}
    sent = {}
    for client_cls, key in ((AioAPNs, throwaway[0]), (PyAPNsClient, throwaway[1])):
        for topic in expected:
            token = device_token()
            push_type = "voip" if topic.endswith(".voip") else None
            message = {"aps": {"content-available": 1}} if push_type else {"aps": {"alert": dict(RICH_TEXT)}}
            status, _, reason, _ = client_cls(world, relay.port, topic=topic, key=key).push(token, message, push_type=push_type)
            expect(status == 200, f"{client_cls.name} to {topic}: {status} {reason}")
            sent[token] = topic
    entries = world.wait_record(standin, set(sent), len(sent))
    expect(len(entries) == len(sent), f"the stand-in recorded {len(entries)} of {len(sent)} pushes")
    wrong = [(sent[e["token"]], credential_of(e)) for e in entries if credential_of(e) != expected[sent[e["token"]]]]
    expect(not wrong, f"pushes under the wrong credential: {wrong}")
    unknown, expired = device_token(), device_token()
    responses = relay.h2(world, [
        Request(f"/3/device/{unknown}", push_headers(world), b'{"aps":{"alert":"x"}}'),
        Request(f"/3/device/{expired}", [("apns-topic", "com.old.app")], b'{"aps":{"alert":"x"}}'),
    ])
    expect(responses[0].status == 400 and responses[0].json() == {"reason": "TopicDisallowed"},
           f"a topic no entry holds: {responses[0]!r}")
    expect(responses[1].status == 403 and responses[1].json() == {"reason": "BadCertificate"},
           f"an expired certificate's push: {responses[1]!r}")
    status, body = http_get(f"http://127.0.0.1:{relay.hook}/readyz")
    certificates = (json.loads(body) if status in (200, 503) else {}).get("certificates") or {}
    expect(certificates.get("old", {}).get("status") == "expired"
           and certificates.get("legacy", {}).get("status") == "expires_soon"
           and 18 <= certificates.get("legacy", {}).get("days_left", -1) <= 20,
           f"/readyz certificates: {certificates}")
    status, metrics = http_get(f"http://127.0.0.1:{relay.hook}/metrics")
    text = metrics.decode()
    expect(re.search(r'pushmedia_relay_certificate_days_left\{[^}]*name="legacy"[^}]*\} (19|18|20)', text),
           "no pushmedia_relay_certificate_days_left for legacy in /metrics")
    expect(re.search(r'pushmedia_relay_credential_pushes_total\{[^}]*name="news"[^}]*\} 2', text),
           "pushmedia_relay_credential_pushes_total does not count news's 2 pushes")
    log = open(relay.proc.err_path, "rb").read().decode(errors="replace")
    expect(AppleCA.PASSWORD not in log and "PRIVATE KEY" not in log and "BEGIN" not in log,
           "a secret appears in the relay's log")
    expect(re.search(r"error .*credential=old .*apns certificate expired: its pushes are refused", log),
           "no error line about the expired certificate's refused push")


@check("relay")
def relay_certificate_sender(world):
    """A certificate sender, unmodified (aioapns with client_cert, its app's own certificate),
    through a relay holding the same app's .p12, with the test Apple CA as --apns-client-ca: its
    pushes go out under the held certificate; to another app's topic, even one the relay holds,
    400 TopicDisallowed (Apple's rule), never another app's credential."""
    standin = apple_standin(world)
    path = credentials_yaml(world, ["shop", "legacy"], "cert-sender.yaml")
    relay = world.relay("relay-cert-sender", lambda: standin.base,
                        extra=["--relay-credentials", path, "--apns-client-ca", world.material.apple.ca])
    pem = world.certs["legacy"][1]
    token = device_token()
    status, _, reason, _ = AioAPNs(world, relay.port, topic=LEGACY, client_cert=pem).push(
        token, {"aps": {"alert": dict(RICH_TEXT)}})
    expect(status == 200, f"aioapns with its certificate: {status} {reason}")
    entry = world.single_entry(standin, token)
    expect(credential_of(entry) == ("certificate", LEGACY), f"arrived under {credential_of(entry)}")
    other = device_token()
    (r,) = h2_run(relay.port, [Request(f"/3/device/{other}", [("apns-topic", SHOP)], b'{"aps":{"alert":"x"}}')],
                  ssl_context=cert_context(world, pem))
    expect(r.status == 400 and r.json() == {"reason": "TopicDisallowed"}, f"to another app's topic: {r!r}")
    (r,) = h2_run(relay.port, [Request(f"/3/device/{device_token()}", [], b'{"aps":{"alert":"x"}}')],
                  ssl_context=cert_context(world, pem))
    expect(r.status == 400 and r.json() == {"reason": "MissingTopic"}, f"no apns-topic, two topics: {r!r}")
    # A push to its own topic, sent after: once it reaches the stand-in, the refused one would have.
    last = device_token()
    (r,) = h2_run(relay.port, [Request(f"/3/device/{last}", [("apns-topic", LEGACY)], b'{"aps":{"alert":"x"}}')],
                  ssl_context=cert_context(world, pem))
    expect(r.status == 200, f"to its own topic: {r!r}")
    world.single_entry(standin, last)
    expect(not standin.entries({other}), "the push to another app's topic reached the stand-in")


@check("relay")
def relay_held_credentials_clients(world):
    """An entry's `clients` lets only the client certificates it names use it: "push sender" (the
    test CA's client certificate, by common name) pushes with shop's key, and is refused news's
    (403 Forbidden), which names another client."""
    standin = apple_standin(world)
    m = world.material
    text = (f"apns:\n  - {{name: shop, team_id: {TEAM}, key_id: {KEY_ID}, key: {m.p8}, topics: [{SHOP}], "
            f"clients: [push sender]}}\n"
            f"  - {{name: news, team_id: {OTHER_TEAM}, key_id: {OTHER_KEY_ID}, key: {m.other_p8}, topics: [{NEWS}], "
            f"clients: ['CN=someone else,O=Elsewhere']}}\n")
    path = m.write("clients.yaml", text.encode())
    os.chmod(path, 0o600)
    relay = world.relay("relay-clients", lambda: standin.base,
                        extra=["--relay-credentials", path, "--apns-client-ca", m.ca])
    ours, theirs = device_token(), device_token()
    context = m.client_context(certificate=True)
    responses = h2_run(relay.port, [
        Request(f"/3/device/{ours}", [("apns-topic", SHOP)], b'{"aps":{"alert":"x"}}'),
        Request(f"/3/device/{theirs}", [("apns-topic", NEWS)], b'{"aps":{"alert":"x"}}'),
    ], ssl_context=context)
    expect(responses[0].status == 200, f"a listed client: {responses[0]!r}")
    expect(responses[1].status == 403 and responses[1].json() == {"reason": "Forbidden"},
           f"a client the entry does not list: {responses[1]!r}")
    # The listed client's push of the same batch has reached the stand-in (single_entry waits for
    # it): the refused one would have too.
    expect(credential_of(world.single_entry(standin, ours)) == ("key", TEAM, KEY_ID), "shop's push under another key")
    expect(not standin.entries({theirs}), "the refused push reached the stand-in")


def check_credentials(world, path):
    run = subprocess.run([world.bin, "check-credentials", path], capture_output=True, timeout=60)
    return run.returncode, run.stdout.decode(errors="replace") + run.stderr.decode(errors="replace")


@check("relay")
def relay_credentials_refused(world):
    """`pushmedia check-credentials` and `serve` refuse a file that cannot be used, naming the
    entry and why: a topic in two entries, a wrong password, a key that is not P-256, a key
    readable by others, an unknown setting; a good file passes; nothing secret is printed."""
    world.relay_support()
    m = world.material
    good = credentials_yaml(world, ["shop", "news", "legacy"], "good.yaml")
    code, out = check_credentials(world, good)
    expect(code == 0 and "shop" in out and "legacy" in out and LEGACY in out, f"a good file: exit {code}: {out}")
    p384 = m.write("AuthKey_P384.p8", private_pem(ec.generate_private_key(ec.SECP384R1())))
    os.chmod(p384, 0o600)
    wrong_pw = m.write("wrong.pass", b"not-the-password\n")
    os.chmod(wrong_pw, 0o600)
    exposed = m.write("AuthKey_OPEN.p8", private_pem(ec.generate_private_key(ec.SECP256R1())))
    os.chmod(exposed, 0o644)
    cases = [
        ("a topic in two entries", f"apns:\n  - {{name: a, team_id: {TEAM}, key_id: {KEY_ID}, key: {m.p8}, topics: [{SHOP}]}}\n"
         f"  - {{name: b, team_id: {OTHER_TEAM}, key_id: {OTHER_KEY_ID}, key: {m.other_p8}, topics: [{SHOP}]}}\n",
         [SHOP, '"a"', '"b"']),
        ("a wrong password", f"apns:\n  - {{name: pw, certificate: {world.certs['legacy'][1].replace('.pem', '.p12')}, "
         f"password_file: {wrong_pw}}}\n", ['"pw"', "password"]),
        ("a key that is not P-256", f"apns:\n  - {{name: p384, team_id: {TEAM}, key_id: K1, key: {p384}, topics: [x.y]}}\n",
         ['"p384"', "P-256"]),
        ("a key readable by others", f"apns:\n  - {{name: open, team_id: {TEAM}, key_id: K1, key: {exposed}, "
         f"topics: [x.y]}}\n", ['"open"', "chmod 600", "others"]),
        ("an unknown setting", f"apns:\n  - {{name: typo, team_id: {TEAM}, key_id: K1, keyfile: {m.p8}}}\n",
         ['"typo"', "keyfile"]),
    ]
    problems = []
    for label, text, needles in cases:
        path = m.write("bad.yaml", text.encode())
        os.chmod(path, 0o600)
        code, out = check_credentials(world, path)
        if code == 0 or not all(n in out for n in needles) or AppleCA.PASSWORD in out or "not-the-password" in out:
            problems.append(f"{label}: exit {code}: {out.strip()[-400:]}")
    os.chmod(good, 0o644)
    code, out = check_credentials(world, good)
    if code == 0 or "chmod 600" not in out:
        problems.append(f"a credentials file readable by others: exit {code}: {out.strip()[-300:]}")
    os.chmod(good, 0o600)
    broken = m.write("broken.yaml", b"apns:\n  - {name: shop, team_id: [unclosed\n")
    os.chmod(broken, 0o600)
    serve = subprocess.run([world.bin, "serve", "--port", "0", "--store", os.path.join(world.work, "store-refused"),
                            "--apns-port", "0", "--relay-credentials", broken], capture_output=True, timeout=60)
    if serve.returncode == 0 or b"broken.yaml" not in serve.stderr:
        problems.append(f"serve with a broken file: exit {serve.returncode}: {serve.stderr.decode()[-300:]}")
    expect(not problems, "; ".join(problems))


@check("relay")
def relay_reload_under_load(world):
    """A campaign runs while the credentials file is replaced and the relay gets SIGHUP: an app
    added (news), a key rotated (shop), an app removed (legacy), then a broken file (the last set
    stays; the log says why; /metrics shows the failed reload). Every push gets an answer, and
    none reaches the stand-in under another credential than its app's."""
    standin = apple_standin(world)
    path = credentials_yaml(world, ["shop", "legacy"], "reload.yaml")
    relay = Relay(world, "relay-reload", standin.base, tls=False, extra=["--relay-credentials", path])
    stop = threading.Event()
    results = []  # (token, topic, status, reason, error)
    failures = []

    def campaign():
        try:
            while not stop.is_set():
                batch = [(device_token(), topic) for topic in (SHOP, NEWS, LEGACY) for _ in range(10)]
                responses = relay.h2(world, [
                    Request(f"/3/device/{t}", [("apns-topic", topic), ("apns-push-type", "alert")],
                            b'{"aps":{"alert":"reload"}}') for t, topic in batch], timeout=20)
                for (token, topic), r in zip(batch, responses):
                    results.append((token, topic, r.status, (r.json() or {}).get("reason") if r.status != 200 else None,
                                    r.error))
        except Exception as e:  # the check reports it
            failures.append(e)

    def log_count(text):
        return open(relay.proc.err_path, "rb").read().decode(errors="replace").count(text)

    def replace(apps=None, text=None, outcome="relay credentials reloaded"):
        before = log_count(outcome)
        new = path + ".new"
        with open(new, "w") as f:
            f.write(text if text is not None else open(credentials_yaml(world, apps, "reload-next.yaml")).read())
        os.chmod(new, 0o600)
        os.replace(new, path)
        relay.proc.p.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while log_count(outcome) == before:
            expect(time.monotonic() < deadline, f"no '{outcome}' in the log within 10 s of SIGHUP")
            time.sleep(0.05)
        # The batch in flight as the reload was logged may have been answered under the old set:
        # the pushes after it were all sent under the new one.
        pushing(len(results) + 30)
        return len(results)

    def pushing(count):
        """Waits until the campaign has `count` answers (it goes on meanwhile)."""
        deadline = time.monotonic() + 20
        while len(results) < count:
            expect(time.monotonic() < deadline and not failures, f"the campaign stalled at {len(results)} pushes")
            time.sleep(0.02)

    sender = threading.Thread(target=campaign)
    sender.start()
    try:
        pushing(20)
        added = replace(["shop", "legacy", "news"])
        rotated = replace(["shop-rotated", "legacy", "news"])
        removed = replace(["shop-rotated", "news"])
        broken = replace(text="apns:\n  - {name: shop, key: [unclosed\n", outcome="relay credentials not reloaded")
    finally:
        stop.set()
        sender.join(timeout=30)
    expect(not failures, f"the campaign failed: {failures}")
    lost = [r for r in results if r[4] or r[2] is None]
    expect(not lost, f"{len(lost)} of {len(results)} pushes got no answer, e.g. {lost[:2]}")
    ok = {r[0]: (i, r[1]) for i, r in enumerate(results) if r[2] == 200}
    refused = [(i, r[1], r[2], r[3]) for i, r in enumerate(results) if r[2] != 200]
    odd = [x for x in refused if (x[2], x[3]) != (403, "MissingProviderToken")
           or not ((x[1] == NEWS and x[0] < added) or (x[1] == LEGACY and x[0] >= rotated))]
    expect(not odd, f"unexpected refusals (index, topic, status, reason): {odd[:5]}")
    expect(any(topic == NEWS for _, topic in ok.values()) and any(r[1] == LEGACY for r in results[removed:]),
           "the campaign did not span the reloads")
    expect(all(r[2] != 200 for r in results[removed:] if r[1] == LEGACY), "legacy pushed after its removal")
    entries = world.wait_record(standin, set(ok), len(ok))
    expect(len(entries) == len(ok), f"the stand-in recorded {len(entries)} of {len(ok)} answered pushes")
    wrong, kids = [], {}
    for e in entries:
        index, topic = ok[e["token"]]
        got = credential_of(e)
        if topic == SHOP:
            fine = got in (("key", TEAM, KEY_ID), ("key", TEAM, ROTATED_KEY_ID))
            kids.setdefault(got[2], []).append(index)
        else:
            fine = got == {NEWS: ("key", OTHER_TEAM, OTHER_KEY_ID), LEGACY: ("certificate", LEGACY)}[topic]
        if not fine or e["status"] != 200:
            wrong.append((topic, got, e["status"]))
    expect(not wrong, f"pushes under the wrong credential: {wrong[:5]}")
    expect(kids.get(KEY_ID) and kids.get(ROTATED_KEY_ID) and max(kids[KEY_ID]) < removed
           and min(kids[ROTATED_KEY_ID]) >= added,
           f"the key rotation did not take: old key up to {max(kids.get(KEY_ID) or [-1])}, rotated from "
           f"{min(kids.get(ROTATED_KEY_ID) or [-1])}; reloads at {added}, {rotated}, {removed}")
    status, metrics = http_get(f"http://127.0.0.1:{relay.hook}/metrics")
    expect(re.search(r"^pushmedia_relay_credentials_reload_failed 1(\.0)?$", metrics.decode(), re.M),
           "pushmedia_relay_credentials_reload_failed is not 1 after the broken file")
    print(f"     reload: {len(results)} pushes, reloads after {added}, {rotated}, {removed}, {broken}")


# -- main ---------------------------------------------------------------------------------------

def main():
    return run_checks(
        CHECKS, World, __doc__, work_prefix="apns-relay-test-", default_timeout=900,
        quiet=("aioapns",))

if __name__ == "__main__":
    sys.exit(main())
