"""What the trace checks share (Tests/tracing, and the relays' tests in Tests/apns and Tests/fcm):
a caller's traceparent, waiting for a trace at the receiver, and the rules every trace keeps."""

import contextlib
import json
import os
import secrets
import time

from otlp_receiver import Receiver
from relay_harness import expect


@contextlib.contextmanager
def relay_receiver():
    """An OTLP receiver for a relay the check starts inside the block, whose exporter sends every
    100 ms (OTEL_BSP_SCHEDULE_DELAY, read by the exporter: no 5 s wait); stopped after."""
    receiver = Receiver()
    os.environ["OTEL_BSP_SCHEDULE_DELAY"] = "100"
    try:
        yield receiver
    finally:
        os.environ.pop("OTEL_BSP_SCHEDULE_DELAY", None)
        receiver.stop()


def traceparent():
    """A sampled W3C traceparent of a new trace: (header, trace id, parent span id)."""
    trace_id, span_id = secrets.token_hex(16), secrets.token_hex(8)
    return f"00-{trace_id}-{span_id}-01", trace_id, span_id


def trace(receiver, trace_id, until, timeout=15.0):
    """The spans of `trace_id` `receiver` has once `until(spans)` holds (or the timeout passes)."""
    deadline = time.monotonic() + timeout
    while True:
        spans = [s for s in receiver.spans() if s["trace_id"] == trace_id]
        if until(spans) or time.monotonic() > deadline:
            return spans
        time.sleep(0.1)


def named(spans, name):
    return [s for s in spans if s["name"] == name]


def one(spans, name):
    found = named(spans, name)
    expect(len(found) == 1, f"{len(found)} spans named {name!r} in the trace; names: {sorted(s['name'] for s in spans)}")
    return found[0]


def expect_joined(spans, parent_span_id, secrets_):
    """Every span's parent is in the trace but the server span's, which is the caller's; no
    attribute or name carries any of `secrets_` or a query string."""
    ids = {s["span_id"] for s in spans}
    roots = [s for s in spans if s["parent_span_id"] not in ids]
    expect(len(roots) == 1, f"{len(roots)} spans whose parent is not in the trace: {[r['name'] for r in roots]}")
    expect(roots[0]["parent_span_id"] == parent_span_id,
           f"the server span's parent is {roots[0]['parent_span_id']}, the caller's span is {parent_span_id}")
    expect(roots[0]["kind"] == 2, f"the root span {roots[0]['name']!r} is of kind {roots[0]['kind']}, not SERVER (2)")
    for span in spans:
        text = json.dumps([span["name"], span["attributes"], span["status_message"], span["events"]])
        for secret in secrets_:
            expect(secret not in text, f"span {span['name']!r} carries {secret[:12]}…: {text[:300]}")
        expect("?" not in text, f"span {span['name']!r} carries a query string: {text[:300]}")
    return roots[0]




def expect_relayed_push(spans, parent, relay, secrets_, app, topic=None):
    """A relayed push's trace: its server span (`<relay> push`, the caller's child) with the app
    (and APNs' topic and push type), the media's resolve span under it, and the upstream exchange
    (`<relay> upstream`, a client span) with its `dequeued` event and a 200."""
    root = expect_joined(spans, parent, secrets_)
    expect(root["name"] == f"{relay} push", f"the server span is {root['name']!r}")
    a = root["attributes"]
    expect(a.get("pushmedia.relay") == relay and a.get("pushmedia.app") == app
           and a.get("http.response.status_code") == 200, f"push span attributes {a}")
    expect(a.get("pushmedia.outcome") == "processed", f"push outcome {a.get('pushmedia.outcome')!r}")
    if topic:
        expect(a.get("apns.topic") == topic and a.get("apns.push_type") == "alert", f"push span attributes {a}")
    resolves = [s for s in spans if s["name"] == "pushmedia.resolve"]
    expect(resolves and all(s["parent_span_id"] == root["span_id"] for s in resolves),
           f"resolve spans {[(s['name'], s['parent_span_id']) for s in resolves]} not under the push span")
    upstream = one(spans, f"{relay} upstream")
    expect(upstream["parent_span_id"] == root["span_id"] and upstream["kind"] == 3,
           f"the upstream span's parent {upstream['parent_span_id']}, kind {upstream['kind']}")
    expect([e["name"] for e in upstream["events"]] == ["dequeued"], f"upstream events {upstream['events']}")
    expect(upstream["attributes"].get("http.response.status_code") == 200, f"upstream {upstream['attributes']}")
    return root, upstream


def expect_logged(log_path, trace_id, span_id, absent, timeout=5.0):
    """A line of the log at `log_path` carries `trace_id` and `span_id` (within `timeout`: the log
    is written in the background); the log holds none of `absent`."""
    deadline = time.monotonic() + timeout
    while True:
        with open(log_path, "rb") as f:
            log = f.read().decode(errors="replace")
        lines = [line for line in log.splitlines() if f"trace_id={trace_id}" in line]
        if any(f"span_id={span_id}" in line for line in lines):
            break
        expect(time.monotonic() < deadline, f"no log line with trace_id={trace_id} span_id={span_id}: "
               f"{lines[:2]} {log[-600:]}")
        time.sleep(0.1)
    for text in absent:
        expect(text not in log, f"the log shows {text[:12]}…")
