#!/usr/bin/env python3
"""End-to-end test of the FCM relay (`pushmedia serve --fcm-port`).

Google cannot be reached from here, so the upstream is standin.py (a strict stand-in for
Firebase Cloud Messaging's HTTP v1 API) and the clients are real, unmodified FCM libraries from
PyPI (firebase-admin: requests, HTTP/1.1; async-firebase: httpx with HTTP/2 offered by ALPN)
and raw HTTP/1.1 (http.client) and HTTP/2 (httpx) requests. Everything runs on 127.0.0.1: a test
CA, server certificate and service account key made here, a media origin (http.server) serving
samples/media/banner.webp under paths without an extension, the stand-in and the relays, each a
subprocess killed at the end.

How the clients are pointed at a host, given credentials and made to trust the test CA:
  firebase-admin  the class attribute messaging._MessagingService.FCM_URL (a format string with
                  the project as {0}), read when an app's messaging service is made, so one app
                  per host; a credentials.Base subclass whose get_credential() is a
                  google.oauth2.credentials.Credentials holding the static access token; the app's
                  options name the project. The CA by REQUESTS_CA_BUNDLE (requests) and
                  SSL_CERT_FILE (httpx), set in this process.
  async-firebase  the instance's BASE_URL (a class attribute, overridden on the instance); a
                  service account made here (google.oauth2.service_account.Credentials) whose
                  access token comes from the stand-in's POST /token, to which the module constant
                  async_firebase._credentials.TOKEN_URL is pointed (the service account's token_uri
                  is not used by async-firebase); use_http2=True. The CA by SSL_CERT_FILE (httpx).

Each check prints `ok  name` or `FAIL name: why`; the last line counts them; exit 1 when any
failed. The stand-in checks come first and need no relay.

  python3 Tests/fcm/relay_test.py [--bin .build/debug/pushmedia] [--standin-only] [--only NAME]...
"""

import asyncio
import concurrent.futures
import datetime
import hashlib
import http.client
import json
import os
import re
import secrets
import socket
import ssl
import sys
import threading
import time
import warnings

from cryptography.hazmat.primitives.asymmetric import rsa

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import relay_harness  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tracing"))
from trace_checks import expect_logged, expect_relayed_push, named, relay_receiver, trace, traceparent  # noqa: E402
from relay_harness import (  # noqa: E402
    CHECKS, CheckFailed, check, expect, free_port, http_get, jpeg_size, private_pem, run_checks)

HERE = os.path.dirname(os.path.abspath(__file__))
STANDIN = os.path.join(HERE, "standin.py")

PROJECT = "pushmedia-test"
OTHER_PROJECT = "someone-else"
ACCESS_TOKEN = "ya29.pushmedia-test-access-token"
BEARER = f"Bearer {ACCESS_TOKEN}"
SEND_PATH = f"/v1/projects/{PROJECT}/messages:send"

NAME_RE = re.compile(rf"^projects/{re.escape(PROJECT)}/messages/0:\d+%[0-9a-f]{{16}}$")
FAKE_NAME = f"projects/{PROJECT}/messages/fake_message_id"
TITLE, BODY = "Hi", "Text"
DATA = {"k": "v"}

# The stand-in answers registration tokens starting with these with errors (see standin.py --help).
DESIGNATED = ("dead", "bad0", "4290", "5030")


def device_token(prefix=""):
    # FCM registration tokens look like "<22 chars>:APA91b<more>"; any string is accepted.
    while True:
        token = prefix + secrets.token_urlsafe(16).replace("-", "x").replace("_", "y") + ":APA91b" + \
            secrets.token_urlsafe(96).replace("-", "x").replace("_", "y")
        if prefix or not token.startswith(DESIGNATED):
            return token


def rich_message(world, token, media_path="/img/banner"):
    """The FCM v1 message the relay is to enrich, as JSON."""
    return {
        "token": token,
        "notification": {"title": TITLE, "body": BODY, "image": world.origin.url(media_path)},
        "android": {"priority": "high", "notification": {"channel_id": "deals"}},
        "apns": {"payload": {"aps": {"sound": "default"}}},
        "data": dict(DATA),
    }


# -- material: CA, server certificate, service account -------------------------------------------

class Material(relay_harness.Material):
    """The test CA and server certificate, and a service account."""

    def __init__(self, folder):
        super().__init__(folder)
        # A service account as the Firebase console hands it out (RS256 key), for async-firebase.
        account_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.service_account = {
            "type": "service_account",
            "project_id": PROJECT,
            "private_key_id": secrets.token_hex(20),
            "private_key": private_pem(account_key).decode(),
            "client_email": f"firebase-adminsdk-test@{PROJECT}.iam.gserviceaccount.com",
            "client_id": str(secrets.randbelow(10 ** 21)),
            "auth_uri": "https://accounts.google.com/o/oauth2/auth",
            "token_uri": "https://oauth2.googleapis.com/token",
        }

    def client_context(self, alpn=None):
        ctx = ssl.create_default_context(cafile=self.ca)
        if alpn:
            ctx.set_alpn_protocols(alpn)
        return ctx

    def trust_in_process(self):
        """The test CA for the libraries' own TLS: requests reads REQUESTS_CA_BUNDLE at each
        request, httpx reads SSL_CERT_FILE when a client is made."""
        os.environ["REQUESTS_CA_BUNDLE"] = self.ca
        os.environ["SSL_CERT_FILE"] = self.ca
        os.environ.pop("CURL_CA_BUNDLE", None)
        os.environ["NO_PROXY"] = os.environ["no_proxy"] = "127.0.0.1,localhost"


# -- raw HTTP -----------------------------------------------------------------------------------

class Response:
    def __init__(self, status, headers, body, elapsed):
        self.status = status
        self.headers = headers  # lower-case names
        self.body = body
        self.elapsed = elapsed

    def json(self):
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def __repr__(self):
        return f"<{self.status} {self.body[:300]!r} after {self.elapsed:.2f}s>"


class Raw:
    """HTTP/1.1 keep-alive requests with http.client (TLS with the test CA when tls)."""

    def __init__(self, world, port, tls=True, timeout=15.0):
        if tls:
            self.conn = http.client.HTTPSConnection("localhost", port, timeout=timeout,
                                                    context=world.material.client_context(alpn=["http/1.1"]))
        else:
            self.conn = http.client.HTTPConnection("localhost", port, timeout=timeout)

    def request(self, method, path, body=b"", headers=None):
        headers = {"Authorization": BEARER, "Content-Type": "application/json"} if headers is None else headers
        started = time.monotonic()
        for attempt in range(2):
            try:
                self.conn.request(method, path, body=body if body or method == "POST" else None, headers=headers)
                r = self.conn.getresponse()
                data = r.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # A keep-alive connection the server closed between requests: once more, anew.
                self.conn.close()
                if attempt:
                    raise
        return Response(r.status, {k.lower(): v for k, v in r.getheaders()}, data, time.monotonic() - started)

    def close(self):
        self.conn.close()


def raw_once(world, port, method, path, body=b"", headers=None, tls=True, timeout=15.0):
    raw = Raw(world, port, tls=tls, timeout=timeout)
    try:
        return raw.request(method, path, body, headers)
    finally:
        raw.close()


def h2_requests(world, port, requests, timeout=15.0):
    """(method, path, body, headers) each on one HTTP/2 connection (httpx, ALPN h2 only)."""
    import httpx

    out = []
    with httpx.Client(http2=True, verify=world.material.client_context(), timeout=timeout) as client:
        for method, path, body, headers in requests:
            started = time.monotonic()
            r = client.request(method, f"https://localhost:{port}{path}", content=body or None,
                               headers={"authorization": BEARER, "content-type": "application/json"}
                               if headers is None else headers)
            expect(r.http_version == "HTTP/2", f"httpx spoke {r.http_version}, expected HTTP/2")
            out.append(Response(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content,
                                time.monotonic() - started))
    return out


def google_error(response):
    """The {"code", "message", "status"} of an answer in Google's error shape, or None."""
    doc = response.json()
    if not isinstance(doc, dict) or set(doc) != {"error"} or not isinstance(doc["error"], dict):
        return None
    error = doc["error"]
    if error.get("code") != response.status or not isinstance(error.get("message"), str) \
            or not isinstance(error.get("status"), str):
        return None
    return error


def fcm_error_code(error):
    for detail in (error or {}).get("details", []):
        if detail.get("@type") == "type.googleapis.com/google.firebase.fcm.v1.FcmError":
            return detail.get("errorCode")
    return None


# -- the clients under test ---------------------------------------------------------------------

def library_message(M, doc, data):
    """`doc` (a message as JSON) as a client library's Message: firebase-admin's `messaging` and
    async-firebase's `messages` name their classes and fields alike."""
    n, a, apns = doc.get("notification"), doc.get("android"), doc.get("apns")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Message.token, in favour of fid
        return M.Message(
            token=doc.get("token"),
            data=data,
            notification=M.Notification(title=n.get("title"), body=n.get("body"), image=n.get("image"))
            if n else None,
            android=M.AndroidConfig(priority=a.get("priority"), notification=M.AndroidNotification(
                channel_id=a["notification"].get("channel_id")) if a.get("notification") else None)
            if a else None,
            apns=M.APNSConfig(payload=M.APNSPayload(aps=M.Aps(sound=apns["payload"]["aps"].get("sound"))))
            if apns else None,
        )


class FirebaseAdmin:
    """firebase-admin 7, pointed at a host by _MessagingService.FCM_URL (read when an app's
    messaging service is made: one app per host); a static access token by a credentials.Base
    whose get_credential() holds it; the test CA by REQUESTS_CA_BUNDLE."""

    name = "firebase-admin"
    apps = {}

    def __init__(self, world, base):
        import firebase_admin
        from firebase_admin import credentials, messaging
        import google.oauth2.credentials

        world.material.trust_in_process()

        class StaticToken(credentials.Base):
            def get_credential(self):
                return google.oauth2.credentials.Credentials(
                    token=ACCESS_TOKEN, expiry=datetime.datetime.utcnow() + datetime.timedelta(days=1))

        if base not in FirebaseAdmin.apps:
            app = firebase_admin.initialize_app(StaticToken(), options={"projectId": PROJECT, "httpTimeout": 30},
                                                name=f"relay-test-{len(FirebaseAdmin.apps)}")
            messaging._MessagingService.FCM_URL = base + "/v1/projects/{0}/messages:send"
            messaging._get_messaging_service(app)  # made now, with this URL
            FirebaseAdmin.apps[base] = app
        self.app = FirebaseAdmin.apps[base]

    @staticmethod
    def message(doc):
        from firebase_admin import messaging

        return library_message(messaging, doc, data=doc.get("data"))

    def send(self, doc, dry_run=False):
        """The message name FCM answered; raises CheckFailed naming the library's exception."""
        from firebase_admin import messaging

        try:
            return messaging.send(self.message(doc), dry_run=dry_run, app=self.app)
        except messaging.UnregisteredError:
            raise
        except Exception as e:
            raise CheckFailed(f"firebase-admin raised {type(e).__name__}: {e}")

    def expect_unregistered(self, doc):
        from firebase_admin import messaging

        try:
            name = messaging.send(self.message(doc), app=self.app)
        except messaging.UnregisteredError as e:
            expect(e.http_response is not None and e.http_response.status_code == 404,
                   f"UnregisteredError with HTTP {getattr(e.http_response, 'status_code', None)}")
            return
        except Exception as e:
            raise CheckFailed(f"raised {type(e).__name__}: {e}, expected messaging.UnregisteredError")
        raise CheckFailed(f"sent as {name}, expected messaging.UnregisteredError")

    def send_each(self, docs):
        from firebase_admin import messaging

        return messaging.send_each([self.message(d) for d in docs], app=self.app)


class AsyncFirebase:
    """async-firebase 6, pointed at a host by the instance's BASE_URL; an access token from the
    stand-in's POST /token (async_firebase._credentials.TOKEN_URL) for a service account made
    here; HTTP/2 offered by ALPN (use_http2=True); the test CA by SSL_CERT_FILE."""

    name = "async-firebase"

    def __init__(self, world, base):
        self.world, self.base = world, base
        world.material.trust_in_process()

    def _client(self):
        import async_firebase._credentials
        from async_firebase import AsyncFirebaseClient
        from google.oauth2 import service_account

        async_firebase._credentials.TOKEN_URL = f"{self.world.standin.base}/token"
        creds = service_account.Credentials.from_service_account_info(
            self.world.material.service_account, scopes=list(async_firebase._credentials.DEFAULT_SCOPES))
        client = AsyncFirebaseClient(credentials=creds, use_http2=True)
        client.BASE_URL = self.base
        return client

    @staticmethod
    def message(doc):
        from async_firebase import messages

        return library_message(messages, doc, data=dict(doc.get("data") or {}))

    def _send(self, doc, dry_run=False):
        async def main():
            async with self._client() as client:
                return await asyncio.wait_for(client.send(self.message(doc), dry_run=dry_run), 30)
        return asyncio.run(main())

    def send(self, doc, dry_run=False):
        r = self._send(doc, dry_run)
        if r.exception is not None:
            raise CheckFailed(f"async-firebase answered {type(r.exception).__name__}: {r.exception}")
        expect(r.success, f"async-firebase: no message name in {r!r}")
        return r.message_id

    def expect_unregistered(self, doc):
        from async_firebase.errors import UnregisteredError

        r = self._send(doc)
        expect(isinstance(r.exception, UnregisteredError),
               f"answered {type(r.exception).__name__ if r.exception else r.message_id}: {r.exception}, "
               f"expected async_firebase.errors.UnregisteredError")


CLIENTS = {"firebase_admin": FirebaseAdmin, "async_firebase": AsyncFirebase}


# -- the world: everything a check may need, made on first use ----------------------------------

class World(relay_harness.World):
    kind, label = "fcm", "FCM"
    material_class = Material
    standin_script = STANDIN
    origin_paths = ("/img/banner", "/img/campaign")
    # The campaign's image takes a moment, as from a real CDN: the message's Android and iOS jobs
    # are both under way while it downloads, and share it.
    slow_paths = {"/img/campaign": 0.5}

    def standin_options(self):
        return ["--project", PROJECT, "--token", ACCESS_TOKEN]


# -- checks -------------------------------------------------------------------------------------

# a. The stand-in against the real clients, and on its own.

def client_against_standin(world, client_cls, protocol):
    client = client_cls(world, world.standin.base)
    token = device_token()
    doc = rich_message(world, token)
    name = client.send(doc)
    expect(NAME_RE.match(name or ""), f"message name {name!r}")
    entry = world.single_entry(world.standin, token)
    expect(entry["status"] == 200 and entry["name"] == name,
           f"stand-in answered {entry['status']} {entry['name']!r}, client has {name!r}")
    expect(entry["protocol"] == protocol, f"{client_cls.name} spoke {entry['protocol']}, expected {protocol}")
    expect(entry["headers"].get("authorization") == "sha256:" + hashlib.sha256(BEARER.encode()).hexdigest(),
           f"authorization arrived as {entry['headers'].get('authorization')!r}")
    sent = json.loads(entry["body"])["message"]
    expect(sent["notification"] == doc["notification"] and sent.get("data") == DATA
           and sent["android"]["notification"].get("channel_id") == "deals"
           and sent["android"].get("priority") == "high" and sent["apns"]["payload"]["aps"].get("sound") == "default",
           f"{client_cls.name} sent {entry['body'][:400]}")
    fake = client.send(rich_message(world, device_token()), dry_run=True)
    expect(fake == FAKE_NAME, f"dry run answered {fake!r}")
    client.expect_unregistered(rich_message(world, device_token("dead")))
    return entry


@check("standin")
def standin_firebase_admin(world):
    client_against_standin(world, FirebaseAdmin, "http1.1")


@check("standin")
def standin_async_firebase(world):
    mark = world.standin.mark()
    client_against_standin(world, AsyncFirebase, "h2")
    tokens = [e for e in world.standin.entries(since=mark) if e["path"] == "/token"]
    expect(tokens and all(e["status"] == 200 for e in tokens),
           f"async-firebase's token requests: {[(e['status'], e['error_status']) for e in tokens]}")


def strict_cases(world):
    """(label, method, path, body, headers, status, error status, FcmError code)."""
    def body(**message):
        return json.dumps({"message": message}).encode()

    def msg(**extra):
        return body(token=device_token(), notification={"title": "t", "body": "b"}, **extra)

    auth = {"Authorization": BEARER, "Content-Type": "application/json"}
    return [
        ("valid", "POST", SEND_PATH, msg(), None, 200, None, None),
        ("topic", "POST", SEND_PATH, body(topic="news", data={"a": "b"}), None, 200, None, None),
        ("fid", "POST", SEND_PATH, body(fid="fid-123", data={"a": "b"}), None, 200, None, None),
        ("camelCase fields", "POST", SEND_PATH,
         json.dumps({"message": {"token": device_token(), "fcmOptions": {"analyticsLabel": "x"},
                                 "apns": {"fcmOptions": {"image": "https://example.com/a.png"}}},
                     "validateOnly": False}).encode(), None, 200, None, None),
        ("all images", "POST", SEND_PATH, msg(
            android={"notification": {"image": "http://a.example/i"}},
            apns={"fcm_options": {"image": "https://a.example/i"}, "payload": {"aps": {"mutable-content": 1}}},
            webpush={"notification": {"image": "https://a.example/i"}}), None, 200, None, None),
        ("validate_only", "POST", SEND_PATH,
         json.dumps({"message": {"token": device_token()}, "validate_only": True}).encode(), None, 200, None, None),
        ("other path", "POST", f"/v1/projects/{PROJECT}/other", msg(), None, 404, "NOT_FOUND", None),
        ("legacy path", "POST", "/fcm/send", msg(), None, 404, "NOT_FOUND", None),
        ("GET", "GET", SEND_PATH, b"", {"Authorization": BEARER}, 405, "METHOD_NOT_ALLOWED", None),
        ("no authorization", "POST", SEND_PATH, msg(), {"Content-Type": "application/json"}, 401,
         "UNAUTHENTICATED", None),
        ("other token", "POST", SEND_PATH, msg(), dict(auth, Authorization="Bearer nope"), 401,
         "UNAUTHENTICATED", None),
        ("basic auth", "POST", SEND_PATH, msg(), dict(auth, Authorization="Basic " + ACCESS_TOKEN), 401,
         "UNAUTHENTICATED", None),
        ("other project", "POST", f"/v1/projects/{OTHER_PROJECT}/messages:send", msg(), None, 403,
         "PERMISSION_DENIED", None),
        ("not JSON", "POST", SEND_PATH, b"{nope", None, 400, "INVALID_ARGUMENT", None),
        ("no message", "POST", SEND_PATH, b"{}", None, 400, "INVALID_ARGUMENT", None),
        ("unknown top field", "POST", SEND_PATH,
         json.dumps({"message": {"token": "x"}, "dry_run": True}).encode(), None, 400, "INVALID_ARGUMENT", None),
        ("validate_only not bool", "POST", SEND_PATH,
         json.dumps({"message": {"token": "x"}, "validate_only": "yes"}).encode(), None, 400,
         "INVALID_ARGUMENT", None),
        ("unknown message field", "POST", SEND_PATH, msg(priority="high"), None, 400, "INVALID_ARGUMENT", None),
        ("no target", "POST", SEND_PATH, body(notification={"title": "t"}), None, 400, "INVALID_ARGUMENT",
         "INVALID_ARGUMENT"),
        ("two targets", "POST", SEND_PATH, body(token="x", topic="y"), None, 400, "INVALID_ARGUMENT",
         "INVALID_ARGUMENT"),
        ("data not strings", "POST", SEND_PATH, msg(data={"n": 1}), None, 400, "INVALID_ARGUMENT", None),
        ("image not http", "POST", SEND_PATH, msg(android={"notification": {"image": "ftp://a/i"}}), None, 400,
         "INVALID_ARGUMENT", "INVALID_ARGUMENT"),
        ("image not a string", "POST", SEND_PATH, msg(apns={"fcm_options": {"image": 3}}), None, 400,
         "INVALID_ARGUMENT", None),
        ("bad priority", "POST", SEND_PATH, msg(android={"priority": "urgent"}), None, 400,
         "INVALID_ARGUMENT", None),
        ("bad0", "POST", SEND_PATH, body(token=device_token("bad0")), None, 400, "INVALID_ARGUMENT",
         "INVALID_ARGUMENT"),
        ("dead", "POST", SEND_PATH, body(token=device_token("dead")), None, 404, "NOT_FOUND", "UNREGISTERED"),
        ("4290", "POST", SEND_PATH, body(token=device_token("4290")), None, 429, "RESOURCE_EXHAUSTED",
         "QUOTA_EXCEEDED"),
        ("token endpoint, bad grant", "POST", "/token", b"grant_type=password&username=x",
         {"Content-Type": "application/x-www-form-urlencoded"}, 400, None, None),
    ]


def judge(cases, responses):
    problems = []
    for (label, _, _, _, _, status, error_status, fcm), r in zip(cases, responses):
        if r.status != status:
            problems.append(f"{label}: {r!r}, expected {status}")
            continue
        if status == 200:
            doc = r.json() or {}
            if label == "validate_only" and doc.get("name") != FAKE_NAME:
                problems.append(f"{label}: name {doc.get('name')!r}")
            elif label != "validate_only" and not NAME_RE.match(str(doc.get("name"))):
                problems.append(f"{label}: name {doc.get('name')!r}")
            continue
        if error_status is None:
            continue
        error = google_error(r)
        if error is None or error["status"] != error_status or fcm_error_code(error) != fcm:
            problems.append(f"{label}: {r!r}, expected {status} {error_status} FcmError {fcm}")
    return problems


@check("standin")
def standin_strict_http1(world):
    cases = strict_cases(world)
    raw = Raw(world, world.standin.port)
    try:
        responses = [raw.request(method, path, body, headers) for _, method, path, body, headers, *_ in cases]
    finally:
        raw.close()
    problems = judge(cases, responses)
    expect(not problems, "; ".join(problems))


@check("standin")
def standin_strict_h2(world):
    cases = strict_cases(world)
    responses = h2_requests(world, world.standin.port, [(method, path, body, headers)
                                                       for _, method, path, body, headers, *_ in cases])
    problems = judge(cases, responses)
    entries = world.standin.entries()
    expect(any(e["protocol"] == "h2" and e["stream"] for e in entries), "no HTTP/2 request recorded")
    expect(not problems, "; ".join(problems))


@check("standin")
def standin_token_endpoint(world):
    import google.auth.crypt
    import google.auth.jwt

    signer = google.auth.crypt.RSASigner.from_service_account_info(world.material.service_account)
    now = int(time.time())
    assertion = google.auth.jwt.encode(signer, {
        "iss": world.material.service_account["client_email"], "aud": "https://oauth2.googleapis.com/token",
        "scope": "https://www.googleapis.com/auth/firebase.messaging", "iat": now, "exp": now + 3600}).decode()
    form = f"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}".encode()
    r = raw_once(world, world.standin.port, "POST", "/token", form,
                 {"Content-Type": "application/x-www-form-urlencoded"})
    doc = r.json() or {}
    expect(r.status == 200 and doc == {"access_token": ACCESS_TOKEN, "expires_in": 3600, "token_type": "Bearer"},
           f"token endpoint answered {r!r}")


@check("standin")
def standin_stall(world):
    stalled = world.standin_with("standin-stall", "--stall")
    token = device_token()
    started = time.monotonic()
    try:
        r = raw_once(world, stalled.port, "POST", SEND_PATH, json.dumps({"message": {"token": token}}).encode(),
                     timeout=1.5)
        raise CheckFailed(f"the stalling stand-in answered {r!r}")
    except (socket.timeout, TimeoutError):
        pass
    expect(time.monotonic() - started >= 1.4, "the request ended early")
    entry = world.single_entry(stalled, token)
    expect(entry["status"] is None and entry["note"] == "stalled", f"recorded {entry}")


# b. Real clients through the relay.

def expect_store_jpeg(url, pattern, what):
    expect(isinstance(url, str) and pattern.match(url), f"{what} is {url!r}, expected a store URL")
    status, data = http_get(url)
    expect(status == 200 and data[:3] == b"\xff\xd8\xff" and len(data) < 1_000_000,
           f"GET {what} {url}: {status}, {len(data)} bytes, starts {data[:8].hex()}")


def expect_enriched(message, token, pattern):
    """The message as the stand-in received it carries the store URLs and its text intact."""
    notification = message.get("notification") or {}
    expect(notification.get("title") == TITLE and notification.get("body") == BODY,
           f"notification changed: {notification}")
    expect(message.get("token") == token, f"token arrived as {message.get('token')!r}")
    expect(message.get("data") == DATA, f"data arrived as {message.get('data')!r}")
    android = message.get("android") or {}
    expect(android.get("priority") == "high", f"android.priority arrived as {android.get('priority')!r}")
    expect((android.get("notification") or {}).get("channel_id") == "deals",
           f"android.notification arrived as {android.get('notification')!r}")
    apns = message.get("apns") or {}
    aps = (apns.get("payload") or {}).get("aps") or {}
    expect(aps.get("sound") == "default", f"aps arrived as {aps}")
    expect(aps.get("mutable-content") == 1, f"aps mutable-content is {aps.get('mutable-content')!r}, expected 1")
    expect_store_jpeg((android.get("notification") or {}).get("image"), pattern, "android.notification.image")
    expect_store_jpeg((apns.get("fcm_options") or {}).get("image"), pattern, "apns.fcm_options.image")


def is_processed(message, pattern):
    image = ((message.get("android") or {}).get("notification") or {}).get("image")
    return isinstance(image, str) and bool(pattern.match(image))


def rich_through_relay(world, client_cls):
    relay = world.relay_tls
    client = client_cls(world, relay.base)
    pattern = relay.store_url_re()
    token = device_token()
    doc = rich_message(world, token)
    deadline = time.monotonic() + 10.0
    attempts = 0
    while True:
        attempts += 1
        name = client.send(doc)
        entries = world.wait_record(world.standin, {token}, attempts, timeout=5)
        expect(len(entries) >= attempts, f"message {attempts}: the stand-in recorded {len(entries)} requests")
        entry = entries[-1]
        expect(entry["status"] == 200 and entry["name"] == name,
               f"stand-in answered {entry['status']} {entry['name']!r}, the client has {name!r}")
        expect(entry["protocol"] == "h2", f"the relay spoke {entry['protocol']} upstream, expected h2")
        expect(entry["headers"].get("authorization") == "sha256:" + hashlib.sha256(BEARER.encode()).hexdigest(),
               "the Authorization header did not arrive unchanged")
        message = json.loads(entry["body"])["message"]
        if is_processed(message, pattern):
            break
        expect(time.monotonic() < deadline,
               f"after {attempts} messages in 10s android.notification.image is still "
               f"{((message.get('android') or {}).get('notification') or {}).get('image')!r}")
        time.sleep(0.3)
    expect_enriched(message, token, pattern)


@check("relay")
def relay_firebase_admin_rich(world):
    rich_through_relay(world, FirebaseAdmin)


@check("relay")
def relay_async_firebase_rich(world):
    rich_through_relay(world, AsyncFirebase)


@check("relay")
def relay_clevertap_carousel(world):
    """A CleverTap carousel sent by firebase-admin as a data message through the relay: each
    pt_imgN becomes a store URL of a 3:2 JPEG within CleverTap's 86 KB, in the data map that stays
    all strings, its other keys as they were."""
    relay = world.relay_tls
    client = FirebaseAdmin(world, relay.base)
    pattern = relay.store_url_re()
    token = device_token()
    pages = (1, 2, 3)
    data = {"pt_id": "pt_carousel", "pt_title": TITLE, "pt_msg": BODY, "pt_dl1": "app://sale",
            **{f"pt_img{n}": world.origin.url(f"/img/banner?page={n}") for n in pages}}
    deadline = time.monotonic() + 10.0
    attempts = 0
    while True:
        attempts += 1
        client.send({"token": token, "data": dict(data)})
        entries = world.wait_record(world.standin, {token}, attempts, timeout=5)
        expect(len(entries) >= attempts and entries[-1]["status"] == 200,
               f"message {attempts}: the stand-in recorded {entries[-1:]}")
        got = json.loads(entries[-1]["body"])["message"].get("data") or {}
        if all(pattern.match(str(got.get(f"pt_img{n}"))) for n in pages):
            break
        expect(time.monotonic() < deadline, f"after {attempts} messages in 10s the carousel arrived as {got}")
        time.sleep(0.3)
    expect(all(isinstance(value, str) for value in got.values()), f"a data value is not a string: {got}")
    expect({key: got.get(key) for key in ("pt_id", "pt_title", "pt_msg", "pt_dl1")}
           == {key: data[key] for key in ("pt_id", "pt_title", "pt_msg", "pt_dl1")}, f"data arrived as {got}")
    for n in pages:
        status, body = http_get(got[f"pt_img{n}"])
        expect(status == 200 and body[:3] == b"\xff\xd8\xff" and len(body) <= 86_000,
               f"pt_img{n}: {status}, {len(body)} bytes")
        width, height = jpeg_size(body)
        expect(abs(width / height - 1.5) < 0.015, f"pt_img{n} is {width}x{height}, not 3:2")


@check("relay")
def relay_outcome_header(world):
    relay = world.relay_tls
    token = device_token()
    r = raw_once(world, relay.port, "POST", SEND_PATH, json.dumps({"message": rich_message(world, token)}).encode())
    expect(r.status == 200 and NAME_RE.match(str((r.json() or {}).get("name"))), f"relay answered {r!r}")
    outcome = r.headers.get("x-pushmedia-outcome")
    expect(outcome, f"no x-pushmedia-outcome header in {sorted(r.headers)}")
    entry = world.single_entry(world.standin, token)
    expect(entry["name"] == r.json()["name"], f"stand-in named it {entry['name']!r}, the relay answered "
                                             f"{r.json()['name']!r}")


@check("relay")
def relay_traces(world):
    """A rich message carrying the sender's traceparent is one trace at an OTLP receiver: the
    message's span (its project), its image's spans, the exchange with the stand-in (its message
    name, its wait in the fair queue as an event); no registration token nor authorization in it.
    The message's log line carries the trace's and the message span's ids."""
    with relay_receiver() as receiver:
        relay = world.relay("relay-traced", lambda: world.standin.base, extra=["--otel-endpoint", receiver.url])
        header, trace_id, parent = traceparent()
        token = device_token()
        r = raw_once(world, relay.port, "POST", SEND_PATH, json.dumps({"message": rich_message(world, token)}).encode(),
                     headers={"Authorization": BEARER, "Content-Type": "application/json", "traceparent": header})
        expect(r.status == 200, f"relay answered {r!r}")
        spans = trace(receiver, trace_id, lambda s: named(s, "fcm push") and named(s, "fcm upstream"))
        root, upstream = expect_relayed_push(spans, parent, "fcm", [token, BEARER.split(" ", 1)[1]], app=PROJECT)
        expect(upstream["attributes"].get("fcm.message_name") == r.json()["name"], f"upstream {upstream['attributes']}")
        entry = world.single_entry(world.standin, token)
        expect("traceparent" not in entry["headers"], f"the message reached Google's stand-in with {entry['headers']}")
        expect(named(spans, "pushmedia.fetch"), "no fetch span for the message's image")
        expect_logged(relay.proc.err_path, trace_id, root["span_id"], [token, BEARER.split(" ", 1)[1]])


@check("relay")
def relay_cleartext_http1_and_h2c(world):
    """Without a certificate one port serves HTTP/1.1 and HTTP/2 with prior knowledge (h2c)."""
    import httpx

    relay = world.relay("relay-cleartext", lambda: world.standin.base, tls=False)
    pattern = relay.store_url_re()
    clients = (("HTTP/1.1", lambda: httpx.Client(timeout=15)),
               ("HTTP/2", lambda: httpx.Client(http1=False, http2=True, timeout=15)))
    for version, make_client in clients:
        token = device_token()
        body = json.dumps({"message": rich_message(world, token)}).encode()
        deadline = time.monotonic() + 10.0
        with make_client() as client:
            for attempt in range(1, 100):
                r = client.post(f"http://127.0.0.1:{relay.port}{SEND_PATH}", content=body,
                                headers={"authorization": BEARER, "content-type": "application/json"})
                expect(r.http_version == version, f"httpx spoke {r.http_version}, expected {version}")
                expect(r.status_code == 200 and NAME_RE.match(str(r.json().get("name"))),
                       f"{version}: relay answered {r.status_code} {r.text[:300]}")
                expect(r.headers.get("x-pushmedia-outcome"), f"{version}: no x-pushmedia-outcome header")
                entries = world.wait_record(world.standin, {token}, attempt, timeout=5)
                message = json.loads(entries[-1]["body"])["message"]
                if is_processed(message, pattern):
                    break
                expect(time.monotonic() < deadline, f"{version}: after {attempt} messages in 10 s the image "
                                                    f"is not on the store")
                time.sleep(0.3)
            expect_enriched(message, token, pattern)
            missing = client.get(f"http://127.0.0.1:{relay.port}/v1/projects/{PROJECT}/nothing")
            expect(missing.status_code == 404 and google_error(Response(
                missing.status_code, dict(missing.headers), missing.content, 0)) is not None,
                f"{version}: another path answered {missing.status_code} {missing.text[:200]}")


@check("relay")
def relay_silent_connections_closed(world):
    """A connection that sends nothing (no TLS handshake, no request) is closed after 10 s."""
    ports = {"cleartext": world.relay("relay-cleartext", lambda: world.standin.base, tls=False).port,
             "TLS": world.relay_tls.port}

    def wait_closed(port):
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            started = time.monotonic()
            try:
                data = s.recv(1)
            except ConnectionResetError:
                data = b""
            return data, time.monotonic() - started

    with concurrent.futures.ThreadPoolExecutor(max_workers=len(ports)) as pool:
        results = dict(zip(ports, pool.map(wait_closed, ports.values())))
    for label, (data, elapsed) in results.items():
        expect(data == b"", f"{label}: the relay sent {data!r} to a silent connection")
        expect(9.0 <= elapsed <= 20.0, f"{label}: a silent connection was closed after {elapsed:.1f} s, "
                                       f"expected about 10 s")


# c. Unregistered through the relay.

@check("relay")
def relay_firebase_admin_unregistered(world):
    FirebaseAdmin(world, world.relay_tls.base).expect_unregistered(rich_message(world, device_token("dead")))


@check("relay")
def relay_async_firebase_unregistered(world):
    AsyncFirebase(world, world.relay_tls.base).expect_unregistered(rich_message(world, device_token("dead")))


# d. validate_only, byte for byte.

@check("relay")
def relay_validate_only_bytes(world):
    relay = world.relay_tls
    token = device_token()
    body = ('{ "validate_only" : true ,\n\t"message": {"token":"%s",  "data": {"x": "  spaced  "},'
            '"notification":{"title":"Hi","body":"Text"} } }' % token).encode()
    r = raw_once(world, relay.port, "POST", SEND_PATH, body)
    expect(r.status == 200 and (r.json() or {}).get("name") == FAKE_NAME, f"relay answered {r!r}")
    entry = world.single_entry(world.standin, token)
    expect(entry["body"].encode() == body, f"arrived {entry['body']!r}, sent {body!r}")
    expect(entry["headers"].get("authorization") == "sha256:" + hashlib.sha256(BEARER.encode()).hexdigest(),
           "the Authorization header did not arrive unchanged")


# e. Upstream down.

@check("relay")
def relay_upstream_down(world):
    closed = free_port()
    relay = world.relay("relay-closed", lambda: f"https://localhost:{closed}", tls=False)
    started = time.monotonic()
    r = raw_once(world, relay.port, "POST", SEND_PATH,
                 json.dumps({"message": rich_message(world, device_token())}).encode(), tls=False, timeout=10)
    took = time.monotonic() - started
    error = google_error(r)
    expect(r.status == 503 and error is not None and error["status"] == "UNAVAILABLE",
           f"answered {r!r}, expected 503 UNAVAILABLE in Google's error shape")
    expect(took <= 3.0, f"503 after {took:.1f}s, expected within 3s")
    status, _ = http_get(f"http://127.0.0.1:{relay.hook}/healthz")
    expect(status == 200, f"/healthz answered {status} afterwards")


# f. Wrong path and method.

@check("relay")
def relay_bad_method_and_path(world):
    relay = world.relay_tls
    mark = world.standin.mark()
    token = device_token()
    body = json.dumps({"message": {"token": token, "notification": {"title": "x"}}}).encode()
    wrong_path = raw_once(world, relay.port, "POST", f"/v1/projects/{PROJECT}/other", body)
    wrong_method = raw_once(world, relay.port, "GET", SEND_PATH, b"", {"Authorization": BEARER})
    problems = []
    for label, r in (("POST /v1/projects/p/other", wrong_path), ("GET on the send path", wrong_method)):
        error = google_error(r)
        if r.status not in (404, 405) or error is None:
            problems.append(f"{label}: answered {r!r}, expected 404 or 405 in Google's error shape")
    # A message sent after them, waited for at the stand-in: the relay forwards what it lets
    # through at once, so an earlier one let through would be there by then.
    sentinel = device_token()
    r = raw_once(world, relay.port, "POST", SEND_PATH,
                 json.dumps({"message": {"token": sentinel, "notification": {"title": "sentinel"}}}).encode())
    expect(r.status == 200, f"the sentinel message answered {r!r}")
    world.single_entry(world.standin, sentinel)
    leaked = world.standin.entries(since=mark)
    leaked = [e for e in leaked if e["token"] == token or e["method"] == "GET"]
    if leaked:
        problems.append(f"reached the stand-in: {[(e['method'], e['path']) for e in leaked]}")
    expect(not problems, "; ".join(problems))


# g. A campaign.

@check("relay")
def relay_campaign(world):
    relay = world.relay_tls
    pattern = relay.store_url_re()
    path = "/img/campaign"
    count, threads = 300, 8
    tokens = [device_token() for _ in range(count)]
    before = world.origin.fetches(path)
    expect(before == 0, f"the origin already served {path} {before} times")
    local = threading.local()
    opened = []

    def send(token):
        if not hasattr(local, "raw"):
            local.raw = Raw(world, relay.port, timeout=30)
            opened.append(local.raw)
        body = json.dumps({"message": rich_message(world, token, path)}).encode()
        return local.raw.request("POST", SEND_PATH, body)

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
            responses = list(pool.map(send, tokens))
    finally:
        for raw in opened:
            raw.close()
    bad = [r for r in responses if r.status != 200]
    expect(not bad, f"{len(bad)} of {count} not 200, e.g. {bad[0]!r}" if bad else "")
    entries = world.wait_record(world.standin, set(tokens), count)
    expect(len(entries) == count, f"the stand-in recorded {len(entries)} of {count} messages")
    expect(len({e["token"] for e in entries}) == count, "some tokens were sent twice, others never")
    not_ok = [e for e in entries if e["status"] != 200]
    expect(not not_ok, f"{len(not_ok)} answered other than 200, e.g. {not_ok[0]['status']} "
                       f"{not_ok[0]['error_status']}" if not_ok else "")
    fetched = world.origin.fetches(path)
    entries.sort(key=lambda e: e["time"])
    # One job per platform part (Android's variant, iOS's attachment), sharing one download.
    expect(fetched == 1, f"the origin served {path} {fetched} times, expected once: "
                         f"{world.origin.describe(path, since=entries[0]['time'])} (times from the first message "
                         f"the stand-in recorded)")
    messages = [json.loads(e["body"])["message"] for e in entries]
    for m, e in zip(messages, entries):
        n = m.get("notification") or {}
        expect(n.get("title") == TITLE and n.get("body") == BODY and m.get("data") == DATA,
               f"text changed: {e['body'][:300]}")
    first = next((i for i, m in enumerate(messages) if is_processed(m, pattern)), None)
    expect(first is not None, f"no message carried a store URL; e.g. {entries[0]['body'][:300]}")
    expect_enriched(messages[first], messages[first]["token"], pattern)
    late = [i for i in range(first, count) if not is_processed(messages[i], pattern)
            or not pattern.match(str(((messages[i].get("apns") or {}).get("fcm_options") or {}).get("image")))]
    if late:
        i = late[0]
        raise CheckFailed(f"{len(late)} messages after the first processed one (#{first}) lack the store URLs, "
                          f"e.g. #{i} {entries[i]['body'][:300]}, {entries[i]['time'] - entries[first]['time']:.3f}s "
                          f"after it")
    print(f"     campaign: {first} of {count} messages went out before the media was ready")


# h. Held service accounts (--relay-credentials).

HELD = {"shop": "shop-1234", "news": "news-5678"}


def sa_standin(world):
    """A stand-in verifying two service accounts (their files written once its port is known, with
    token_uri on it): (stand-in, accounts by name, their files by name)."""
    def make():
        paths = {name: os.path.join(world.work, f"{name}-sa.json") for name in HELD}
        options = []
        for name, project in HELD.items():
            options += ["--project", project, "--service-account", paths[name]]
        standin = world.standin_with("standin-sa", *options)
        accounts = {}
        for name, project in HELD.items():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            accounts[name] = {
                "type": "service_account", "project_id": project, "private_key_id": secrets.token_hex(20),
                "private_key": private_pem(key).decode(),
                "client_email": f"firebase-adminsdk-{name}@{project}.iam.gserviceaccount.com",
                "client_id": str(secrets.randbelow(10 ** 21)), "token_uri": f"{standin.base}/token",
            }
            with open(paths[name], "w") as f:
                json.dump(accounts[name], f)
            os.chmod(paths[name], 0o600)
        return standin, accounts, paths
    return world.once("sa-standin", make)


def held_world(world):
    """The service-account stand-in and a relay holding both accounts (a JSON credentials file)."""
    def make():
        standin, accounts, paths = sa_standin(world)
        credentials = os.path.join(world.work, "fcm-credentials.json")
        with open(credentials, "w") as f:
            json.dump({"fcm": [{"name": name, "project_id": project, "service_account": paths[name]}
                               for name, project in HELD.items()]}, f)
        os.chmod(credentials, 0o600)
        relay = world.relay("relay-held", lambda: standin.base, extra=["--relay-credentials", credentials])
        return standin, relay, accounts
    return world.once("held", make)


@check("standin")
def standin_service_account_tokens(world):
    """The token endpoint verifies a known account's assertion as Google does (signature, aud,
    scope) and its tokens work for that account's project only."""
    import google.auth.crypt
    import google.auth.jwt

    standin, accounts, _ = sa_standin(world)
    shop = accounts["shop"]
    aud = f"{standin.base}/token"

    def grant(account, key_info=None, **claims):
        signer = google.auth.crypt.RSASigner.from_service_account_info(key_info or account)
        now = int(time.time())
        body = {"iss": account["client_email"], "aud": aud, "scope": "https://www.googleapis.com/auth/firebase.messaging",
                "iat": now, "exp": now + 3600, **claims}
        assertion = google.auth.jwt.encode(signer, body).decode()
        form = f"grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion={assertion}".encode()
        return raw_once(world, standin.port, "POST", "/token", form, {"Content-Type": "application/x-www-form-urlencoded"})

    good = grant(shop)
    token = (good.json() or {}).get("access_token")
    expect(good.status == 200 and token and token != ACCESS_TOKEN, f"a verified assertion: {good!r}")
    forged = grant(shop, key_info=dict(accounts["news"], client_email=shop["client_email"],
                                       private_key_id=shop["private_key_id"]))
    expect(forged.status == 400 and (forged.json() or {}).get("error") == "invalid_grant",
           f"an assertion signed with another key: {forged!r}")
    wrong_aud = grant(shop, aud="https://oauth2.googleapis.com/token")
    expect(wrong_aud.status == 400, f"another audience: {wrong_aud!r}")
    no_scope = grant(shop, scope="https://www.googleapis.com/auth/cloud-platform")
    expect(no_scope.status == 400, f"without the messaging scope: {no_scope!r}")
    body = json.dumps({"message": {"token": device_token()}}).encode()
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    ours = raw_once(world, standin.port, "POST", "/v1/projects/shop-1234/messages:send", body, auth)
    theirs = raw_once(world, standin.port, "POST", "/v1/projects/news-5678/messages:send", body, auth)
    expect(ours.status == 200, f"the token on its project: {ours!r}")
    expect(theirs.status == 403 and google_error(theirs)["status"] == "PERMISSION_DENIED",
           f"the token on another project: {theirs!r}")


@check("relay")
def relay_held_service_accounts(world):
    """firebase-admin (with a token Google never issued) and raw httpx over HTTP/2 (with no
    Authorization at all) send to two projects through a relay holding both projects' service
    accounts (a JSON credentials file): each message reaches the stand-in with an access token the
    stand-in's token endpoint issued for that project, after one verified RS256 assertion per
    account; a project the relay holds nothing for is refused in Google's shape."""
    import firebase_admin
    import google.oauth2.credentials
    import httpx
    from firebase_admin import credentials as fa_credentials, messaging

    standin, relay, accounts = held_world(world)
    world.material.trust_in_process()
    mark = standin.mark()

    class Nothing(fa_credentials.Base):
        def get_credential(self):
            return google.oauth2.credentials.Credentials(
                token="ya29.not-a-token-google-issued",
                expiry=datetime.datetime.utcnow() + datetime.timedelta(days=1))

    sent = {}
    for name, project in HELD.items():
        app = firebase_admin.initialize_app(Nothing(), options={"projectId": project, "httpTimeout": 30},
                                            name=f"held-{name}")
        messaging._MessagingService.FCM_URL = relay.base + "/v1/projects/{0}/messages:send"
        messaging._get_messaging_service(app)
        for _ in range(3):
            token = device_token()
            try:
                messaging.send(FirebaseAdmin.message({"token": token, "notification": {"title": TITLE, "body": BODY}}),
                               app=app)
            except Exception as e:
                raise CheckFailed(f"firebase-admin to {project}: {type(e).__name__}: {e}")
            sent[token] = project
    with httpx.Client(http2=True, verify=world.material.client_context(), timeout=15) as client:
        for name, project in HELD.items():
            for _ in range(2):
                token = device_token()
                r = client.post(f"{relay.base}/v1/projects/{project}/messages:send",
                                json={"message": {"token": token, "data": DATA}})
                expect(r.http_version == "HTTP/2" and r.status_code == 200,
                       f"httpx to {project}: {r.http_version} {r.status_code} {r.text[:200]}")
                sent[token] = project
        stranger = device_token()
        r = client.post(f"{relay.base}{SEND_PATH}", json={"message": {"token": stranger}},
                        headers={"authorization": BEARER})
        error = google_error(Response(r.status_code, dict(r.headers), r.content, 0))
        expect(r.status_code == 403 and error and error["status"] == "PERMISSION_DENIED",
               f"a project the relay holds nothing for: {r.status_code} {r.text[:200]}")
    entries = world.wait_record(standin, set(sent), len(sent))
    expect(len(entries) == len(sent), f"the stand-in recorded {len(entries)} of {len(sent)} messages")
    wrong = [(sent[e["token"]], e["status"], e["token_project"]) for e in entries
             if e["status"] != 200 or e["token_project"] != sent[e["token"]] or e["project"] != sent[e["token"]]]
    expect(not wrong, f"messages without their project's token (project, status, token's project): {wrong}")
    grants = [e for e in standin.entries(since=mark) if e["path"] == "/token"]
    per_account = {}
    for e in grants:
        per_account[e["account"]] = per_account.get(e["account"], 0) + 1
    emails = {a["client_email"] for a in accounts.values()}
    expect(per_account == {email: 1 for email in emails} and all(e["status"] == 200 for e in grants),
           f"token requests per account {per_account}, statuses {[e['status'] for e in grants]}: expected one each")
    expect(not standin.entries({stranger}), "the refused message reached the stand-in")
    log = open(relay.proc.err_path, "rb").read().decode(errors="replace")
    expect("PRIVATE KEY" not in log and "ya29." not in log, "a secret appears in the relay's log")


# -- main ---------------------------------------------------------------------------------------

def main():
    return run_checks(
        CHECKS, World, __doc__, work_prefix="fcm-relay-test-", default_timeout=600,
        quiet=("async_firebase", "httpx", "httpcore", "hpack", "urllib3", "google", "firebase_admin"))

if __name__ == "__main__":
    sys.exit(main())
