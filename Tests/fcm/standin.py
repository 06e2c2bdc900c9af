#!/usr/bin/env python3
"""A strict stand-in for Firebase Cloud Messaging's HTTP v1 API, for tests that cannot reach Google.

It listens over TLS when --cert/--key are given and offers ALPN "h2" and "http/1.1": a client
that negotiates h2 (the relay) is spoken to in HTTP/2, any other (ALPN http/1.1 or none, as
requests does) in HTTP/1.1 with keep-alive. Without --cert/--key it listens in cleartext and
tells HTTP/2 with prior knowledge (the connection preface) from HTTP/1.1. Every request is
checked the way FCM checks it and answered with Google's JSON: 200 {"name": ...} or
{"error": {"code", "message", "status", "details"}}.

POST /v1/projects/<project>/messages:send, checks in this order (the first failing one answers):
  path is /v1/projects/<p>/messages:send (or /token)  else 404 NOT_FOUND
  method is POST                                      else 405 METHOD_NOT_ALLOWED (Allow: POST)
  authorization: Bearer <one of --token>              missing or other: 401 UNAUTHENTICATED
  <p> is one of --project                             else 403 PERMISSION_DENIED
  body at most 1 MiB                                  else 400 INVALID_ARGUMENT
  body is a JSON object                               else 400 INVALID_ARGUMENT (BadRequest)
  top level: only message, validate_only (bool)       else 400 INVALID_ARGUMENT (BadRequest)
  message is an object of known fields only: name, data, notification, android, webpush, apns,
    fcm_options, token, topic, condition, fid         else 400 INVALID_ARGUMENT (BadRequest)
  exactly one of token, topic, condition, fid         else 400 INVALID_ARGUMENT (FcmError)
  data: an object of string values                    else 400 INVALID_ARGUMENT (BadRequest)
  notification, android, android.notification, apns, apns.payload, apns.fcm_options, webpush,
    webpush.notification, fcm_options: objects        else 400 INVALID_ARGUMENT (BadRequest)
  android.priority, when present, normal or high      else 400 INVALID_ARGUMENT (BadRequest)
  apns.headers: an object of string values            else 400 INVALID_ARGUMENT (BadRequest)
  images (notification.image, android.notification.image, apns.fcm_options.image,
    webpush.notification.image): http(s) URL strings  else 400 INVALID_ARGUMENT (FcmError)
Both field spellings proto3 JSON allows are accepted (fcm_options and fcmOptions).
Then designated registration tokens (token or fid, by their first four characters):
  dead...  404 NOT_FOUND, FcmError UNREGISTERED
  bad0...  400 INVALID_ARGUMENT, FcmError INVALID_ARGUMENT
  4290...  429 RESOURCE_EXHAUSTED, FcmError QUOTA_EXCEEDED
  5030...  503 UNAVAILABLE, FcmError UNAVAILABLE
validate_only true: 200 {"name": "projects/<p>/messages/fake_message_id"}. Every other message:
200 {"name": "projects/<p>/messages/0:<microseconds>%<16 hex>"}.

POST /token is an OAuth 2.0 token endpoint for service accounts (RFC 7523): a form with
grant_type urn:ietf:params:oauth:grant-type:jwt-bearer and an RS256 JWT assertion (iss, aud,
iat, exp at most an hour after iat). An assertion whose iss is the client_email of a
--service-account file is verified as Google does: its RS256 signature against that account's
public key (kid, when given, must be its private_key_id), aud the URL posted to
(https://<host>/token), the firebase.messaging scope; it answers {"access_token": <a new token for
that account's project_id>, "expires_in": 3600, "token_type": "Bearer"}, and FCM then accepts
that token for that project only (another project: 403 PERMISSION_DENIED). Any other assertion
is only decoded and answered with the first --token (for clients whose account the stand-in was
not given). Failures: 400 {"error": "invalid_grant", ...}.

--stall never answers (TLS and HTTP are accepted, the request is read and recorded).

--record FILE appends one JSON object per request, written before its answer is sent:
  conn, stream (HTTP/2 stream id, null for HTTP/1.1), protocol ("h2" or "http1.1"), alpn, time,
  method, path, project, token (the message's token or fid when the body says), headers (all,
  HTTP/2 pseudo-headers included, names lower case, a repeated header's values as a list;
  authorization's value replaced by "sha256:<hex of the value>"), body (UTF-8 text),
  body_bytes, status (null when not answered), error_status (e.g. NOT_FOUND), fcm_error (the
  FcmError errorCode, e.g. UNREGISTERED), name (the message name answered), note, token_project
  (the project of the access token used, when /token issued it), account (for /token: the
  assertion's iss).
"""

import base64
import json
import os
import re
import secrets
import sys
import time
import urllib.parse

import h11
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import standin_common  # noqa: E402
from standin_common import Stream, first_values, record_headers  # noqa: E402

SEND_RE = re.compile(r"^/v1/projects/([^/:?#]+)/messages:send$")
TOKEN_PATH = "/token"
MAX_BODY = 1 << 20
# Bodies are kept up to one byte over MAX_BODY: enough to tell one that is too large.
BODY_KEEP = MAX_BODY + 1

FCM_ERROR = "type.googleapis.com/google.firebase.fcm.v1.FcmError"
BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
ERROR_INFO = "type.googleapis.com/google.rpc.ErrorInfo"

# Message fields: the proto field name and its lowerCamelCase JSON name.
MESSAGE_FIELDS = {
    "name": "name", "data": "data", "notification": "notification", "android": "android",
    "webpush": "webpush", "apns": "apns", "fcm_options": "fcm_options", "fcmOptions": "fcm_options",
    "token": "token", "topic": "topic", "condition": "condition", "fid": "fid",
}
TOP_FIELDS = {"message": "message", "validate_only": "validate_only", "validateOnly": "validate_only"}
TARGETS = ("token", "topic", "condition", "fid")
ANDROID_PRIORITIES = {"NORMAL", "HIGH"}
DESIGNATED = {
    "dead": (404, "NOT_FOUND", "UNREGISTERED", "Requested entity was not found."),
    "bad0": (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT",
             "The registration token is not a valid FCM registration token"),
    "4290": (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED",
             "Quota exceeded for quota metric 'Send requests' and limit 'Send requests per minute'."),
    "5030": (503, "UNAVAILABLE", "UNAVAILABLE", "The service is currently unavailable."),
}
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
           405: "Method Not Allowed", 429: "Too Many Requests", 503: "Service Unavailable"}


class Answer:
    """What a request is answered with, and what the record says about it."""

    def __init__(self, status, body, headers=(), error_status=None, fcm_error=None, name=None,
                 project=None, token=None, token_project=None, account=None):
        self.token_project = token_project
        self.account = account
        self.status = status
        self.body = body
        self.headers = list(headers)
        self.error_status = error_status
        self.fcm_error = fcm_error
        self.name = name
        self.project = project
        self.token = token


def google_json(obj):
    # Google's APIs answer indented JSON with a trailing newline.
    return (json.dumps(obj, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def error_answer(code, status, message, fcm_error=None, violations=None, details=None, headers=(), **kw):
    error = {"code": code, "message": message, "status": status}
    extra = list(details or [])
    if violations:
        extra.append({"@type": BAD_REQUEST,
                      "fieldViolations": [{"field": f, "description": d} for f, d in violations]})
    if fcm_error:
        extra.append({"@type": FCM_ERROR, "errorCode": fcm_error})
    if extra:
        error["details"] = extra
    return Answer(code, google_json({"error": error}), headers, error_status=status, fcm_error=fcm_error, **kw)


class Invalid(Exception):
    """A message that FCM refuses with 400 INVALID_ARGUMENT."""

    def __init__(self, message, field=None, fcm=False):
        super().__init__(message)
        self.message = message
        self.field = field
        self.fcm = fcm


def json_type(value):
    if isinstance(value, bool):
        return "TYPE_BOOL"
    if isinstance(value, (int, float)):
        return "TYPE_NUMBER"
    if isinstance(value, str):
        return "TYPE_STRING"
    if isinstance(value, list):
        return "TYPE_LIST"
    if value is None:
        return "TYPE_NULL"
    return "TYPE_OBJECT"


def pick(obj, *names):
    """The value of the first of names present in obj (both JSON spellings of a field)."""
    for name in names:
        if name in obj:
            return obj[name]
    return None


def expect_object(value, where):
    if value is not None and not isinstance(value, dict):
        raise Invalid(f"Invalid value at '{where}' ({json_type(value)}), {json.dumps(value)[:80]}", where)
    return value or {}


def expect_string_map(value, where, quote=False):
    """An object whose values are strings (FCM's map<string, string> fields); `quote` adds the
    bad value to the error, as Google does for message.data."""
    for i, item in enumerate(expect_object(value, where).values()):
        if not isinstance(item, str):
            shown = f", {json.dumps(item)[:80]}" if quote else ""
            raise Invalid(f"Invalid value at '{where}[{i}].value' ({json_type(item)}){shown}", f"{where}[{i}].value")


def expect_image(value, where):
    if value is None:
        return
    if not isinstance(value, str):
        raise Invalid(f"Invalid value at '{where}' ({json_type(value)}), {json.dumps(value)[:80]}", where)
    parsed = urllib.parse.urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise Invalid(f"Invalid image URL: {value[:200]!r}", where, fcm=True)


def check_message(doc):
    """(message, validate_only) of a parsed request body; raises Invalid."""
    if not isinstance(doc, dict):
        raise Invalid(f"Invalid JSON payload received. Expected an object, got {json_type(doc)}.")
    for key in doc:
        if key not in TOP_FIELDS:
            raise Invalid(f"Invalid JSON payload received. Unknown name \"{key}\": Cannot find field.", key)
    validate_only = pick(doc, "validate_only", "validateOnly")
    if validate_only is not None and not isinstance(validate_only, bool):
        raise Invalid(f"Invalid value at 'validate_only' ({json_type(validate_only)}), "
                      f"{json.dumps(validate_only)[:80]}", "validate_only")
    message = doc.get("message")
    if message is None:
        raise Invalid("Message must be set.", "message")
    if not isinstance(message, dict):
        raise Invalid(f"Invalid value at 'message' ({json_type(message)}), {json.dumps(message)[:80]}", "message")
    for key in message:
        if key not in MESSAGE_FIELDS:
            raise Invalid(f"Invalid JSON payload received. Unknown name \"{key}\" at 'message': Cannot find field.",
                          f"message.{key}")
    targets = [t for t in TARGETS if message.get(t) is not None]
    if len(targets) != 1:
        raise Invalid("Recipient of the message is not set." if not targets else
                      f"Exactly one of token, topic, condition or fid may be set, got {', '.join(targets)}.",
                      "message", fcm=True)
    target = message[targets[0]]
    if not isinstance(target, str) or not target:
        raise Invalid(f"Invalid value at 'message.{targets[0]}' ({json_type(target)})", f"message.{targets[0]}")
    expect_string_map(message.get("data"), "message.data", quote=True)
    for key in ("name", "topic", "condition"):
        if message.get(key) is not None and not isinstance(message[key], str):
            raise Invalid(f"Invalid value at 'message.{key}' ({json_type(message[key])})", f"message.{key}")

    notification = expect_object(message.get("notification"), "message.notification")
    expect_image(notification.get("image"), "message.notification.image")

    android = expect_object(message.get("android"), "message.android")
    priority = android.get("priority")
    if priority is not None and (not isinstance(priority, str) or priority.upper() not in ANDROID_PRIORITIES):
        raise Invalid(f"Invalid value at 'message.android.priority' (type.googleapis.com/"
                      f"google.firebase.fcm.v1.AndroidMessagePriority), {json.dumps(priority)[:80]}",
                      "message.android.priority")
    expect_string_map(android.get("data"), "message.android.data")
    android_notification = expect_object(android.get("notification"), "message.android.notification")
    expect_image(android_notification.get("image"), "message.android.notification.image")

    apns = expect_object(message.get("apns"), "message.apns")
    expect_string_map(apns.get("headers"), "message.apns.headers")
    payload = expect_object(apns.get("payload"), "message.apns.payload")
    aps = payload.get("aps")
    if aps is not None and not isinstance(aps, dict):
        raise Invalid("Value type for APS key [aps] is not a dictionary.", "message.apns.payload.aps", fcm=True)
    apns_options = expect_object(pick(apns, "fcm_options", "fcmOptions"), "message.apns.fcm_options")
    expect_image(apns_options.get("image"), "message.apns.fcm_options.image")

    webpush = expect_object(message.get("webpush"), "message.webpush")
    webpush_notification = expect_object(webpush.get("notification"), "message.webpush.notification")
    expect_image(webpush_notification.get("image"), "message.webpush.notification.image")
    expect_object(pick(webpush, "fcm_options", "fcmOptions"), "message.webpush.fcm_options")
    expect_object(pick(message, "fcm_options", "fcmOptions"), "message.fcm_options")
    return message, bool(validate_only), targets[0]


def b64url_bytes(part):
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def b64url_json(part):
    return json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))


def h1_request(event):
    """(method, target, headers with lower-case names) of an h11.Request."""
    return (event.method.decode("ascii", "replace"), event.target.decode("utf-8", "replace"),
            [(n.decode("ascii", "replace").lower(), v.decode("utf-8", "surrogateescape")) for n, v in event.headers])


class H1Handler:
    """One HTTP/1.1 connection (h11, keep-alive); --stall applied."""

    def __init__(self, conn):
        self.conn = conn
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=64 * 1024)
        self.request = None  # (method, target, Stream) of the request being read
        self.waiting = False  # a request read and not answered (--stall)

    def data_received(self, data):
        try:
            self.h11.receive_data(data)
        except RuntimeError:
            return
        self.process()

    def process(self):
        server = self.conn.server
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as e:
                self.bad_request(e)
                return
            if event is h11.NEED_DATA or event is h11.PAUSED:
                return
            if isinstance(event, h11.Request):
                method, target, header_list = h1_request(event)
                self.request = (method, target, Stream(header_list))
            elif isinstance(event, h11.Data):
                self.request[2].add(event.data, BODY_KEEP)
            elif isinstance(event, h11.EndOfMessage):
                (method, target, stream), self.request = self.request, None
                if server.opts.stall:
                    server.record(self.conn, None, method, target, stream, None, "stalled")
                    server.recorder.flush()
                    self.waiting = True
                    return
                answer = server.handle(method, target, first_values(stream.headers), bytes(stream.body))
                server.record(self.conn, None, method, target, stream, answer)
                self.respond(answer)
                if self.h11.our_state is h11.MUST_CLOSE or self.h11.their_state is h11.MUST_CLOSE:
                    self.conn.transport.close()
                    return
                try:
                    self.h11.start_next_cycle()
                except h11.LocalProtocolError:
                    self.conn.transport.close()
                    return
            elif isinstance(event, h11.ConnectionClosed):
                self.conn.transport.close()
                return

    def respond(self, answer):
        headers = [("content-type", "application/json; charset=UTF-8"),
                   ("content-length", str(len(answer.body))), ("server", "ESF")] + answer.headers
        out = self.h11.send(h11.Response(status_code=answer.status, headers=headers,
                                         reason=REASONS.get(answer.status, "").encode()))
        out += self.h11.send(h11.Data(data=answer.body))
        out += self.h11.send(h11.EndOfMessage())
        self.conn.write(out)

    def bad_request(self, error):
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            answer = error_answer(400, "INVALID_ARGUMENT", f"Malformed HTTP request: {error}")
            try:
                self.respond(answer)
            except h11.LocalProtocolError:
                pass
        self.conn.transport.close()

    def connection_lost(self):
        if self.request is not None:
            method, target, stream = self.request
            self.conn.server.record(self.conn, None, method, target, stream, None,
                                    "connection closed before the body ended")


class H2Handler(standin_common.H2Handler):
    """One HTTP/2 connection; --stall applied."""

    body_keep = BODY_KEEP

    def on_end(self, sid):
        stream = self.streams.pop(sid, None)
        if stream is None:
            return
        if self.server.opts.stall:
            # Recorded, kept open and never answered.
            self.record_unanswered(sid, stream, "stalled")
            return
        headers = first_values(stream.headers)
        answer = self.server.handle(headers.get(":method", ""), headers.get(":path", ""), headers, bytes(stream.body))
        self.record(sid, stream, answer)
        self.respond(sid, [(":status", str(answer.status)),
                           ("content-type", "application/json; charset=UTF-8"),
                           ("content-length", str(len(answer.body)))] + answer.headers, answer.body)

    def record_unanswered(self, sid, stream, note):
        self.record(sid, stream, None, note)

    def record(self, sid, stream, answer, note=None):
        headers = dict(stream.headers)
        self.server.record(self.conn, sid, headers.get(":method"), headers.get(":path"), stream, answer, note)


class Server(standin_common.Server):
    """HTTP/2 for a client that negotiates h2 or starts with its preface, HTTP/1.1 for others."""

    alpn = ("h2", "http/1.1")
    h2_handler = H2Handler
    h1_handler = H1Handler

    def __init__(self, opts):
        super().__init__(opts)
        self.issued = {}  # access token -> project, for the tokens POST /token handed out

    # -- the API --------------------------------------------------------------------------------

    def handle(self, method, target, headers, body):
        """The Answer to a complete request; headers is a dict of lower-case names."""
        path = target.split("?", 1)[0]
        if path == TOKEN_PATH:
            return self.token_endpoint(method, headers, body)
        m = SEND_RE.match(path)
        if not m:
            return error_answer(404, "NOT_FOUND", f"The requested URL {path[:200]} was not found on this server.")
        project = m.group(1)
        if method != "POST":
            return error_answer(405, "METHOD_NOT_ALLOWED",
                                f"Method {method} is not allowed for {path[:200]}; use POST.",
                                headers=[("allow", "POST")], project=project)
        authorization = headers.get("authorization")
        scheme, _, token = (authorization or "").partition(" ")
        issued = self.issued.get(token.strip()) if scheme.lower() == "bearer" else None
        if issued is not None and issued != project:
            return error_answer(
                403, "PERMISSION_DENIED",
                f"Permission 'cloudmessaging.messages.create' denied on resource "
                f"'//cloudresourcemanager.googleapis.com/projects/{project}' (or it may not exist).",
                project=project, token_project=issued)
        if scheme.lower() != "bearer" or (token.strip() not in self.opts.token and issued is None):
            return error_answer(
                401, "UNAUTHENTICATED",
                "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie "
                "or other valid authentication credential. See "
                "https://developers.google.com/identity/sign-in/web/devconsole-project.",
                details=[{"@type": ERROR_INFO, "reason": "ACCESS_TOKEN_TYPE_UNSUPPORTED" if authorization
                          else "CREDENTIALS_MISSING", "domain": "googleapis.com",
                          "metadata": {"service": "fcm.googleapis.com", "method":
                                       "google.firebase.fcm.v1.FcmService.SendMessage"}}],
                headers=[("www-authenticate", 'Bearer realm="https://accounts.google.com/"')], project=project)
        if project not in self.opts.project:
            return error_answer(
                403, "PERMISSION_DENIED",
                f"Permission 'cloudmessaging.messages.create' denied on resource "
                f"'//cloudresourcemanager.googleapis.com/projects/{project}' (or it may not exist).",
                details=[{"@type": ERROR_INFO, "reason": "IAM_PERMISSION_DENIED", "domain": "cloudresourcemanager.googleapis.com",
                          "metadata": {"permission": "cloudmessaging.messages.create",
                                       "resource": f"projects/{project}"}}], project=project)
        if len(body) > MAX_BODY:
            return error_answer(400, "INVALID_ARGUMENT",
                                f"Request payload size exceeds the limit: {MAX_BODY} bytes.", project=project)
        try:
            doc = json.loads(body.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            return error_answer(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. {e}",
                                violations=[("", f"Invalid JSON payload received. {e}")], project=project)
        try:
            message, validate_only, target_field = check_message(doc)
        except Invalid as e:
            return error_answer(400, "INVALID_ARGUMENT", e.message, fcm_error="INVALID_ARGUMENT" if e.fcm else None,
                                violations=[(e.field or "", e.message)] if not e.fcm else None, project=project)
        device = message[target_field] if target_field in ("token", "fid") else None
        designated = DESIGNATED.get(device[:4].lower()) if device else None
        if designated:
            code, status, fcm_error, text = designated
            return error_answer(code, status, text, fcm_error=fcm_error, project=project, token=device)
        if validate_only:
            name = f"projects/{project}/messages/fake_message_id"
        else:
            name = f"projects/{project}/messages/0:{int(time.time() * 1e6)}%{secrets.token_hex(8)}"
        return Answer(200, google_json({"name": name}), name=name, project=project, token=device,
                      token_project=issued)

    def token_endpoint(self, method, headers, body):
        def refuse(description):
            return Answer(400, google_json({"error": "invalid_grant", "error_description": description}),
                          error_status="invalid_grant")

        if method != "POST":
            return error_answer(405, "METHOD_NOT_ALLOWED", f"Method {method} is not allowed for /token; use POST.",
                                headers=[("allow", "POST")])
        if not self.opts.token:
            return refuse("No access token to give: the stand-in was started without --token.")
        content_type = headers.get("content-type", "")
        if not content_type.startswith("application/x-www-form-urlencoded"):
            return Answer(400, google_json({"error": "invalid_request",
                                            "error_description": "Content-Type must be application/x-www-form-urlencoded"}),
                          error_status="invalid_request")
        try:
            form = urllib.parse.parse_qs(body.decode("ascii"), strict_parsing=True)
        except (UnicodeDecodeError, ValueError):
            return Answer(400, google_json({"error": "invalid_request", "error_description": "Malformed form body"}),
                          error_status="invalid_request")
        if form.get("grant_type") != ["urn:ietf:params:oauth:grant-type:jwt-bearer"]:
            return Answer(400, google_json({"error": "unsupported_grant_type",
                                            "error_description": "Invalid grant_type: " + ",".join(form.get("grant_type", []))}),
                          error_status="unsupported_grant_type")
        assertion = form.get("assertion", [""])
        parts = assertion[0].split(".") if len(assertion) == 1 else []
        if len(parts) != 3:
            return refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe.")
        try:
            header, claims = b64url_json(parts[0]), b64url_json(parts[1])
        except ValueError:
            return refuse("Invalid JWT Signature.")
        if not isinstance(header, dict) or not isinstance(claims, dict) or header.get("alg") != "RS256":
            return refuse("Invalid JWT Signature.")
        now = time.time()
        iat, exp = claims.get("iat"), claims.get("exp")
        if (not isinstance(iat, (int, float)) or not isinstance(exp, (int, float)) or exp - iat > 3600
                or iat > now + 300 or exp < now - 300):
            return refuse("Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. "
                          "Check your iat and exp values in the JWT claim.")
        if not claims.get("iss") or not claims.get("aud"):
            return refuse("Invalid JWT: iss and aud are required.")
        account = self.accounts().get(claims["iss"])
        if account is None:
            return Answer(200, google_json({"access_token": self.opts.token[0], "expires_in": 3600,
                                            "token_type": "Bearer"}), account=claims["iss"])
        public_key, project, key_id = account
        try:
            public_key.verify(b64url_bytes(parts[2]), f"{parts[0]}.{parts[1]}".encode("ascii"),
                              padding.PKCS1v15(), hashes.SHA256())
        except (InvalidSignature, ValueError):
            return refuse("Invalid JWT Signature.")
        if header.get("kid") not in (None, key_id):
            return refuse("Invalid JWT Signature.")
        host = headers.get(":authority") or headers.get("host") or ""
        if claims["aud"] != f"https://{host}{TOKEN_PATH}":
            return refuse(f"Invalid JWT: Failed audience check. The right audience is https://{host}{TOKEN_PATH}")
        if "https://www.googleapis.com/auth/firebase.messaging" not in str(claims.get("scope", "")).split():
            return Answer(400, google_json({"error": "invalid_scope", "error_description": "Invalid OAuth scope."}),
                          error_status="invalid_scope")
        access = f"ya29.{project}.{secrets.token_urlsafe(24)}"
        self.issued[access] = project
        return Answer(200, google_json({"access_token": access, "expires_in": 3600, "token_type": "Bearer"}),
                      account=claims["iss"], token_project=project)

    def accounts(self):
        """client_email -> (public key, project_id, private_key_id) of the --service-account files,
        read on each use (the files may be written after the stand-in started)."""
        accounts = {}
        for path in self.opts.service_account:
            try:
                with open(path, encoding="utf-8") as f:
                    info = json.load(f)
                key = serialization.load_pem_private_key(info["private_key"].encode(), password=None)
            except (OSError, ValueError, KeyError):
                continue
            accounts[info.get("client_email")] = (key.public_key(), info.get("project_id"), info.get("private_key_id"))
        return accounts

    # -- the record -----------------------------------------------------------------------------

    def record(self, conn, sid, method, target, stream, answer, note=None):
        """Records a request (stream: its headers and body) read on conn, HTTP/2 stream sid (None
        for HTTP/1.1), with its answer (None when not answered) and a note."""
        if self.recorder.file is None:
            return
        headers = record_headers(stream.headers)
        body = stream.body
        project = answer.project if answer else None
        token = answer.token if answer else None
        if answer is None or token is None:
            m = SEND_RE.match((target or "").split("?", 1)[0])
            project = project or (m.group(1) if m else None)
            try:
                message = json.loads(bytes(body[:MAX_BODY]).decode("utf-8")).get("message") or {}
                token = message.get("token") or message.get("fid")
                token = token if isinstance(token, str) else None
            except (ValueError, AttributeError, UnicodeDecodeError):
                token = None
        self.recorder.add({
            "conn": conn.conn_id,
            "stream": sid,
            "protocol": conn.protocol,
            "alpn": conn.alpn,
            "time": round(time.time(), 6),
            "method": method,
            "path": target,
            "project": project,
            "token": token,
            "headers": headers,
            "body": bytes(body[:MAX_BODY]).decode("utf-8", "replace"),
            "body_bytes": stream.size,
            "status": answer.status if answer else None,
            "error_status": answer.error_status if answer else None,
            "fcm_error": answer.fcm_error if answer else None,
            "name": answer.name if answer else None,
            "note": note,
            "token_project": answer.token_project if answer else None,
            "account": answer.account if answer else None,
        })


def main(argv=None):
    parser = standin_common.arg_parser(
        __doc__,
        "standin.py --port 0 --cert server.pem --key server.key --project demo-project "
        "--token test-access-token --record rec.jsonl",
        cleartext="cleartext", stall="accept TLS and HTTP but never answer a request")
    parser.add_argument("--project", action="append", default=[], required=True,
                        help="an accepted project ID; repeatable (others: 403 PERMISSION_DENIED)")
    parser.add_argument("--service-account", action="append", default=[], metavar="JSONFILE",
                        help="a service account key (JSON): its assertions are verified and its tokens "
                             "work for its project_id only; repeatable")
    parser.add_argument("--token", action="append", default=[], required=True,
                        help="an accepted OAuth 2 access token; repeatable (missing or other: 401 "
                             "UNAUTHENTICATED). The first is what POST /token hands out")
    standin_common.serve(Server, parser, argv)


if __name__ == "__main__":
    sys.exit(main())
