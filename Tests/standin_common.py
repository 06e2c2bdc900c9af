"""What the stand-ins for Apple (Tests/apns/standin.py) and Google (Tests/fcm/standin.py) share:
listening (TLS with ALPN when --cert/--key are given, cleartext otherwise), the server side of
HTTP/2 connections (h2), the record of received requests (one JSON object a line) and the
command line. Each stand-in subclasses Server and H2Handler with its own checks and answers."""

import argparse
import asyncio
import hashlib
import json
import signal
import ssl

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def sha256_hex(value):
    """The SHA-256 of a header value, in hex."""
    return hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()


def first_values(pairs):
    """Headers as a dict; a repeated name keeps its first value."""
    headers = {}
    for name, value in pairs:
        headers.setdefault(name, value)
    return headers


def record_headers(pairs):
    """Headers as the record shows them: a repeated name's values as a list, authorization's
    value replaced by "sha256:<hex of the value>"."""
    headers = {}
    for name, value in pairs:
        if name == "authorization":
            value = "sha256:" + sha256_hex(value)
        if name in headers:
            old = headers[name]
            headers[name] = (old if isinstance(old, list) else [old]) + [value]
        else:
            headers[name] = value
    return headers


class Recorder:
    """Appends entries, as JSON lines, to --record's file (nothing without --record). Entries wait
    in memory until flush(), which connections call before they send the answers described."""

    def __init__(self, path):
        self.file = open(path, "a", encoding="utf-8") if path else None
        self.pending = []

    def add(self, entry):
        if self.file:
            self.pending.append(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))

    def flush(self):
        if self.file and self.pending:
            self.file.write("\n".join(self.pending) + "\n")
            self.file.flush()
            self.pending.clear()


class Stream:
    """A request as it is read: its headers, the first bytes of its body, the body's size."""

    __slots__ = ("headers", "body", "size", "recorded")

    def __init__(self, headers):
        self.headers = headers
        self.body = bytearray()
        self.size = 0
        self.recorded = False

    def add(self, data, keep):
        """Counts data; keeps it while the body holds fewer than `keep` bytes."""
        self.size += len(data)
        if len(self.body) < keep:
            self.body += data[:keep - len(self.body)]


def h2_settings(max_streams):
    return h2.settings.Settings(
        client=False,
        initial_values={
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: max_streams,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: 65536,
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 1 << 20,
        },
    )


class H2Handler:
    """The server side of one HTTP/2 connection: reads each request into a Stream, hands it to
    on_end once complete, and sends answers (respond) as flow control allows. A subclass answers
    (on_end) and records (record_unanswered, lost_note)."""

    max_streams = 1000  # SETTINGS_MAX_CONCURRENT_STREAMS
    body_keep = 64 * 1024  # bytes of a body kept; beyond them it is only counted
    whole_frames = False  # True: each body in one DATA frame, sent once the window holds all of it

    def __init__(self, conn):
        self.conn = conn
        self.server = conn.server
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=config)
        self.h2.local_settings = h2_settings(self.max_streams)
        self.streams = {}
        self.pending = {}  # stream id -> body bytes waiting for flow-control window
        self.closing = False
        self.h2.initiate_connection()
        self.settings_sent()
        self.h2.increment_flow_control_window((1 << 24) - 65535)
        self.flush()

    def settings_sent(self):
        """Called once the server's SETTINGS are queued."""

    def flush(self):
        self.conn.write(self.h2.data_to_send())

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.conn.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.on_request(event)
            elif isinstance(event, h2.events.DataReceived):
                self.on_data(event)
            elif isinstance(event, h2.events.StreamEnded):
                self.on_end(event.stream_id)
            elif isinstance(event, h2.events.StreamReset):
                stream = self.streams.pop(event.stream_id, None)
                self.pending.pop(event.stream_id, None)
                if stream is not None:
                    self.record_unanswered(event.stream_id, stream, "reset by the client")
            elif isinstance(event, (h2.events.WindowUpdated, h2.events.RemoteSettingsChanged)):
                self.send_pending()
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.closing = True
        self.flush()
        if self.closing and not self.streams and not self.pending:
            self.conn.transport.close()

    def on_request(self, event):
        self.streams[event.stream_id] = Stream(event.headers)

    def on_data(self, event):
        stream = self.streams.get(event.stream_id)
        if stream is not None:
            stream.add(event.data, self.body_keep)
        try:
            self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        except h2.exceptions.StreamClosedError:
            pass

    def on_end(self, sid):
        """A request is complete: answer it (or not)."""
        raise NotImplementedError

    def record_unanswered(self, sid, stream, note):
        """Records a request that gets no answer, and why."""
        raise NotImplementedError

    def lost_note(self, sid):
        """Why a request still open when the connection closed got no answer."""
        return "connection closed before the request ended"

    def respond(self, sid, headers, body=b""):
        """Sends an answer's headers, then its body (if any) as the window allows."""
        try:
            self.h2.send_headers(sid, headers, end_stream=not body)
            if body:
                self.pending[sid] = body
                self.send_pending()
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError):
            self.pending.pop(sid, None)

    def send_pending(self):
        for sid in list(self.pending):
            body = self.pending[sid]
            try:
                window = self.h2.local_flow_control_window(sid)
                if self.whole_frames:
                    if window < len(body):
                        continue
                    size = len(body)
                else:
                    size = min(window, self.h2.max_outbound_frame_size, len(body))
                    if size <= 0 and body:
                        continue
                self.h2.send_data(sid, body[:size], end_stream=size == len(body))
                body = body[size:]
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
                body = b""
            if body:
                self.pending[sid] = body
            else:
                del self.pending[sid]

    def connection_lost(self):
        for sid, stream in list(self.streams.items()):
            if not stream.recorded:
                self.record_unanswered(sid, stream, self.lost_note(sid))
        self.streams.clear()


class Connection(asyncio.Protocol):
    """One client connection. Its bytes go to the server's h2_handler, or to its h1_handler (when
    it has one) for a client that asks for HTTP/1.1: over TLS by an ALPN other than h2 (or none),
    in cleartext by not starting with the HTTP/2 connection preface."""

    def __init__(self, server):
        self.server = server
        server.next_conn += 1
        self.conn_id = server.next_conn
        self.transport = None
        self.tls = False
        self.alpn = None
        self.protocol = None  # "h2" or "http1.1"
        self.handler = None
        self.sniffed = b""

    def connection_made(self, transport):
        self.transport = transport
        self.server.connections.add(self)
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.tls = True
            self.alpn = ssl_object.selected_alpn_protocol()
            self.start(self.alpn == "h2" or self.server.h1_handler is None)
        elif self.server.h1_handler is None:
            self.start(True)

    def start(self, http2):
        self.protocol = "h2" if http2 else "http1.1"
        self.handler = (self.server.h2_handler if http2 else self.server.h1_handler)(self)

    def data_received(self, data):
        if self.handler is None:
            # Cleartext: HTTP/2 with prior knowledge starts with the connection preface.
            self.sniffed += data
            if H2_PREFACE.startswith(self.sniffed[:len(H2_PREFACE)]) and len(self.sniffed) < len(H2_PREFACE):
                return
            self.start(self.sniffed.startswith(H2_PREFACE))
            data, self.sniffed = self.sniffed, b""
        self.handler.data_received(data)

    def connection_lost(self, exc):
        self.server.connections.discard(self)
        if self.handler is not None:
            self.handler.connection_lost()
        self.server.recorder.flush()

    def write(self, data):
        # The record goes out before the answers it describes.
        self.server.recorder.flush()
        if data and self.transport and not self.transport.is_closing():
            self.transport.write(data)


class Server:
    """Listens on --host/--port (over TLS offering `alpn` when --cert/--key are given), prints
    'standin listening on PORT', and stops on SIGTERM or SIGINT."""

    alpn = ("h2",)
    h2_handler = None  # the H2Handler subclass that answers
    h1_handler = None  # a handler for HTTP/1.1, or None: HTTP/2 only

    def __init__(self, opts):
        self.opts = opts
        self.recorder = Recorder(opts.record)
        self.connections = set()
        self.next_conn = 0

    def ssl_context(self):
        if not self.opts.cert:
            return None
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.opts.cert, self.opts.key)
        ctx.set_alpn_protocols(list(self.alpn))
        return ctx

    async def run(self):
        loop = asyncio.get_running_loop()
        server = await loop.create_server(lambda: Connection(self), self.opts.host, self.opts.port,
                                          ssl=self.ssl_context(), backlog=1024)
        port = server.sockets[0].getsockname()[1]
        print(f"standin listening on {port}", flush=True)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()
        for c in list(self.connections):
            if c.transport:
                c.transport.close()
        self.recorder.flush()


def arg_parser(doc, example, cleartext, stall):
    """The command line both stand-ins share (--host, --port, --cert, --key, --record, --stall);
    `cleartext` says what is spoken without --cert/--key, `stall` what --stall does."""
    parser = argparse.ArgumentParser(
        prog="standin.py",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=doc,
        epilog="Example:\n  " + example,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0,
                        help="port; 0 picks a free one. Prints 'standin listening on PORT' once listening")
    parser.add_argument("--cert", help=f"server certificate chain (PEM); without --cert/--key: {cleartext}")
    parser.add_argument("--key", help="server private key (PEM)")
    parser.add_argument("--record", help="append one JSON line per request to this file")
    parser.add_argument("--stall", action="store_true", help=stall)
    return parser


def serve(server_cls, parser, argv=None):
    """Parses the command line and runs server_cls until SIGTERM or SIGINT."""
    opts = parser.parse_args(argv)
    if bool(opts.cert) != bool(opts.key):
        parser.error("--cert and --key go together")
    try:
        asyncio.run(server_cls(opts).run())
    except KeyboardInterrupt:
        pass
