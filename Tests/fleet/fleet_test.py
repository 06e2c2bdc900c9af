"""A fleet end to end, with real parts only: three `pushmedia serve` nodes on one bucket of the
real object store (OpenStack Swift with s3api, scripts/object-store.sh), coordinated through a real
PostgreSQL from Debian's packages (scripts/postgres.sh), behind nginx (round robin), fetching from
an HTTP origin on 127.0.0.1 that counts its GETs.

- 300 concurrent first requests of one `/v1/process` payload, and of one media URL: one origin
  fetch and one job in the whole fleet (the origin's count, each node's pushmedia_jobs_total),
  300 identical answers;
- the lease holder killed (SIGKILL) mid-fetch, and mid-transcode (its ffmpeg making H.264 of a
  clip): another node takes the lease over and answers every waiting request within its budget
  with the made media; the next request is a cache hit;
- PostgreSQL stopped in the middle of a campaign and started again: no request fails, single
  flight per node meanwhile, single flight in the fleet once it is back;
- `pushmedia purge` on one node: the other nodes answer from a fresh fetch within 1 s;
- a fleet batch of 1,000 payloads across three `pushmedia work` processes, one killed half way:
  every item once in the report, the same report and outputs as a local batch of the folder; the
  nodes' queue depth metric reads what the queue holds;
- a `serve` node with `--fleet-worker` works a fleet batch in the background and answers meanwhile;
- a manifest of URLs (one a line) as a fleet batch: the same report as a local batch of it;
- a batch deleted while a worker is on it (`batch --fleet NAME --delete`): its items are gone and
  the worker stops;
- TLS to PostgreSQL: a node with `sslmode=verify-full` and the cluster's CA shares jobs with the
  others over TLS connections (pg_stat_ssl); `sslmode=require` connects too;
- hostile `--fleet-db`: malformed, a wrong password, not a PostgreSQL server, no tables, a server
  certificate from another CA: a clear error at start (no listener), never the password.

    scripts/fleet.sh                   # all checks
    scripts/fleet.sh --only purge -v   # one check, verbose
"""

import concurrent.futures
import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "mediaurl"))
from relay_harness import ROOT, CheckFailed, Proc, check, expect, free_port, run_checks, CHECKS  # noqa: E402
from media_url_test import KEY, SALT, Origin, sample  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tracing"))
from otlp_receiver import Receiver  # noqa: E402
from trace_checks import expect_joined, trace, traceparent  # noqa: E402

NODES = 3
BUDGET_MS = 10_000


def env_of(script):
    """The KEY=VALUE lines `script env` prints, as a dict."""
    out = subprocess.run([os.path.join(ROOT, "scripts", script), "env"], check=True, capture_output=True,
                         text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def request(port, method, path, body=None, timeout=30, headers=None):
    """(status, body) of one request on its own connection."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = dict(headers or {})
        if body is not None:
            headers["Content-Type"] = "application/json"
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def at_once(count, fn):
    """fn(i) for i in range(count), all started together; their results in order."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=count) as pool:
        return list(pool.map(fn, range(count)))


def metric(text, name):
    """The sum of a metric's samples in a Prometheus exposition."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.rsplit(" ", 1)[1])
    return total


class Postgres:
    def __init__(self):
        self.script = os.path.join(ROOT, "scripts", "postgres.sh")

    def stop(self):
        subprocess.run([self.script, "stop"], check=True)

    def start(self):
        subprocess.run([self.script, "start"], check=True, capture_output=True)

    def psql(self, sql):
        return subprocess.run([self.script, "psql", "-tA", "-c", sql], check=True, capture_output=True,
                              text=True).stdout.strip()


class World:
    """The origin, PostgreSQL with the fleet's tables, three nodes and nginx in front."""

    def __init__(self, bin_path, work):
        self.bin = bin_path
        self.work = work
        if not os.access(bin_path, os.X_OK):
            raise SystemExit(f"{bin_path} is missing (swift build first)")
        self.store_env = env_of("object-store.sh")
        self.fleet_env = env_of("postgres.sh")
        self.db = self.fleet_env["PUSHMEDIA_TEST_FLEET_DB"]
        self.password_file = self.fleet_env["PUSHMEDIA_TEST_FLEET_DB_PASSWORD_FILE"]
        self.ca = self.fleet_env["PUSHMEDIA_TEST_FLEET_DB_CA"]
        self.postgres = Postgres()
        self.bucket = "fleet-test"
        subprocess.run([os.path.join(ROOT, "scripts", "object-store.sh"), "make-bucket", self.bucket], check=True,
                       capture_output=True)
        self.prefix = "run-" + uuid.uuid4().hex[:12]
        self.origin = Origin({})
        self.env = dict(os.environ)
        self.env.update({k: v for k, v in self.store_env.items() if k.startswith("PUSHMEDIA_S3") or k.startswith("AWS")})
        self.env["PUSHMEDIA_FLEET_DB"] = self.db
        self.env["PUSHMEDIA_FLEET_DB_PASSWORD_FILE"] = self.password_file
        # Every node traces to one receiver (its export every 100 ms): a lease taken over shows.
        self.receiver = Receiver()
        self.env["OTEL_EXPORTER_OTLP_ENDPOINT"] = self.receiver.url
        self.env["OTEL_BSP_SCHEDULE_DELAY"] = "100"
        self.postgres.psql("DROP TABLE IF EXISTS pushmedia_leases, pushmedia_schema")
        init = self.pushmedia(["fleet-db", "init"])
        expect(init.returncode == 0 and "created" in init.stdout, f"fleet-db init: {init.stdout}{init.stderr}")
        again = self.pushmedia(["fleet-db", "init"])
        expect(again.returncode == 0 and "nothing to do" in again.stdout, f"fleet-db init again: {again.stdout}")
        self.nodes = [None] * NODES
        self.ports = [free_port() for _ in range(NODES)]
        for i in range(NODES):
            self.start_node(i)
        self.nginx = Nginx(work, self.ports)

    def store_flags(self):
        return ["--store", f"s3://{self.bucket}/{self.prefix}", "--s3-endpoint", self.store_env["PUSHMEDIA_S3_ENDPOINT"],
                "--base-url", "https://media.shop.example/push", "--allow-private-networks"]

    def pushmedia(self, args, env=None, timeout=60):
        """`pushmedia ARGS` with the nodes' store flags (but for `fleet-db`, which takes none)."""
        flags = [] if args[0] == "fleet-db" else self.store_flags()
        return subprocess.run([self.bin] + args + flags, env=env or self.env, capture_output=True, text=True,
                              timeout=timeout)

    def start_node(self, i):
        port = self.ports[i]
        self.nodes[i] = Proc(f"node{i}", [
            self.bin, "serve", "--port", str(port), "--work-dir", os.path.join(self.work, f"work{i}"),
            "--url-key", KEY, "--url-salt", SALT, "--url-allow-source", self.origin.base + "/",
            "--max-queue", "1000",
        ] + self.store_flags(), self.work, env=self.env)
        self.nodes[i].wait_for([r"PushMedia listening on"])

    def metrics(self, i):
        status, body = request(self.ports[i], "GET", "/metrics")
        expect(status == 200, f"node{i} /metrics answered {status}")
        return body.decode()

    def jobs(self):
        return [metric(self.metrics(i), "pushmedia_jobs_total") for i in range(NODES)]

    def media_url_path(self, source, ext="jpg"):
        made = subprocess.run([self.bin, "url", source, "--ext", ext, "--url-key", KEY, "--url-salt", SALT,
                               "--origin", "http://x"], capture_output=True, text=True, check=True)
        return made.stdout.strip()[len("http://x"):]

    def other_ca(self):
        """A CA's certificate that did not sign the cluster's."""
        path = os.path.join(self.work, "other-ca.pem")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                        "-days", "1", "-subj", "/CN=another CA", "-keyout", path + ".key", "-out", path],
                       check=True, capture_output=True)
        return path

    def close(self):
        self.nginx.stop()
        self.origin.stop()
        self.receiver.stop()
        self.postgres.start()


class Nginx:
    """nginx, round robin over the nodes, no cache and no retries: every request reaches a node."""

    def __init__(self, work, ports):
        nginx = shutil.which("nginx") or "/usr/sbin/nginx"
        folder = os.path.join(work, "nginx")
        os.makedirs(os.path.join(folder, "temp"), exist_ok=True)
        self.port = free_port()
        user = "user root root;" if os.geteuid() == 0 else ""
        servers = "\n".join(f"server 127.0.0.1:{p};" for p in ports)
        with open(os.path.join(folder, "nginx.conf"), "w") as f:
            f.write(f"""
{user}
worker_processes 1;
daemon off;
pid {folder}/nginx.pid;
error_log {folder}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {folder}/temp/body;
    proxy_temp_path {folder}/temp/proxy;
    fastcgi_temp_path {folder}/temp/fastcgi;
    uwsgi_temp_path {folder}/temp/uwsgi;
    scgi_temp_path {folder}/temp/scgi;
    upstream nodes {{ {servers} keepalive 64; }}
    server {{
        listen 127.0.0.1:{self.port} backlog=1024;
        location / {{
            proxy_pass http://nodes;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 30s;
            proxy_next_upstream off;
        }}
    }}
}}
""")
        self.proc = Proc("nginx", [nginx, "-c", os.path.join(folder, "nginx.conf"), "-e",
                                   os.path.join(folder, "error.log")], work)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                request(self.port, "GET", "/healthz", timeout=2)
                return
            except OSError:
                time.sleep(0.05)
        raise CheckFailed("nginx did not start")

    def stop(self):
        self.proc.stop()


def payload(url):
    return json.dumps({"aps": {"alert": "Spring", "mutable-content": 1}, "image_url": url}).encode()


def answered_payload(body):
    """The rewritten payload of a /v1/process answer (what a sender pushes)."""
    return json.loads(body)["payload"]


@check("fleet")
def one_job_for_300_process_requests(world):
    path = f"/campaign-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(path, sample("banner.webp"), "image/webp", delay=0.3)
    before = sum(world.jobs())
    body = payload(world.origin.url(path))
    results = at_once(300, lambda _: request(world.nginx.port, "POST", f"/v1/process?budget_ms={BUDGET_MS}", body))
    statuses = {status for status, _ in results}
    expect(statuses == {200}, f"statuses {statuses}")
    answers = {json.dumps(answered_payload(b), sort_keys=True) for _, b in results}
    expect(len(answers) == 1, f"{len(answers)} different payloads, e.g. {list(answers)[:2]}")
    expect(".jpg" in next(iter(answers)), f"no attachment in {next(iter(answers))}")
    expect(world.origin.hits(path) == 1, f"{world.origin.hits(path)} origin fetches")
    jobs = world.jobs()
    expect(sum(jobs) - before == 1, f"jobs per node {jobs} (before: {before} in all)")


@check("fleet")
def one_job_for_300_media_url_requests(world):
    path = f"/hero-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(path, sample("banner.webp"), "image/webp", delay=0.3)
    target = world.media_url_path(world.origin.url(path))
    before = sum(world.jobs())
    results = at_once(300, lambda _: request(world.nginx.port, "GET", target))
    statuses = {status for status, _ in results}
    expect(statuses == {200}, f"statuses {statuses}")
    digests = {hashlib.sha256(b).hexdigest() for _, b in results}
    expect(len(digests) == 1, f"{len(digests)} different bodies")
    expect(results[0][1][:3] == b"\xff\xd8\xff", "not a JPEG")
    expect(world.origin.hits(path) == 1, f"{world.origin.hits(path)} origin fetches")
    jobs = world.jobs()
    expect(sum(jobs) - before == 1, f"jobs per node {jobs} (before: {before} in all)")


@check("fleet")
def purge_reaches_every_node_within_a_second(world):
    path = f"/sale-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(path, sample("banner.webp"), "image/webp")
    body = payload(world.origin.url(path))
    first = [answered_payload(request(world.ports[i], "POST", "/v1/process", body)[1]) for i in range(NODES)]
    expect(len({json.dumps(p, sort_keys=True) for p in first}) == 1, f"nodes differ before the purge: {first}")
    # The origin's image changes; every node holds the old entry in memory (60 s by default).
    world.origin.add(path, sample("photo-exif.jpg"), "image/jpeg")
    purged = subprocess.run([world.bin, "purge", world.origin.url(path), "--fleet-db-timeout", "5s"]
                            + world.store_flags(), env=world.env, capture_output=True, text=True, timeout=60)
    expect(purged.returncode == 0 and "told the fleet" in purged.stdout, f"purge: {purged.stdout}{purged.stderr}")
    told = time.monotonic()
    after = [first[0]] * NODES

    def all_new():
        for i in range(NODES):
            if after[i] == first[0]:
                after[i] = answered_payload(request(world.ports[i], "POST", "/v1/process", body)[1])
        return all(answer != first[0] for answer in after)

    until(all_new, 1.0, step=0.05)
    for i, answer in enumerate(after):
        expect(answer != first[0], f"node{i} answered its old entry {time.monotonic() - told:.2f}s after the purge")
    expect(len({json.dumps(p, sort_keys=True) for p in after}) == 1, f"nodes differ after the purge: {after}")
    expect(world.origin.hits(path) == 2, f"{world.origin.hits(path)} origin fetches (2 expected)")
    # `purge` traces its notification as `serve` does (OTEL_EXPORTER_OTLP_ENDPOINT), and exports
    # the span before it exits.
    sent = [span for span in world.receiver.spans() if span["name"] == "pushmedia.fleet.purge"]
    expect(len(sent) >= 1 and sent[-1]["attributes"].get("pushmedia.fleet.keys", 0) >= 1,
           f"no pushmedia.fleet.purge span from `purge`: {sent}")


def children(pid):
    """The command lines of the processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            if parent == pid:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    found.append(f.read().replace(b"\0", b" ").decode(errors="replace"))
        except (OSError, IndexError, ValueError):
            continue
    return found


def kill_the_lease_holder(world, path, mid_job, extension, budget_ms):
    """Node 0 takes the lease of `path`'s job; once `mid_job()` says it is where it should be
    killed, 40 requests wait on the other nodes and node 0 is SIGKILLed. Every waiting request
    gets the made media within its budget, one more fetch in all, one lease taken over, and the
    restarted node's next request is a cache hit."""
    body = payload(world.origin.url(path))
    holder = 0
    expired = 'pushmedia_fleet_leases_total{result="expired"}'
    expired_before = sum(metric(world.metrics(i), expired) for i in (1, 2))
    first = concurrent.futures.ThreadPoolExecutor(max_workers=1).submit(
        request, world.ports[holder], "POST", f"/v1/process?budget_ms={budget_ms}", body)
    deadline = time.monotonic() + 10
    while not mid_job(world.nodes[holder].p.pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    expect(mid_job(world.nodes[holder].p.pid), "the first node did not get there")
    expect(world.origin.hits(path) == 1, "the first node did not fetch")
    waited = 'pushmedia_fleet_leases_total{result="waited"}'
    waited_before = [metric(world.metrics(i), waited) for i in (1, 2)]
    started = time.monotonic()
    waiting = concurrent.futures.ThreadPoolExecutor(max_workers=40)
    parents = [traceparent() for _ in range(40)]
    futures = [waiting.submit(request, world.ports[1 + i % 2], "POST", f"/v1/process?budget_ms={budget_ms}", body,
                              headers={"traceparent": parents[i][0]})
               for i in range(40)]
    # Both other nodes have found the job held and wait for its end.
    deadline = time.monotonic() + 5
    while any(metric(world.metrics(i), waited) <= waited_before[i - 1] for i in (1, 2)) \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    expect(mid_job(world.nodes[holder].p.pid), "the first node is past the point where it should be killed")
    killed = time.monotonic()
    os.killpg(world.nodes[holder].p.pid, signal.SIGKILL)
    world.nodes[holder].p.wait()
    results = [f.result() for f in futures]
    took = time.monotonic() - started
    starts = world.origin.starts(path)
    expect(len(starts) == 2 and starts[1] - killed <= 2.0,
           f"the replacement's fetch began {starts[-1] - killed:.2f}s after the kill (at most 2 s)")
    expect({s for s, _ in results} == {200}, f"statuses {[s for s, _ in results]}")
    answers = {json.dumps(answered_payload(b), sort_keys=True) for _, b in results}
    expect(len(answers) == 1 and extension in next(iter(answers)), f"answers {answers}")
    expect(took < budget_ms / 1000 + 1, f"the waiting requests took {took:.1f}s")
    expect(world.origin.hits(path) == 2, f"{world.origin.hits(path)} origin fetches (the holder's, then one more)")
    try:
        first.result()
    except OSError:
        pass
    world.start_node(holder)
    status, again = request(world.ports[holder], "POST", "/v1/process", body)
    expect(status == 200 and json.loads(again)["outcome"].get("cache_hit") is True, f"not a cache hit: {again[:300]}")
    expect(world.origin.hits(path) == 2, "the next request fetched again")
    taken_over = sum(metric(world.metrics(i), expired) for i in (1, 2)) - expired_before
    expect(taken_over == 1, f"{taken_over} leases taken over")
    # One waiting request's trace shows the lease taken over, its caller's trace joined, and the
    # job made under it; the others' show their wait.
    callers = {trace_id: parent for _, trace_id, parent in parents}

    def lease_spans():
        return [span for span in world.receiver.spans()
                if span["trace_id"] in callers and span["name"] == "pushmedia.fleet.lease"]

    deadline = time.monotonic() + 10
    while not any(s["attributes"].get("pushmedia.fleet.lease") == "taken_over" for s in lease_spans()) \
            and time.monotonic() < deadline:
        time.sleep(0.1)
    leases = lease_spans()
    over = [s for s in leases if s["attributes"].get("pushmedia.fleet.lease") == "taken_over"]
    expect(len(over) == 1, f"{len(over)} lease spans say taken_over; seen: "
                           f"{sorted({s['attributes'].get('pushmedia.fleet.lease') for s in leases}, key=str)}")
    expect(any(s["attributes"].get("pushmedia.fleet.lease") == "waited" for s in leases), "no lease span waited")
    trace_id = over[0]["trace_id"]

    def whole(found):
        # The job's spans end before the request's (resolve, payload, the server span), and may
        # reach the receiver a batch before them: wait for one root, the caller's child.
        ids = {s["span_id"] for s in found}
        return any(s["name"] == "pushmedia.store.record" for s in found) and \
            sum(s["parent_span_id"] not in ids for s in found) == 1

    spans = trace(world.receiver, trace_id, whole)
    expect_joined(spans, callers[trace_id], [])
    expect(any(s["name"] == "pushmedia.fetch" for s in spans), "the trace that took the lease over has no fetch")


@check("fleet")
def a_killed_lease_holder_is_replaced(world):
    """Killed mid-fetch: the origin is slow."""
    path = f"/slow-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(path, sample("banner.webp"), "image/webp", delay=3)
    kill_the_lease_holder(world, path, lambda pid: world.origin.hits(path) == 1, ".jpg", BUDGET_MS)


@check("fleet")
def a_lease_holder_killed_mid_transcode_is_replaced(world):
    """Killed mid-transcode: an MPEG-4 Part 2 clip that iPhones do not play, made into H.264 by the
    holder's ffmpeg (a child of the node, killed with it); the kill comes while it runs."""
    clip = os.path.join(world.work, "clip.mkv")
    subprocess.run(["ffmpeg", "-nostdin", "-loglevel", "error", "-f", "lavfi", "-i",
                    "testsrc2=size=1280x720:rate=30", "-t", "8", "-c:v", "mpeg4", "-q:v", "4", "-y", clip], check=True)
    path = f"/clip-{uuid.uuid4().hex[:8]}.mkv"
    world.origin.add(path, open(clip, "rb").read(), "video/x-matroska")

    def transcoding(pid):
        return any("libx264" in command for command in children(pid))

    kill_the_lease_holder(world, path, transcoding, ".mp4", 20_000)


def lives():
    """SQL: how many nodes hold their life's lock (`FleetLife`)."""
    return "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 20557 AND granted " \
           "AND mode = 'ExclusiveLock'"


def until(condition, seconds, step=0.02):
    """Waits for `condition()` at most `seconds`; its last value."""
    deadline = time.monotonic() + seconds
    value = condition()
    while not value and time.monotonic() < deadline:
        time.sleep(step)
        value = condition()
    return value


def hold_and_wait(world, path, budget_ms, waiters=6):
    """Node 0 takes `path`'s lease and fetches; then `waiters` requests wait on nodes 1 and 2.
    Returns the holder's future and the waiters'."""
    body = payload(world.origin.url(path))
    waited = 'pushmedia_fleet_leases_total{result="waited"}'
    before = [metric(world.metrics(i), waited) for i in (1, 2)]
    first = concurrent.futures.ThreadPoolExecutor(max_workers=1).submit(
        request, world.ports[0], "POST", f"/v1/process?budget_ms={budget_ms}", body, 60)
    expect(until(lambda: world.origin.hits(path) == 1, 10), "node 0 did not fetch")
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=waiters)
    waiting = [pool.submit(request, world.ports[1 + i % 2], "POST", f"/v1/process?budget_ms={budget_ms}", body, 60)
               for i in range(waiters)]
    # The waiters have claimed (each node counts a wait) before the holder is stopped.
    expect(until(lambda: all(metric(world.metrics(i), waited) > before[i - 1] for i in (1, 2)), 5),
           f"the other nodes did not wait for node 0 ({world.origin.hits(path)} origin fetches)")
    # Node 0 is still downloading: what comes next happens mid-job.
    expect(time.monotonic() - world.origin.starts(path)[0] < 2.5, "node 0 was not stopped mid-download")
    return first, waiting


@check("fleet")
def a_killed_holder_is_replaced_within_a_second(world):
    """Ten times: node 0 holds a lease mid-download (the default --fleet-lease, 10 s) and is
    SIGKILLed; the replacement's origin fetch begins within 1 s (median) and 2 s (worst) of the
    kill, and every waiting request gets the made media."""
    handovers = []
    for run in range(10):
        path = f"/kill-{run}-{uuid.uuid4().hex[:8]}.webp"
        world.origin.add(path, sample("banner.webp"), "image/webp", delay=3)
        _, waiting = hold_and_wait(world, path, 10_000)
        killed = time.monotonic()
        os.killpg(world.nodes[0].p.pid, signal.SIGKILL)
        world.nodes[0].p.wait()
        results = [f.result() for f in waiting]
        starts = world.origin.starts(path)
        expect(len(starts) == 2, f"run {run}: {len(starts)} origin fetches")
        handovers.append(starts[1] - killed)
        expect({s for s, _ in results} == {200}, f"run {run}: statuses {[s for s, _ in results]}")
        answers = {json.dumps(answered_payload(b), sort_keys=True) for _, b in results}
        expect(len(answers) == 1 and ".jpg" in next(iter(answers)), f"run {run}: answers {answers}")
        world.start_node(0)
    handovers.sort()
    median = (handovers[4] + handovers[5]) / 2
    print(f"    handover after SIGKILL: median {median:.3f}s, worst {handovers[-1]:.3f}s "
          f"({', '.join(f'{h:.2f}' for h in handovers)})")
    expect(median <= 1.0 and handovers[-1] <= 2.0, f"handovers {handovers}")


@check("fleet")
def a_frozen_holder_is_replaced_and_fenced(world):
    """Node 0 holds a lease mid-download and is SIGSTOPped: PostgreSQL ends its silent session
    after --fleet-node-timeout (5 s), another node takes the lease over and makes the media.
    SIGCONTed later, node 0 finds its lease gone when it would record the entry (fenced): it
    records nothing, and answers with the replacement's media."""
    path = f"/frozen-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(path, sample("banner.webp"), "image/webp", delay=3)
    first, waiting = hold_and_wait(world, path, 20_000)
    fenced_before = metric(world.metrics(0), "pushmedia_fleet_fenced_total")
    frozen = time.monotonic()
    os.killpg(world.nodes[0].p.pid, signal.SIGSTOP)
    try:
        results = [f.result() for f in waiting]
        starts = world.origin.starts(path)
        expect(len(starts) == 2, f"{len(starts)} origin fetches while node 0 was frozen")
        handover = starts[1] - frozen
        print(f"    handover after SIGSTOP: {handover:.2f}s (--fleet-node-timeout 5s)")
        expect(handover <= 6.5, f"the replacement's fetch began {handover:.2f}s after the freeze")
        expect({s for s, _ in results} == {200}, f"statuses {[s for s, _ in results]}")
        answers = {json.dumps(answered_payload(b), sort_keys=True) for _, b in results}
        expect(len(answers) == 1 and ".jpg" in next(iter(answers)), f"answers {answers}")
    finally:
        os.killpg(world.nodes[0].p.pid, signal.SIGCONT)
    status, body = first.result()
    expect(status == 200, f"node 0 answered {status} once thawed")
    expect(json.dumps(answered_payload(body), sort_keys=True) in answers, "node 0's answer differs")
    fleet_lines = [line for line in world.metrics(0).splitlines() if "fleet" in line and not line.startswith("#")]
    expect(metric(world.metrics(0), "pushmedia_fleet_fenced_total") == fenced_before + 1,
           f"node 0 did not refuse to record its result: {fleet_lines}")
    expect(world.origin.hits(path) == 2, f"{world.origin.hits(path)} origin fetches")
    # Every node answers from the one entry.
    for i in range(NODES):
        status, again = request(world.ports[i], "POST", "/v1/process", payload(world.origin.url(path)))
        expect(status == 200 and json.loads(again)["outcome"].get("cache_hit") is True, f"node{i}: {again[:300]}")
        expect(json.dumps(answered_payload(again), sort_keys=True) in answers, f"node{i} answers another media")


@check("fleet")
def postgres_restarted_mid_job(world):
    """PostgreSQL restarted while node 0 holds a lease mid-download: every request is answered
    (no 5xx), no lease stays held by a life that ended, and once the nodes hold lives again a
    new media is made once in the fleet."""
    path = f"/restart-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(path, sample("banner.webp"), "image/webp", delay=3)
    first, waiting = hold_and_wait(world, path, 15_000)
    world.postgres.stop()
    world.postgres.start()
    results = [first.result()] + [f.result() for f in waiting]
    expect({s for s, _ in results} == {200}, f"statuses {[s for s, _ in results]}")
    answers = {json.dumps(answered_payload(b), sort_keys=True) for _, b in results}
    expect(len(answers) == 1 and ".jpg" in next(iter(answers)), f"answers {answers}")
    expect(until(lambda: int(world.postgres.psql(lives())) >= NODES, 10), "the nodes did not begin new lives")
    # No lease counts as held by a life that ended with the old server: a running lease's holder
    # holds its life's lock now, or the lease is ended.
    orphaned = ("SELECT count(*) FROM pushmedia_leases l WHERE state = 'running' AND expires > now() AND NOT EXISTS "
                "(SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = 20557 "
                "AND objid = l.holder_pid::oid AND granted)")
    expect(until(lambda: world.postgres.psql(orphaned) == "0", 5), "running leases of ended lives")
    after = f"/restarted-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(after, sample("banner.webp"), "image/webp", delay=0.3)
    results = at_once(60, lambda _: request(world.nginx.port, "POST", f"/v1/process?budget_ms={BUDGET_MS}",
                                             payload(world.origin.url(after))))
    expect({s for s, _ in results} == {200}, f"statuses after {[s for s, _ in results]}")
    expect(world.origin.hits(after) == 1, f"{world.origin.hits(after)} origin fetches once the database was back")


@check("fleet")
def postgres_down_mid_campaign(world):
    during = f"/during-{uuid.uuid4().hex[:8]}.webp"
    after = f"/after-{uuid.uuid4().hex[:8]}.webp"
    world.origin.add(during, sample("banner.webp"), "image/webp", delay=0.3)
    world.origin.add(after, sample("banner.webp"), "image/webp", delay=0.3)
    world.postgres.stop()
    try:
        results = at_once(90, lambda _: request(world.nginx.port, "POST", f"/v1/process?budget_ms={BUDGET_MS}",
                                                 payload(world.origin.url(during))))
        expect({s for s, _ in results} == {200}, f"statuses {[s for s, _ in results]}")
        answers = {json.dumps(answered_payload(b), sort_keys=True) for _, b in results}
        expect(len(answers) == 1 and ".jpg" in next(iter(answers)), f"answers {answers}")
        hits = world.origin.hits(during)
        expect(1 <= hits <= NODES, f"{hits} origin fetches while the database was down (at most one per node)")
        unavailable = sum(metric(world.metrics(i), "pushmedia_fleet_unavailable_total") for i in range(NODES))
        expect(unavailable >= 1, "no node counted the database as unavailable")
    finally:
        world.postgres.start()
    # Back once every node holds its life again (they connect again every quarter second).
    expect(until(lambda: int(world.postgres.psql(lives())) >= NODES, 10), "the nodes did not begin new lives")
    # A node's pooled connections to the stopped server fail only when next used (and that
    # media is then made by the node alone): each node first claims a lease through the
    # database again, for a media of its own sent straight to it.
    for i in range(NODES):
        def claimed(i=i):
            before = metric(world.metrics(i), "pushmedia_fleet_leases_total")
            warm = f"/warm-{i}-{uuid.uuid4().hex[:8]}.webp"
            world.origin.add(warm, sample("banner.webp"), "image/webp")
            request(world.ports[i], "POST", f"/v1/process?budget_ms={BUDGET_MS}", payload(world.origin.url(warm)))
            return metric(world.metrics(i), "pushmedia_fleet_leases_total") > before
        expect(until(claimed, 10, step=0.1), f"node{i} claimed no lease through the database once it was back")
    results = at_once(90, lambda _: request(world.nginx.port, "POST", f"/v1/process?budget_ms={BUDGET_MS}",
                                             payload(world.origin.url(after))))
    expect({s for s, _ in results} == {200}, f"statuses after {[s for s, _ in results]}")
    expect(world.origin.hits(after) == 1, f"{world.origin.hits(after)} origin fetches once the database was back")
    for i in range(NODES):
        expect(world.nodes[i].alive(), f"node{i} exited")
        text = open(world.nodes[i].err_path, "rb").read().decode("utf-8", "replace")
        expect("pushmedia-testing-secret" not in text, f"node{i} logged the password")


def report_items(folder):
    with open(os.path.join(folder, "report.json")) as f:
        report = json.load(f)
    return report, {i["file"]: (i.get("output"), i["outcome"]["status"], i["outcome"].get("reason"))
                    for i in report["items"]}


@check("fleet")
def a_fleet_batch_across_three_workers_one_killed(world):
    name = "campaign-" + uuid.uuid4().hex[:8]
    folder = os.path.join(world.work, name)
    os.makedirs(os.path.join(folder, "segment"))
    images = [f"/{name}/hero-{k}.webp" for k in range(40)]
    for path in images:
        world.origin.add(path, sample("banner.webp"), "image/webp", delay=0.05)
    count = 1000
    for i in range(count):
        target = os.path.join(folder, "segment" if i % 2 else "", f"user-{i:04d}.json")
        with open(target, "w") as f:
            if i % 100 == 7:
                f.write("{ not json")
            else:
                f.write(json.dumps({"aps": {"alert": {"title": f"Hi user {i}"}, "mutable-content": 1},
                                    "image_url": world.origin.url(images[i % len(images)])}))
    queued = world.pushmedia(["batch", "--fleet", name, folder])
    expect(queued.returncode == 0 and f"queued {count} payloads" in queued.stdout, f"batch --fleet: {queued.stderr}")
    not_yet = world.pushmedia(["batch", "--fleet", name, "--status", "--out", os.path.join(world.work, "early")])
    expect(not_yet.returncode == 75, f"--status before any work: exit {not_yet.returncode} {not_yet.stderr}")
    waiting = int(world.postgres.psql("SELECT count(*) FROM pushmedia_batch_items WHERE state <> 'done'"))
    expect(waiting >= count, f"{waiting} items waiting in the queue")
    shown, deadline = None, time.monotonic() + 15
    while shown != waiting and time.monotonic() < deadline:
        shown = metric(world.metrics(0), 'pushmedia_fleet_queue_items{state="queued"}')
        time.sleep(0.5)
    expect(shown == waiting, f"the queue depth metric reads {shown}, the queue holds {waiting}")
    # The count can read the index of the items not done instead of the table (which the planner
    # takes once the items done outnumber them; a table this small it may scan either way).
    plan = world.postgres.psql(
        "SET enable_seqscan = off; EXPLAIN SELECT count(*) FILTER (WHERE state = 'queued' OR expires < now())::int8, "
        "count(*) FILTER (WHERE state = 'taken' AND expires >= now())::int8 "
        "FROM pushmedia_batch_items WHERE state <> 'done'")
    expect("pushmedia_batch_items_unfinished" in plan, f"the queue's count does not read its index: {plan}")
    workers = [Proc(f"worker{i}", [world.bin, "work", "--fleet", name, "--concurrency", "2",
                                   "--work-dir", os.path.join(world.work, f"worker-work{i}")] + world.store_flags(),
                    world.work, env=world.env) for i in range(3)]

    def done():
        return int(world.postgres.psql(
            f"SELECT count(*) FROM pushmedia_batch_items WHERE batch = '{name}' AND state = 'done'"))

    def held_by(worker):
        """The items `worker` holds (its node's name carries its pid)."""
        return int(world.postgres.psql(
            f"SELECT count(*) FROM pushmedia_batch_items WHERE batch = '{name}' AND state = 'taken' "
            f"AND holder LIKE '%-{worker.p.pid}-%'"))

    deadline = time.monotonic() + 300
    while done() < count // 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    expect(workers[0].alive(), "the first worker ended before half the batch was done")
    # A dead worker's items go back to the queue at once (its life ended with it, at the default
    # --fleet-lease of 10 s); a frozen one's once --fleet-node-timeout (5 s) has passed.
    expect(until(lambda: held_by(workers[0]) > 0, 5), "the first worker holds no item")
    killed = time.monotonic()
    os.killpg(workers[0].p.pid, signal.SIGKILL)
    expect(until(lambda: held_by(workers[0]) == 0, 5), "the killed worker's items were not taken again")
    back = time.monotonic() - killed
    print(f"    a killed worker's items taken again after {back:.2f}s")
    expect(back <= 2.0, f"the killed worker's items were taken again after {back:.2f}s")
    # The second worker is frozen while it holds items, at once: about half the batch is still to
    # do. (Waiting for three quarters of it first raced the batch's end: cached items go at
    # hundreds a second, and a worker holds two at a time for a few milliseconds each.)
    expect(until(lambda: held_by(workers[1]) > 0, 5), "the second worker holds no item")
    frozen = time.monotonic()
    os.killpg(workers[1].p.pid, signal.SIGSTOP)
    try:
        expect(until(lambda: held_by(workers[1]) == 0, 10), "the frozen worker's items were not taken again")
        back = time.monotonic() - frozen
        print(f"    a frozen worker's items taken again after {back:.2f}s")
        expect(back <= 7.0, f"the frozen worker's items were taken again after {back:.2f}s")
    finally:
        os.killpg(workers[1].p.pid, signal.SIGCONT)
    for worker in workers[1:]:
        try:
            worker.p.wait(timeout=max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"{worker.name} did not finish: {worker.stderr_tail()}")
        expect(worker.p.returncode == 0, f"{worker.name} exited {worker.p.returncode}: {worker.stderr_tail()}")
    # `work` traces each item it processes (a trace of its own), exported before it exits.
    items = [span for span in world.receiver.spans()
             if span["name"] == "pushmedia.fleet.item" and span["attributes"].get("pushmedia.batch") == name]
    expect(len(items) >= count // 4, f"{len(items)} pushmedia.fleet.item spans of the batch from the workers")
    fleet_out = os.path.join(world.work, name + "-fleet-out")
    status = world.pushmedia(["batch", "--fleet", name, "--status", "--out", fleet_out])
    expect(status.returncode == 0 and f"{count} payloads" in status.stdout, f"--status: {status.stdout}{status.stderr}")
    local_out = os.path.join(world.work, name + "-local-out")
    local = world.pushmedia(["batch", folder, "--out", local_out], timeout=300)
    expect(local.returncode == 0, f"the local batch: {local.stderr[-500:]}")
    fleet_report, fleet_items = report_items(fleet_out)
    local_report, local_items = report_items(local_out)
    expect(len(fleet_report["items"]) == count == len(fleet_items), f"{len(fleet_report['items'])} items in the report")
    expect(fleet_items == local_items,
           f"the reports differ: {[(k, fleet_items.get(k), local_items.get(k)) for k in local_items if fleet_items.get(k) != local_items.get(k)][:3]}")
    expect(fleet_report["summary"]["by_status"] == local_report["summary"]["by_status"],
           f"{fleet_report['summary']['by_status']} against {local_report['summary']['by_status']}")
    for file, (output, _, _) in local_items.items():
        if output:
            a = open(os.path.join(fleet_out, output), "rb").read()
            b = open(os.path.join(local_out, output), "rb").read()
            expect(a == b, f"{output}: the fleet's rewritten payload differs from the local one")
    # Each image once in the fleet, but for the jobs the killed and the frozen worker had begun:
    # each one's --concurrency (2) transcodes and as many payloads fetched ahead, which another
    # worker makes again once their leases pass on.
    fetched = sum(world.origin.hits(path) for path in images)
    expect(len(images) <= fetched <= len(images) + 8, f"{fetched} origin fetches for {len(images)} images")


@check("fleet")
def a_manifest_of_urls_as_a_fleet_batch(world):
    """A text file of media URLs, one a line (blank lines and # comments skipped): each line an
    item named by its line number, in a fleet batch as in a local one, the same report."""
    name = "manifest-" + uuid.uuid4().hex[:8]
    folder = os.path.join(world.work, name)
    os.makedirs(folder)
    lines = ["# the spring campaign's heroes", ""]
    for k in range(12):
        path = f"/{name}/hero-{k}.webp"
        world.origin.add(path, sample("banner.webp"), "image/webp")
        lines.append(world.origin.url(path) + ("   " if k == 3 else ""))
    lines += [world.origin.url(f"/{name}/missing.jpg"), "", "not-a-url"]
    manifest = os.path.join(folder, "urls.txt")
    with open(manifest, "w") as f:
        f.write("\n".join(lines) + "\n")
    queued = world.pushmedia(["batch", "--fleet", name, manifest])
    expect(queued.returncode == 0 and "queued 14 payloads" in queued.stdout, f"batch --fleet: {queued.stdout}{queued.stderr}")
    worker = world.pushmedia(["work", "--fleet", name, "--concurrency", "2", "--work-dir",
                              os.path.join(world.work, "manifest-work")], timeout=120)
    expect(worker.returncode == 0, f"work: {worker.stderr[-500:]}")
    fleet_out = os.path.join(world.work, name + "-fleet-out")
    status = world.pushmedia(["batch", "--fleet", name, "--status", "--out", fleet_out])
    expect(status.returncode == 0, f"--status: {status.stdout}{status.stderr}")
    local_out = os.path.join(world.work, name + "-local-out")
    local = world.pushmedia(["batch", manifest, "--out", local_out], timeout=120)
    expect(local.returncode == 0, f"the local batch: {local.stderr[-500:]}")
    fleet_report, fleet_items = report_items(fleet_out)
    local_report, local_items = report_items(local_out)
    expect(fleet_items == local_items, f"the reports differ: {fleet_items} against {local_items}")
    expect(fleet_report["input"] == local_report["input"] == manifest, f"inputs {fleet_report['input']}")
    expect(sorted(local_items)[0] == "line-000003.json" and "line-000017.json" in local_items
           and "line-000016.json" not in local_items and len(local_items) == 14, f"items named {sorted(local_items)}")
    statuses = sorted(status for _, status, _ in local_items.values())
    expect(statuses == ["processed"] * 12 + ["rejected"] * 2, f"statuses {statuses}")
    hero = json.load(open(os.path.join(local_out, "line-000003.json")))
    expect(hero["aps"]["mutable-content"] == 1 and ".jpg" in json.dumps(hero), f"line 3's payload: {hero}")
    expect(sum(world.origin.hits(f"/{name}/hero-{k}.webp") for k in range(12)) == 12, "a URL was fetched twice")


@check("fleet")
def a_serve_node_works_batches_with_fleet_worker(world):
    """`serve --fleet-worker 2` takes a fleet batch in the background and still answers requests;
    without --fleet-db the flag is refused at start."""
    name = "served-" + uuid.uuid4().hex[:8]
    folder = os.path.join(world.work, name)
    os.makedirs(folder)
    count = 40
    for i in range(count):
        path = f"/{name}/img-{i}.webp"
        world.origin.add(path, sample("banner.webp"), "image/webp", delay=0.05)
        with open(os.path.join(folder, f"user-{i:02d}.json"), "w") as f:
            f.write(json.dumps({"aps": {"alert": f"Hi {i}", "mutable-content": 1}, "image_url": world.origin.url(path)}))
    queued = world.pushmedia(["batch", "--fleet", name, folder])
    expect(queued.returncode == 0, f"batch --fleet: {queued.stderr}")
    port = free_port()
    node = Proc("node-worker", [
        world.bin, "serve", "--port", str(port), "--work-dir", os.path.join(world.work, "work-worker"),
        "--fleet-worker", "2",
    ] + world.store_flags(), world.work, env=world.env)
    try:
        node.wait_for([r"PushMedia listening on"])

        def done():
            return int(world.postgres.psql(
                f"SELECT count(*) FROM pushmedia_batch_items WHERE batch = '{name}' AND state = 'done'"))

        deadline = time.monotonic() + 120
        answered = []
        while done() < count and time.monotonic() < deadline:
            started = time.monotonic()
            status, _ = request(port, "GET", "/healthz")
            answered.append((status, time.monotonic() - started))
            time.sleep(0.2)
        expect(done() == count, f"{done()} of {count} items done by the serve node: {node.stderr_tail()}")
        expect(answered and all(s == 200 for s, _ in answered), f"/healthz meanwhile: {answered}")
        holders = world.postgres.psql(
            f"SELECT count(DISTINCT holder) FROM pushmedia_batch_items WHERE batch = '{name}'")
        expect(holders == "1", f"{holders} holders: only the serve node works here")
        out = os.path.join(world.work, name + "-out")
        status = world.pushmedia(["batch", "--fleet", name, "--status", "--out", out])
        expect(status.returncode == 0, f"--status: {status.stdout}{status.stderr}")
        report, items = report_items(out)
        statuses = {status for _, status, _ in items.values()}
        expect(len(items) == count and statuses == {"processed"}, f"{len(items)} items, statuses {statuses}")
    finally:
        node.stop()
    env = {k: v for k, v in world.env.items() if not k.startswith("PUSHMEDIA_FLEET")}
    refused = subprocess.run([world.bin, "serve", "--port", str(free_port()), "--fleet-worker", "1"]
                             + world.store_flags(), env=env, capture_output=True, text=True, timeout=30)
    expect(refused.returncode == 64 and "--fleet-worker works the fleet's batches: it needs the fleet's database"
           in refused.stderr, f"--fleet-worker without --fleet-db: exit {refused.returncode} {refused.stderr[-300:]}")


@check("fleet")
def a_deleted_batch_stops_its_worker(world):
    name = "deleted-" + uuid.uuid4().hex[:8]
    folder = os.path.join(world.work, name)
    os.makedirs(folder)
    for i in range(30):
        path = f"/{name}/slow-{i}.webp"
        world.origin.add(path, sample("banner.webp"), "image/webp", delay=0.3)
        with open(os.path.join(folder, f"user-{i:02d}.json"), "w") as f:
            f.write(json.dumps({"aps": {"alert": "Hi", "mutable-content": 1}, "image_url": world.origin.url(path)}))
    queued = world.pushmedia(["batch", "--fleet", name, folder])
    expect(queued.returncode == 0, f"batch --fleet: {queued.stderr}")
    worker = Proc("worker-deleted", [world.bin, "work", "--fleet", name, "--concurrency", "1",
                                     "--work-dir", os.path.join(world.work, "worker-deleted")] + world.store_flags(),
                  world.work, env=world.env)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and world.postgres.psql(
                f"SELECT count(*) FROM pushmedia_batch_items WHERE batch = '{name}' AND state = 'done'") == "0":
            time.sleep(0.1)
        deleted = world.pushmedia(["batch", "--fleet", name, "--delete"])
        expect(deleted.returncode == 0 and f"deleted the fleet batch {name} and its 30 items" in deleted.stdout,
               f"--delete: exit {deleted.returncode} {deleted.stdout}{deleted.stderr}")
        try:
            worker.p.wait(timeout=20)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"the worker goes on after its batch was deleted: {worker.stderr_tail()}")
        expect(worker.p.returncode == 0, f"the worker exited {worker.p.returncode}: {worker.stderr_tail()}")
        deadline = time.monotonic() + 5
        while not any("the batch was deleted" in line for line in worker.out) and time.monotonic() < deadline:
            time.sleep(0.02)
        expect(any("the batch was deleted" in line for line in worker.out), f"the worker said {worker.out}")
    finally:
        worker.stop()
    left = world.postgres.psql(f"SELECT count(*) FROM pushmedia_batch_items WHERE batch = '{name}'")
    expect(left == "0", f"{left} items of the deleted batch are left")
    again = world.pushmedia(["batch", "--fleet", name, "--delete"])
    expect(again.returncode == 64 and f"there is no fleet batch {name}" in again.stderr,
           f"--delete again: exit {again.returncode} {again.stderr}")
    status = world.pushmedia(["batch", "--fleet", name, "--status", "--out", os.path.join(world.work, name + "-out")])
    expect(status.returncode == 64, f"--status of a deleted batch: exit {status.returncode} {status.stderr}")


def tls_db(db, query):
    """The fleet's address with `query` in place of its sslmode."""
    return db.split("?", 1)[0] + "?" + query


@check("tls")
def a_node_on_tls_shares_jobs_with_the_others(world):
    env = dict(world.env)
    env["PUSHMEDIA_FLEET_DB"] = tls_db(world.db, f"sslmode=verify-full&sslrootcert={world.ca}")
    port = free_port()
    node = Proc("node-tls", [
        world.bin, "serve", "--port", str(port), "--work-dir", os.path.join(world.work, "work-tls"),
        "--fleet-lease", "2s",
    ] + world.store_flags(), world.work, env=env)
    try:
        node.wait_for([r"PushMedia listening on"])
        ssl = world.postgres.psql(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
            "WHERE a.usename = 'pushmedia' AND s.ssl")
        expect(int(ssl) >= 1, f"{ssl} TLS connections of pushmedia to PostgreSQL")
        path = f"/tls-{uuid.uuid4().hex[:8]}.webp"
        world.origin.add(path, sample("banner.webp"), "image/webp", delay=0.5)
        body = payload(world.origin.url(path))
        before = sum(world.jobs())
        targets = [port] + world.ports
        results = at_once(40, lambda i: request(targets[i % len(targets)], "POST",
                                                f"/v1/process?budget_ms={BUDGET_MS}", body))
        expect({status for status, _ in results} == {200}, f"statuses {[status for status, _ in results]}")
        answers = {json.dumps(answered_payload(b), sort_keys=True) for _, b in results}
        expect(len(answers) == 1, f"{len(answers)} different payloads")
        expect(world.origin.hits(path) == 1, f"{world.origin.hits(path)} origin fetches across the TLS node and three")
        status, text = request(port, "GET", "/metrics")
        jobs = metric(text.decode(), "pushmedia_jobs_total") + sum(world.jobs()) - before
        expect(jobs == 1, f"{jobs} jobs in the fleet")
        expect(metric(text.decode(), "pushmedia_fleet_unavailable_total") == 0, "the TLS node lost its database")
    finally:
        node.stop()
    required = world.pushmedia(["fleet-db", "check"], env={**world.env, "PUSHMEDIA_FLEET_DB": tls_db(world.db, "sslmode=require")})
    expect(required.returncode == 0, f"sslmode=require: {required.stdout}{required.stderr}")


@check("hostile")
def hostile_fleet_db_stops_the_start(world):
    password = open(world.password_file).read().strip()
    env = {k: v for k, v in world.env.items() if not k.startswith("PUSHMEDIA_FLEET")}
    db = world.db
    port = int(re.search(r":(\d+)/", db).group(1))
    cases = [
        ("malformed", ["--fleet-db", "postgres://pushmedia:s3cret-word@/"], r"--fleet-db"),
        ("no database", ["--fleet-db", "postgres://pushmedia:s3cret-word@127.0.0.1:5/"], r"a database"),
        ("wrong password", ["--fleet-db", db.replace("pushmedia@", "pushmedia:s3cret-word@")],
         r"refused.*28P01"),
        ("an HTTP server that waits", ["--fleet-db", db.replace(f":{port}/", f":{world.origin.server.server_address[1]}/")],
         r"does not answer as a PostgreSQL server"),
        ("an HTTP server that answers", ["--fleet-db", db.replace(f":{port}/", f":{world.nginx.port}/")],
         r"does not answer as a PostgreSQL server"),
        ("a certificate from another CA",
         ["--fleet-db", tls_db(db, f"sslmode=verify-full&sslrootcert={world.other_ca()}")],
         r"TLS to the fleet database .* the server's certificate is not trusted \(CERTIFICATE_VERIFY_FAILED\)"),
        ("no tables", ["--fleet-db", db.replace("/pushmedia?", "/postgres?"), "--fleet-db-password-file",
                       world.password_file], r"no PushMedia tables: run `pushmedia fleet-db init`"),
    ]
    for name, flags, pattern in cases:
        serve_port = free_port()
        try:
            ran = subprocess.run([world.bin, "serve", "--port", str(serve_port)] + flags + world.store_flags(),
                                 env=env, capture_output=True, text=True, timeout=30)
        except subprocess.TimeoutExpired as timeout:
            raise CheckFailed(f"{name}: still running after 30 s: {timeout.stdout} {timeout.stderr}")
        output = ran.stdout + ran.stderr
        expect(ran.returncode == 64, f"{name}: exit {ran.returncode}: {output[-500:]}")
        expect(re.search(pattern, output), f"{name}: the error does not say /{pattern}/: {output[-500:]}")
        expect("s3cret-word" not in output and password not in output, f"{name}: the password shows: {output}")
        expect("listening" not in output, f"{name}: it listened before failing: {output[-300:]}")


if __name__ == "__main__":
    # media_url_test's own checks registered too when it was imported: only this file's run.
    FLEET = [c for c in CHECKS if c[2].__module__ == "__main__"]
    sys.exit(run_checks(FLEET, World, __doc__, "pushmedia-fleet-", 600, title="fleet_test"))
