"""What the relay tests (Tests/apns, Tests/fcm) share: check failures, the media origin, the
subprocesses they start and the runner with its command line."""

import argparse
import http.server
import logging
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import traceback

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BANNER = os.path.join(ROOT, "samples", "media", "banner.webp")


class CheckFailed(Exception):
    pass


def expect(condition, message):
    if not condition:
        raise CheckFailed(message)


# -- media origin ---------------------------------------------------------------------------

class Origin:
    """http.server on 127.0.0.1 serving the WebP sample at `paths` (without an extension), those in
    `slow` after 1.5 s; counts GET requests per path."""

    def __init__(self, paths, slow=()):
        with open(BANNER, "rb") as f:
            self.webp = f.read()
        self.paths = tuple(paths)
        self.slow = set(slow)
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
                    time.sleep(1.5)
                self.send_response(200)
                self.send_header("Content-Type", "image/webp")
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


# -- the runner -------------------------------------------------------------------------------

def run_checks(checks, make_world, description, work_prefix, default_timeout, quiet=()):
    """Runs `checks` ((name, group, function) each) on the world `make_world(bin, work)` makes, with
    the command line of both relay tests; returns the exit status."""
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
        if "origin" in world._made and world._made["origin"][0]:
            world._made["origin"][1].stop()
        if args.keep or failed:
            print(f"     work folder: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"relay_test: {passed} passed, {failed} failed")
    return 1 if failed or not passed else 0
