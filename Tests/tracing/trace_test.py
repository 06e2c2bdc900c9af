"""Traces end to end (scripts/tracing.sh), with real parts only: `pushmedia serve` exporting over
OTLP/HTTP to a receiver on 127.0.0.1 that decodes each export with the official protobuf
definitions (opentelemetry-proto from PyPI, Tests/tracing/otlp_receiver.py), and an HTTP origin
on 127.0.0.1. Checked: a hook request carrying a caller's `traceparent` is one trace joined to it
(every parent link inside the trace, the steps present, the origin's host but never its query,
nor the bearer token, in any attribute; its log lines carry the trace id); a media URL's miss
and hit; the receiver stopped mid-run: requests keep their latency, memory stays flat and
`pushmedia_trace_spans_dropped_total` rises; a bad endpoint, or an OTEL_* variable that
disagrees with a setting, stops the start with the setting named; no endpoint, no export.
The relays' traces are checked by their own tests (Tests/apns, Tests/fcm), the fleet's lease
taken over by Tests/fleet.

    scripts/tracing.sh                   # all checks
    scripts/tracing.sh --only hook -v    # one check, verbose
"""

import json
import os
import secrets
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from relay_harness import CHECKS, Origin, Proc, check, expect, free_port, run_checks  # noqa: E402
from otlp_receiver import Receiver  # noqa: E402
from trace_checks import expect_joined, named, one, trace, traceparent  # noqa: E402

TOKEN = "trace-test-token-" + secrets.token_hex(8)
COLLECTOR_KEY = "collector-key-" + secrets.token_hex(8)
SECRET_QUERY = "sig=" + secrets.token_hex(12)


class Serve:
    """`pushmedia serve` on a free port with `args`, exporting to `endpoint` (none: tracing off).
    The export runs every 100 ms (OTEL_BSP_SCHEDULE_DELAY, read by the exporter) so that a check
    need not wait the default 5 s."""

    def __init__(self, world, name, endpoint, *args, env=None):
        self.port = free_port()
        argv = [world.bin, "serve", "--port", str(self.port), "--store", os.path.join(world.work, f"store-{name}"),
                "--token", TOKEN, "--trust-peer", f"127.0.0.1:{world.origin.port}", *args]
        if endpoint:
            argv += ["--otel-endpoint", endpoint]
        environment = {k: v for k, v in os.environ.items() if not k.startswith(("PUSHMEDIA_", "OTEL_"))}
        environment["OTEL_BSP_SCHEDULE_DELAY"] = "100"
        environment.update(env or {})
        self.proc = Proc(name, argv, world.work, env=environment)
        self.proc.wait_for([r"PushMedia listening on"])
        self.base = f"http://127.0.0.1:{self.port}"

    def request(self, method, path, body=None, headers=None, auth=True):
        all_headers = dict(headers or {})
        if auth:
            all_headers["Authorization"] = f"Bearer {TOKEN}"
        if body is not None:
            all_headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=body, headers=all_headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def process(self, media_path, parent=None, text="text"):
        payload = {"aps": {"alert": {"title": "Trace", "body": text}, "mutable-content": 1},
                   "media_url": f"http://127.0.0.1:{self.world_origin_port}{media_path}?{SECRET_QUERY}"}
        headers = {"traceparent": parent} if parent else {}
        return self.request("POST", "/v1/process", json.dumps(payload).encode(), headers)

    def processed(self, media_path, parent=None, text="text"):
        """process(), which must answer 200: its headers and body."""
        status, headers, body = self.process(media_path, parent=parent, text=text)
        expect(status == 200, f"/v1/process answered {status}: {body[:200]!r}")
        return headers, body

    def metric(self, name):
        status, _, body = self.request("GET", "/metrics")
        expect(status == 200, f"/metrics answered {status}")
        total = 0.0
        found = False
        for line in body.decode().splitlines():
            if line.startswith(name) and not line.startswith("#"):
                found = True
                total += float(line.rsplit(" ", 1)[1])
        return total if found else None

    def rss_kib(self):
        with open(f"/proc/{self.proc.p.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def log(self):
        self.proc.err.flush()
        with open(self.proc.err_path, encoding="utf-8", errors="replace") as f:
            return f.read()


class World:
    def __init__(self, bin_path, work):
        self.bin = bin_path
        self.work = work
        if not os.access(bin_path, os.X_OK):
            raise SystemExit(f"{bin_path} is missing (swift build first)")
        self.origin = Origin(("/img/banner", "/img/media-url", "/img/hit", "/img/load"))
        self.receiver = Receiver()

    def serve(self, name, *args, endpoint=True, env=None):
        serve = Serve(self, name, self.receiver.url if endpoint is True else endpoint, *args, env=env)
        serve.world_origin_port = self.origin.port
        return serve

    def close(self):
        self.origin.stop()
        self.receiver.stop()


@check("hook")
def hook_request_joins_the_callers_trace(world):
    serve = world.serve("hook", "--otel-headers", f"x-collector-key={COLLECTOR_KEY}")
    header, trace_id, parent = traceparent()
    serve.processed("/img/banner", parent=header)
    steps = ("pushmedia.fetch", "pushmedia.sniff", "pushmedia.decide", "pushmedia.transcode", "pushmedia.store.put",
             "pushmedia.store.record", "pushmedia.rewrite")
    spans = trace(world.receiver, trace_id, lambda s: all(named(s, n) for n in steps) and named(s, "POST /v1/process"))
    root = expect_joined(spans, parent, [TOKEN, SECRET_QUERY])
    expect(root["name"] == "POST /v1/process", f"the server span is {root['name']!r}")
    a = root["attributes"]
    expect(a.get("http.route") == "/v1/process" and a.get("http.response.status_code") == 200
           and a.get("pushmedia.outcome") == "processed", f"server span attributes {a}")
    expect(root["resource"].get("service.name") == "pushmedia", f"resource {root['resource']}")
    payload = one(spans, "pushmedia.payload")
    expect(payload["parent_span_id"] == root["span_id"], "the payload span is not the server span's child")
    p = payload["attributes"]
    expect(p.get("pushmedia.status") == "processed" and p.get("pushmedia.cache_hit") is False
           and p.get("pushmedia.profile") == "ios" and p.get("pushmedia.budget_ms") == 10000
           and p.get("pushmedia.best_attempt") is False, f"payload span attributes {p}")
    resolve = one(spans, "pushmedia.resolve")
    expect(resolve["parent_span_id"] == payload["span_id"], "the resolve span is not the payload span's child")
    for step in steps[:-1]:
        for span in named(spans, step):
            expect(span["parent_span_id"] == resolve["span_id"], f"{step} is not a child of the resolve span")
    fetch = one(spans, "pushmedia.fetch")["attributes"]
    expect(fetch.get("server.address") == "127.0.0.1" and fetch.get("server.port") == world.origin.port
           and fetch.get("http.response.status_code") == 200
           and fetch.get("http.response.body.size") == len(world.origin.webp)
           and isinstance(fetch.get("pushmedia.fetch.first_byte_ms"), int), f"fetch span attributes {fetch}")
    sniff = one(spans, "pushmedia.sniff")["attributes"]
    expect(sniff.get("pushmedia.source.mime") == "image/webp", f"sniff span attributes {sniff}")
    transcode = one(spans, "pushmedia.transcode")["attributes"]
    expect(transcode.get("pushmedia.engine") == "vips" and transcode.get("pushmedia.output.mime") == "image/jpeg"
           and transcode.get("pushmedia.output.bytes", 0) > 0, f"transcode span attributes {transcode}")
    # Every line the request wrote carries its trace id.
    lines = [line for line in serve.log().splitlines() if "route=/v1/process" in line]
    expect(lines and all(f"trace_id={trace_id}" in line for line in lines),
           f"request lines without the trace id: {lines[:2]}")
    # The exports carry --otel-headers; the log never shows them.
    keys = {r["headers"].get("x-collector-key") for r in world.receiver.requests}
    expect(keys == {COLLECTOR_KEY}, f"exports carried x-collector-key {keys}")
    expect(COLLECTOR_KEY not in serve.log() and TOKEN not in serve.log(), "the log shows a secret")
    serve.proc.stop()


@check("media-url")
def media_url_miss_then_hit(world):
    serve = world.serve("media-url", "--url-allow-source", f"http://127.0.0.1:{world.origin.port}/img/")
    path = f"/insecure/pr:ios/plain/http://127.0.0.1:{world.origin.port}/img/media-url@jpg"
    traces = []
    for attempt in ("miss", "hit"):
        header, trace_id, parent = traceparent()
        status, headers, body = serve.request("GET", path, headers={"traceparent": header}, auth=False)
        expect(status == 200 and body[:2] == b"\xff\xd8", f"{attempt}: the media URL answered {status}")
        spans = trace(world.receiver, trace_id, lambda s: named(s, "GET /{signature}/{options}/{source}")
                      and named(s, "pushmedia.resolve"))
        root = expect_joined(spans, parent, [TOKEN, "/img/media-url"])
        verify = one(spans, "pushmedia.media_url.verify")
        expect(verify["parent_span_id"] == root["span_id"], "the signature check is not the server span's child")
        expect(verify["attributes"].get("pushmedia.signed") is False
               and verify["attributes"].get("pushmedia.format") == "jpg", f"verify attributes {verify['attributes']}")
        traces.append(spans)
    miss, hit = traces
    expect(one(miss, "pushmedia.resolve")["attributes"].get("pushmedia.cache_hit") is False, "the first is no miss")
    expect(named(miss, "pushmedia.fetch"), "the miss has no fetch span")
    expect(one(hit, "pushmedia.resolve")["attributes"].get("pushmedia.cache_hit") is True, "the second is no hit")
    expect(not named(hit, "pushmedia.fetch"), "the hit fetched again")
    serve.proc.stop()


@check("batch")
def batch_items_are_one_trace(world):
    """A /v1/batch of two payloads with a traceparent: one trace, the server span with one
    pushmedia.payload span per item under it, each with its own resolve."""
    serve = world.serve("batch")
    header, trace_id, parent = traceparent()
    payloads = [{"aps": {"alert": {"title": "Trace", "body": f"item {n}"}, "mutable-content": 1},
                 "media_url": f"http://127.0.0.1:{world.origin.port}{path}?{SECRET_QUERY}"}
                for n, path in enumerate(("/img/banner", "/img/load"))]
    status, _, body = serve.request("POST", "/v1/batch", json.dumps({"payloads": payloads}).encode(),
                                    {"traceparent": header})
    expect(status == 200, f"/v1/batch answered {status}: {body[:200]!r}")
    spans = trace(world.receiver, trace_id, lambda s: len(named(s, "pushmedia.payload")) == 2
                  and len(named(s, "pushmedia.resolve")) == 2 and named(s, "POST /v1/batch"))
    root = expect_joined(spans, parent, [TOKEN, SECRET_QUERY])
    expect(root["name"] == "POST /v1/batch" and root["attributes"].get("http.route") == "/v1/batch",
           f"the server span is {root['name']!r} {root['attributes']}")
    items = named(spans, "pushmedia.payload")
    expect(len(items) == 2 and all(s["parent_span_id"] == root["span_id"] for s in items),
           f"{len(items)} payload spans, parents {[s['parent_span_id'] for s in items]}, server span {root['span_id']}")
    resolves = named(spans, "pushmedia.resolve")
    expect(sorted(s["parent_span_id"] for s in resolves) == sorted(s["span_id"] for s in items),
           "each item's resolve is not under its own payload span")
    serve.proc.stop()


@check("unsampled")
def a_callers_unsampled_trace_is_not_recorded(world):
    """The default sampler follows the caller: a traceparent whose sampled flag is off records
    nothing (and the work under it starts no span), the next one, sampled, is recorded."""
    serve = world.serve("unsampled")
    _, trace_id, parent = traceparent()
    serve.processed("/img/banner", parent=f"00-{trace_id}-{parent}-00")
    header, sampled_id, _ = traceparent()
    serve.processed("/img/banner", parent=header)
    # The exporter sends spans in the order they ended: once the later, sampled trace is in, the
    # unsampled one would be too, had it been exported.
    trace(world.receiver, sampled_id, lambda s: named(s, "POST /v1/process") and named(s, "pushmedia.payload"))
    expect(not [s for s in world.receiver.spans() if s["trace_id"] == trace_id], "the unsampled trace was exported")
    serve.proc.stop()


@check("ratio")
def a_ratio_sampler_records_its_share(world):
    """Traces set up by OpenTelemetry's variables alone (OTEL_EXPORTER_OTLP_ENDPOINT, a sampler of
    parentbased_traceidratio 0.1): of 300 requests without a traceparent about 30 are recorded,
    each a whole trace; a caller's sampled traceparent is followed. The exporter reads the same
    variables: were it to sample again, about 3 would be."""
    serve = world.serve("ratio", "--otel-service-name", "pushmedia-ratio", endpoint=None,
                        env={"OTEL_EXPORTER_OTLP_ENDPOINT": world.receiver.url,
                             "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.1"})
    serve.processed("/img/hit")
    for n in range(300):
        # Each text its own (a repeated body is answered from memory, without the pipeline's spans).
        serve.processed("/img/hit", text=f"text {n}")
    header, sampled_id, _ = traceparent()
    serve.processed("/img/hit", parent=header)
    # The last request's trace in, every earlier one sampled is in too (spans go in the order they ended).
    trace(world.receiver, sampled_id, lambda s: named(s, "POST /v1/process") and named(s, "pushmedia.payload"))
    mine = [s for s in world.receiver.spans() if s["resource"].get("service.name") == "pushmedia-ratio"
            and s["trace_id"] != sampled_id]
    roots = {s["trace_id"] for s in mine if s["name"] == "POST /v1/process"}
    # 30 expected of 301 (the first request's trace too); the binomial's deviation is about 5.2.
    expect(12 <= len(roots) <= 55, f"{len(roots)} of 301 requests were recorded at a ratio of 0.1")
    payloads = {s["trace_id"] for s in mine if s["name"] == "pushmedia.payload"}
    expect(payloads == roots, f"{len(roots - payloads)} recorded requests lack their payload span, "
           f"{len(payloads - roots)} payload spans have no request span")
    serve.proc.stop()


@check("collector-down")
def a_stopped_collector_costs_spans_not_pushes(world):
    receiver = Receiver()
    serve = world.serve("down", "--otel-max-queue", "256", endpoint=receiver.url)
    serve.processed("/img/load")

    def latencies(count):
        times = []
        for _ in range(count):
            header, _, _ = traceparent()
            started = time.perf_counter()
            status, _, _ = serve.process("/img/load", parent=header)
            times.append(time.perf_counter() - started)
            expect(status == 200, f"/v1/process answered {status}")
        return times

    before = latencies(300)
    deadline = time.monotonic() + 10
    while len(receiver.spans()) <= 300 and time.monotonic() < deadline:
        time.sleep(0.05)
    exported = len(receiver.spans())
    expect(exported > 300, f"the receiver had only {exported} spans before it stopped")
    receiver.stop()
    dropped_before = serve.metric("pushmedia_trace_spans_dropped_total") or 0
    rss_start = serve.rss_kib()
    during = latencies(300)
    for _ in range(4):
        during += latencies(300)
    rss_end = serve.rss_kib()
    # Counted once the exporter gives up on the batch it holds (its timeout: 5 s).
    deadline = time.monotonic() + 20
    while True:
        dropped = serve.metric("pushmedia_trace_spans_dropped_total")
        if (dropped or 0) > dropped_before or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    median_before, median_during = statistics.median(before), statistics.median(during)
    expect(median_during < max(3 * median_before, median_before + 0.02),
           f"median latency {median_during * 1000:.1f} ms with the collector down, {median_before * 1000:.1f} ms before")
    expect(dropped is not None and dropped > dropped_before,
           f"pushmedia_trace_spans_dropped_total {dropped_before} before, {dropped} after 1500 requests")
    expect(rss_end - rss_start < 30 * 1024, f"RSS grew {(rss_end - rss_start) / 1024:.1f} MiB with the collector down")
    expect(serve.proc.alive(), "serve died")
    serve.proc.stop()


def refused(world, args, env, *needles, file_too=True):
    """`serve` with `args` and `env` exits 64 naming `needles`, and so does `check-config` of a
    settings file that says what `args` say, with the same environment (unless `file_too` is
    false: a variable wins over a file's setting, as it does for `serve --config`, where it
    conflicts with a flag)."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith(("PUSHMEDIA_", "OTEL_"))}
    environment.update(env)
    settings = os.path.join(world.work, "refused.yaml")
    with open(settings, "w") as f:
        f.write(f"store: {os.path.join(world.work, 'store-refused')}\n")
        for name, value in zip(args[::2], args[1::2]):
            f.write(f"{name[2:]}: {json.dumps(value)}\n")
    runs = [[world.bin, "serve", "--port", "0", "--store", os.path.join(world.work, "store-refused"), *args]]
    if args and file_too:
        runs.append([world.bin, "check-config", settings])
    for argv in runs:
        command = argv[1:2]
        run = subprocess.run(argv, capture_output=True, text=True, env=environment, timeout=30)
        # check-config says a file is wrong with 65 (EX_DATAERR), serve refuses to start with 64.
        expect(run.returncode == (65 if command == ["check-config"] else 64), f"{command[0]} {args} exited {run.returncode}: {run.stderr[-300:]}")
        for needle in needles:
            expect(needle in run.stderr, f"{command[0]}: {needle!r} not in {run.stderr[-300:]!r}")


@check("settings")
def bad_settings_stop_the_start(world):
    refused(world, ["--otel-endpoint", "ftp://collector:4318"], {}, "--otel-endpoint", "http(s) URL")
    refused(world, [], {"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "--otel-endpoint")
    refused(world, ["--otel-sampler", "sometimes"], {}, "--otel-sampler", "parentbased_traceidratio")
    refused(world, ["--otel-sampler-arg", "2"], {}, "--otel-sampler-arg")
    refused(world, ["--otel-headers", "api-key"], {}, "--otel-headers", "(hidden)")
    refused(world, ["--otel-endpoint", "http://127.0.0.1:4318"],
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9999"}, "OTEL_EXPORTER_OTLP_ENDPOINT", "--otel-endpoint",
            file_too=False)


@check("off")
def no_endpoint_no_export(world):
    receiver = Receiver()
    serve = world.serve("off", endpoint=None, env={"OTEL_BSP_SCHEDULE_DELAY": "100"})
    header, trace_id, _ = traceparent()
    serve.processed("/img/hit", parent=header)
    # A traced server's request after it, waited for at the receiver: both export every 100 ms,
    # so a span the server without an endpoint sent would be in by then.
    sentinel = world.serve("off-sentinel")
    sentinel_header, sentinel_id, _ = traceparent()
    sentinel.processed("/img/hit", parent=sentinel_header)
    expect(trace(world.receiver, sentinel_id, lambda s: named(s, "POST /v1/process")),
           "the traced server's spans did not arrive")
    expect(not receiver.requests and not [s for s in world.receiver.spans() if s["trace_id"] == trace_id],
           "spans were exported without an endpoint")
    expect(serve.metric("pushmedia_trace_spans_dropped_total") is None, "the dropped-span metric exists with traces off")
    expect(trace_id not in serve.log(), "a log line carries the trace id with traces off")
    receiver.stop()
    serve.proc.stop()


if __name__ == "__main__":
    sys.exit(run_checks(CHECKS, World, __doc__, "pushmedia-traces-", 300, title="trace_test"))
