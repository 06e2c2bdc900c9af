"""An OTLP/HTTP receiver on 127.0.0.1 for the trace tests: POST /v1/traces bodies decoded with the
official protobuf definitions (opentelemetry-proto from PyPI), every span kept as a dict. Answers
as the OTLP specification says a collector does (200 with an ExportTraceServiceResponse; 415 for
a body that is not protobuf; 400 for one that does not decode)."""

import http.server
import socket
import threading

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2


def _value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [_value(v) for v in any_value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: _value(kv.value) for kv in any_value.kvlist_value.values}
    return getattr(any_value, kind)


def span_dict(resource, scope, span):
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex(),
        "name": span.name,
        "kind": span.kind,
        "start": span.start_time_unix_nano,
        "end": span.end_time_unix_nano,
        "attributes": {kv.key: _value(kv.value) for kv in span.attributes},
        "events": [{"name": e.name, "time": e.time_unix_nano} for e in span.events],
        "status": span.status.code,
        "status_message": span.status.message,
        "resource": {kv.key: _value(kv.value) for kv in resource.attributes},
        "scope": scope.name,
    }


class Receiver:
    """Starts at once on a free port of 127.0.0.1 (`url`); `spans()` is every span received so far."""

    def __init__(self, port=0):
        self._spans = []
        self._lock = threading.Lock()
        self._connections = set()
        self.requests = []
        # A benchmark's sink counts spans without keeping them (`count`).
        self.keep_spans = True
        self.count = 0
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def setup(self):
                super().setup()
                with receiver._lock:
                    receiver._connections.add(self.connection)

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if receiver.keep_spans:
                    receiver.requests.append({"path": self.path, "headers": dict(self.headers), "bytes": len(body)})
                if self.path != "/v1/traces":
                    return self._answer(404, b"")
                if self.headers.get("Content-Type") != "application/x-protobuf":
                    return self._answer(415, b"")
                request = trace_service_pb2.ExportTraceServiceRequest()
                try:
                    request.ParseFromString(body)
                except Exception:
                    return self._answer(400, b"")
                if receiver.keep_spans:
                    spans = [
                        span_dict(rs.resource, ss.scope, span)
                        for rs in request.resource_spans
                        for ss in rs.scope_spans
                        for span in ss.spans
                    ]
                    count = len(spans)
                else:
                    # A benchmark's sink: decoded, counted, not turned into dicts.
                    count = sum(len(ss.spans) for rs in request.resource_spans for ss in rs.scope_spans)
                with receiver._lock:
                    receiver.count += count
                    if receiver.keep_spans:
                        receiver._spans.extend(spans)
                self._answer(200, trace_service_pb2.ExportTraceServiceResponse().SerializeToString())

            def _answer(self, status, body):
                self.send_response(status)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def spans(self):
        with self._lock:
            return list(self._spans)

    def stop(self):
        """Stops listening and cuts the connections an exporter keeps alive: a collector gone."""
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections, self._connections = self._connections, set()
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
