"""What the relay tests (Tests/apns, Tests/fcm) share: checks and their registry, the test CA,
the media origin, the subprocesses they start (stand-in, relays), the world that makes each
on first use, and the runner with its command line."""

import argparse
import datetime
import http.server
import ipaddress
import json
import logging
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BANNER = os.path.join(ROOT, "samples", "media", "banner.webp")
# A media URL on a relay's store (format with the relay's HTTP port).
STORE_URL = r"^http://127\.0\.0\.1:{port}/media/[0-9a-f]{{64}}\.jpg$"


class CheckFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


CHECKS = []


def check(group):
    """Registers a check, (name, group, function), in CHECKS; group "standin" needs no relay."""
    def register(fn):
        CHECKS.append((fn.__name__, group, fn))
        return fn
    return register


def http_get(url, timeout=10.0):
    """(status, body) of a GET."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def jpeg_size(data):
    """(width, height) of a baseline or progressive JPEG, from its SOF segment."""
    i = 2
    while i + 9 < len(data):
        marker, length = data[i + 1], int.from_bytes(data[i + 2:i + 4], "big")
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return int.from_bytes(data[i + 7:i + 9], "big"), int.from_bytes(data[i + 5:i + 7], "big")
        i += 2 + length
    raise CheckFailed("no SOF segment in the JPEG")


def image_size(data):
    """("jpeg" or "png", width, height) of a file a phone is sent; CheckFailed for another format."""
    if data[:3] == b"\xff\xd8\xff":
        return ("jpeg", *jpeg_size(data))
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return "png", int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    raise CheckFailed(f"neither a JPEG nor a PNG: it starts {data[:8].hex()}")


# -- test certificates --------------------------------------------------------------------------

def private_pem(key):
    """A private key as unencrypted PKCS #8 PEM."""
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class Material:
    """A test CA and a server certificate it signed for localhost and 127.0.0.1 (P-256 keys,
    valid for two days), written to `folder` as ca.pem, server.pem and server.key."""

    def __init__(self, folder):
        self.folder = folder
        self.now = datetime.datetime.now(datetime.timezone.utc)
        self.ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "PushMedia test CA")])
        ca = (
            x509.CertificateBuilder().subject_name(self.ca_name).issuer_name(self.ca_name)
            .public_key(self.ca_key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.now - datetime.timedelta(hours=1))
            .not_valid_after(self.now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self.ca_key.public_key()), critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )
        server_key = ec.generate_private_key(ec.SECP256R1())
        server = self.issue("localhost", server_key, ExtendedKeyUsageOID.SERVER_AUTH,
                            [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
        self.ca = self.write("ca.pem", ca.public_bytes(serialization.Encoding.PEM))
        self.cert = self.write("server.pem", server.public_bytes(serialization.Encoding.PEM))
        self.key = self.write("server.key", private_pem(server_key))

    def issue(self, common_name, key, usage, names=()):
        """A certificate the CA signs for key: its common name, extended key usage and subject
        alternative names."""
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self.ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(self.now - datetime.timedelta(hours=1))
            .not_valid_after(self.now + datetime.timedelta(days=2))
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(list(names)), critical=False)
        return (
            builder
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.ca_key.public_key()),
                           critical=False)
            .sign(self.ca_key, hashes.SHA256())
        )

    def write(self, name, data):
        """Writes data to a file in the folder; returns its path."""
        path = os.path.join(self.folder, name)
        with open(path, "wb") as f:
            f.write(data)
        return path


# -- media origin ---------------------------------------------------------------------------

class Origin:
    """http.server on 127.0.0.1 serving the WebP sample at `paths` (without an extension) as a CDN
    would (cacheable for a day), those in `slow` after a delay (a mapping of path to seconds, or
    paths taking 1.5 s); counts GET requests per path."""

    def __init__(self, paths, slow=()):
        with open(BANNER, "rb") as f:
            self.webp = f.read()
        self.paths = tuple(paths)
        self.slow = dict(slow) if isinstance(slow, dict) else {path: 1.5 for path in slow}
        self.gets = {}
        self.heads = {}
        self.requests = []  # (time, method, path, Range header, User-Agent)
        self.lock = threading.Lock()
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _serve(self, body):
                path = self.path.split("?", 1)[0]
                with origin.lock:
                    counter = origin.gets if body else origin.heads
                    counter[path] = counter.get(path, 0) + 1
                    origin.requests.append((time.time(), self.command, path, self.headers.get("Range"),
                                            self.headers.get("User-Agent")))
                if path not in origin.paths:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                if path in origin.slow:
                    time.sleep(origin.slow[path])
                self.send_response(200)
                self.send_header("Content-Type", "image/webp")
                self.send_header("Cache-Control", "public, max-age=86400")
                self.send_header("Content-Length", str(len(origin.webp)))
                self.end_headers()
                if body:
                    self.wfile.write(origin.webp)

            def do_GET(self):
                self._serve(True)

            def do_HEAD(self):
                self._serve(False)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def wait_fetch(self, path, more_than, timeout=10.0):
        """Waits until `path` was requested more than `more_than` times (the request has arrived,
        though a slow path is still being answered)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            with self.lock:
                if self.gets.get(path, 0) > more_than:
                    return
            time.sleep(0.02)
        raise CheckFailed(f"no request for {path} reached the origin within {timeout:.0f} s")

    def fetches(self, path):
        with self.lock:
            return self.gets.get(path, 0)

    def describe(self, path, since=0.0):
        """The requests for path, as text, times relative to `since`."""
        with self.lock:
            return "; ".join(f"{m} at {t - since:+.3f}s range={r} ua={ua}"
                             for t, m, p, r, ua in self.requests if p == path)

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# -- subprocesses ---------------------------------------------------------------------------

PROCESSES = []


class Proc:
    """A subprocess whose stdout is read by a thread; stderr goes to a file."""

    def __init__(self, name, argv, folder, env=None):
        self.name = name
        self.argv = argv
        self.err_path = os.path.join(folder, f"{name}.stderr")
        self.err = open(self.err_path, "wb")
        self.lines = queue.Queue()
        self.out = []
        self.p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self.err, stdin=subprocess.DEVNULL,
                                  env=env, start_new_session=True)
        PROCESSES.append(self)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for raw in self.p.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.out.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def wait_for(self, patterns, timeout=20.0):
        """The match of each regex in patterns, in any order, from stdout lines."""
        found = {}
        deadline = time.monotonic() + timeout
        while len(found) < len(patterns):
            left = deadline - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"{self.name} did not start within {timeout:.0f}s: {self.stderr_tail()}")
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                continue
            if line is None:
                raise CheckFailed(f"{self.name} exited ({self.p.wait()}) before it listened: {self.stderr_tail()}")
            for i, pattern in enumerate(patterns):
                m = re.search(pattern, line)
                if m and i not in found:
                    found[i] = m
        return [found[i] for i in range(len(patterns))]

    def stderr_tail(self, n=1500):
        self.err.flush()
        try:
            with open(self.err_path, "rb") as f:
                data = f.read()[-n:].decode("utf-8", "replace").strip()
        except OSError:
            data = ""
        return data or "(no stderr)"

    def alive(self):
        return self.p.poll() is None

    def stop(self):
        if self.p.poll() is None:
            try:
                os.killpg(self.p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.p.wait(timeout=5)
        self.err.close()


def stop_all():
    for p in reversed(PROCESSES):
        try:
            p.stop()
        except Exception:
            pass


def free_port():
    """A port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Standin:
    """A stand-in (a standin.py with `options`) as a subprocess, over TLS with the test
    certificate, recording to <work>/<name>.jsonl."""

    def __init__(self, world, name, script, *options):
        self.record = os.path.join(world.work, f"{name}.jsonl")
        m = world.material
        argv = [sys.executable, script, "--port", "0", "--cert", m.cert, "--key", m.key,
                "--record", self.record, *options]
        self.proc = Proc(name, argv, world.work)
        (match,) = self.proc.wait_for([r"^standin listening on (\d+)$"])
        self.port = int(match.group(1))
        self.base = f"https://localhost:{self.port}"

    def mark(self):
        """How many requests are recorded now: entries(since=mark()) gives only later ones."""
        return len(self.entries())

    def entries(self, tokens=None, since=0):
        """The recorded requests (for these device or registration tokens), in the order they
        were answered."""
        out = []
        try:
            with open(self.record, encoding="utf-8") as f:
                for n, line in enumerate(f):
                    if n < since:
                        continue
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        continue
                    if tokens is None or entry.get("token") in tokens:
                        out.append(entry)
        except FileNotFoundError:
            pass
        return out


class Relay:
    """`pushmedia serve` with its APNs or FCM relay (world.kind) in front of `upstream`, trusting
    the test CA upstream, over TLS with the test certificate when tls. `hook` is the port of its
    HTTP API, `port` the relay's."""

    def __init__(self, world, name, upstream, tls=True, extra=()):
        m = world.material
        kind = world.kind
        store = os.path.join(world.work, f"store-{name}")
        os.makedirs(store, exist_ok=True)
        argv = [world.bin, "serve", "--port", "0", "--store", store, f"--{kind}-port", "0",
                f"--{kind}-upstream", upstream, f"--{kind}-upstream-ca", m.ca,
                "--trust-peer", f"127.0.0.1:{world.origin.port}"]
        if tls:
            argv += [f"--{kind}-tls-cert", m.cert, f"--{kind}-tls-key", m.key]
        argv += list(extra)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PUSHMEDIA_")}
        self.proc = Proc(name, argv, world.work, env=env)
        hook, relay = self.proc.wait_for([
            r"PushMedia listening on http://127\.0\.0\.1:(\d+)",
            rf"PushMedia {world.label} relay on (https?)://127\.0\.0\.1:(\d+)",
        ])
        self.hook = int(hook.group(1))
        self.scheme = relay.group(1)
        self.port = int(relay.group(2))
        expect(self.scheme == ("https" if tls else "http"),
               f"{name}: relay on {self.scheme}, expected {'https' if tls else 'http'}")
        self.tls = tls
        self.base = f"{self.scheme}://localhost:{self.port}"

    def store_url_re(self):
        return re.compile(STORE_URL.format(port=self.hook))


# -- the world: everything a check may need, made on first use ----------------------------------

class World:
    """What the checks use, each made on first use; a failure to make one is remembered and
    fails every check that needs it. A relay test subclasses it with its kind of relay."""

    kind = label = None  # "apns", "APNs": the relay's options (--apns-port, ...) and its log line
    material_class = Material
    relay_class = Relay
    standin_script = None
    origin_paths = ()  # served by the media origin
    slow_paths = ()  # served after 1.5 s

    def __init__(self, bin_path, work):
        self.bin = bin_path
        self.work = work
        self._made = {}

    def once(self, name, make):
        """make(), the first time name is asked for; the same value (or failure) after that."""
        if name not in self._made:
            try:
                self._made[name] = (True, make())
            except Exception as e:
                self._made[name] = (False, e)
        ok, value = self._made[name]
        if not ok:
            raise CheckFailed(f"{name} unavailable: {value}")
        return value

    def standin_options(self):
        """The stand-in's own command-line options."""
        return []

    @property
    def material(self):
        return self.once("material", lambda: self.material_class(self.work))

    @property
    def origin(self):
        return self.once("origin", lambda: Origin(self.origin_paths, slow=self.slow_paths))

    @property
    def standin(self):
        return self.standin_with("standin")

    def standin_with(self, name, *options):
        """A stand-in of its own with these further options (made once per name)."""
        return self.once(name, lambda: Standin(self, name, self.standin_script, *self.standin_options(), *options))

    def relay_support(self):
        def probe():
            if not os.access(self.bin, os.X_OK):
                raise CheckFailed(f"{self.bin} is missing (swift build first)")
            out = subprocess.run([self.bin, "serve", "--help"], capture_output=True, timeout=30)
            if f"--{self.kind}-port".encode() not in out.stdout + out.stderr:
                raise CheckFailed(f"`{self.bin} serve --help` lists no --{self.kind}-port "
                                  f"(no {self.label} relay in this build)")
            return True
        return self.once("relay", probe)

    def relay(self, name, make_upstream, tls=True, extra=()):
        """A relay (made once per name) in front of the upstream URL make_upstream() gives."""
        def make():
            self.relay_support()
            return self.relay_class(self, name, make_upstream(), tls=tls, extra=extra)
        return self.once(name, make)

    @property
    def relay_tls(self):
        return self.relay("relay-tls", lambda: self.standin.base)

    def wait_record(self, standin, tokens, count, timeout=10.0):
        """The stand-in's entries for tokens once there are `count` (or after timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            entries = standin.entries(tokens)
            if len(entries) >= count or time.monotonic() > deadline:
                return entries
            time.sleep(0.05 if count < 100 else 0.3)

    def single_entry(self, standin, token):
        entries = self.wait_record(standin, {token}, 1)
        expect(len(entries) == 1, f"the stand-in recorded {len(entries)} requests for {token[:12]}…, expected one")
        return entries[0]

    def close(self):
        """Stops the media origin, if it was made."""
        ok, origin = self._made.get("origin", (False, None))
        if ok:
            origin.stop()


# -- the runner -------------------------------------------------------------------------------

def run_checks(checks, make_world, description, work_prefix, default_timeout, quiet=(), title="relay_test"):
    """Runs `checks` ((name, group, function) each) on the world `make_world(bin, work)` makes, with
    the command line of both relay tests (and of the media URL test, `title` in its summary);
    returns the exit status."""
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=os.environ.get("BIN", os.path.join(ROOT, ".build/debug/pushmedia")),
                        help="the pushmedia binary (env BIN; default .build/debug/pushmedia)")
    parser.add_argument("--standin-only", action="store_true", help="only the stand-in checks (no relay needed)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="run the checks whose name contains NAME; repeatable")
    parser.add_argument("--keep", action="store_true", help="keep the work folder (its path is printed)")
    parser.add_argument("--timeout", type=float, default=default_timeout, help="abort everything after this many seconds")
    parser.add_argument("-v", "--verbose", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING, format="     %(message)s")
    # The client libraries log failed answers; the checks say what matters.
    for name in quiet:
        logging.getLogger(name).setLevel(logging.CRITICAL)

    bin_path = args.bin if os.path.isabs(args.bin) else os.path.join(ROOT, args.bin)
    work = tempfile.mkdtemp(prefix=work_prefix)

    def watchdog():
        print(f"FAIL watchdog: the test did not finish within {args.timeout:.0f}s", flush=True)
        stop_all()
        os._exit(1)

    timer = threading.Timer(args.timeout, watchdog)
    timer.daemon = True
    timer.start()

    world = make_world(bin_path, work)
    passed = failed = 0
    try:
        for name, group, fn in checks:
            if args.standin_only and group != "standin":
                continue
            if args.only and not any(o in name for o in args.only):
                continue
            started = time.monotonic()
            try:
                fn(world)
            except CheckFailed as e:
                failed += 1
                print(f"FAIL {name}: {e}", flush=True)
                continue
            except Exception as e:
                failed += 1
                detail = traceback.format_exc() if args.verbose else f"{type(e).__name__}: {e}"
                print(f"FAIL {name}: {detail}", flush=True)
                continue
            passed += 1
            print(f"ok  {name} ({time.monotonic() - started:.1f}s)", flush=True)
    finally:
        timer.cancel()
        stop_all()
        world.close()
        if args.keep or failed:
            print(f"     work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"{title}: {passed} passed, {failed} failed")
    return 1 if failed or not passed else 0
