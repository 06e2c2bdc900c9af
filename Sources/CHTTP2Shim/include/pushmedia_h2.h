/*
 * The relays' HTTP/2, by libnghttp2: one session per connection, fed the bytes read and asked
 * for the bytes to write (no socket I/O here). libnghttp2's callbacks only record: header
 * fields and bodies go into the stream's buffers, and what Swift must act on becomes an event,
 * drained after each `pm_h2_recv` and `pm_h2_send`. Swift never runs inside a callback.
 *
 * Ownership: the session owns its stream records and frees each in one place; an event taken
 * with `pm_h2_next_event` is self-contained (it points into no record) and belongs to the
 * caller, who frees it with `pm_h2_event_free`, once. Fields to send are built by the caller
 * as `pm_h2_field` arrays, copied by the call that takes them.
 *
 * Received header fields come packed, one encoder (the shim's) and one decoder
 * (`pm_h2_field_next`): per field one flags byte (`PM_H2_NO_INDEX`), the name's length and the
 * value's length (4 bytes each, little-endian), then the name and the value.
 */
#ifndef PUSHMEDIA_H2_H
#define PUSHMEDIA_H2_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pm_h2 pm_h2;

/** A field not to be put in the HPACK table (new on every message). */
#define PM_H2_NO_INDEX 1

typedef enum {
    /** Server: a request ended; its fields and body are complete. */
    PM_H2_REQUEST = 1,
    /** Server: a request's body passed the limit; the rest of it is dropped (fields only). */
    PM_H2_TOO_LARGE = 2,
    /** Client: a stream closed; `code` 0 means its answer (fields, body) is complete. */
    PM_H2_CLOSED = 3,
    /** Client: a stream the server did not process (`REFUSED_STREAM`, above a `GOAWAY`, or
     *  never sent because the connection is going away or it was cancelled): safe to send again. */
    PM_H2_REFUSED = 4,
    /** The peer sent `GOAWAY`; `stream_id` is its last stream. */
    PM_H2_GOAWAY = 5,
    /** Server: a request's header list passed `max_header_list`; the fields past it were
     *  dropped and the request is not handed out (what to answer is the caller's). */
    PM_H2_FIELDS_TOO_LARGE = 6,
    /** A stream carried more than `max_empty_data` DATA frames of no length without END_STREAM
     *  (CVE-2019-9518); raised once per session (what to do is the caller's). */
    PM_H2_EMPTY_DATA = 7,
    /** Client: the server's SETTINGS changed what it allows (`pm_h2_peer_max_streams`). */
    PM_H2_SETTINGS = 8,
} pm_h2_event_kind;

/** What a session is allowed and advertises; every bound of the shim is one of these. */
typedef struct {
    /** Server: request bodies past this become `PM_H2_TOO_LARGE`. Client: answer bodies are
     *  kept up to this (the rest is dropped). */
    size_t body_limit;
    /** `SETTINGS_MAX_CONCURRENT_STREAMS` advertised. */
    uint32_t max_streams;
    /** `SETTINGS_MAX_HEADER_LIST_SIZE` advertised, and the most bytes of fields kept per message. */
    uint32_t max_header_list;
    /** `SETTINGS_INITIAL_WINDOW_SIZE` advertised (each stream's receive window). */
    uint32_t stream_window;
    /** The connection's receive window. */
    uint32_t connection_window;
    /** DATA frames of no length without END_STREAM a stream may carry before `PM_H2_EMPTY_DATA`. */
    uint32_t max_empty_data;
    /** Client: streams opened at once until the server's SETTINGS arrive. */
    uint32_t peer_max_streams_initial;
} pm_h2_limits;

/** An event: everything in it is its own, freed with `pm_h2_event_free`. */
typedef struct {
    pm_h2_event_kind kind;
    int32_t stream_id;
    uint32_t code;
    /** Packed fields (`PM_H2_REQUEST`, `PM_H2_TOO_LARGE`, `PM_H2_CLOSED`), or NULL. */
    const uint8_t *fields;
    size_t fields_length;
    /** The body (`PM_H2_REQUEST`, `PM_H2_CLOSED`), or NULL. */
    const uint8_t *body;
    size_t body_length;
} pm_h2_event;

/** A header field: to send (pointing into the caller's memory, which the call copies), or
 *  read back by `pm_h2_field_next` (pointing into the packed fields). Laid out as libnghttp2's
 *  `nghttp2_nv`, which the shim hands on as it is. */
typedef struct {
    const uint8_t *name;
    const uint8_t *value;
    size_t name_length;
    size_t value_length;
    /** `PM_H2_NO_INDEX` or 0. */
    uint8_t flags;
} pm_h2_field;

/** What a session holds now, for the listener's bounds. */
typedef struct {
    /** Streams whose record is kept: open, or with an answer or request still to send. */
    size_t streams;
    /** Bytes of fields and bodies received and not yet handed out in an event. */
    size_t received_bytes;
    /** Answers (server) or requests (client) whose body is not all sent: waiting for the
     *  peer's flow-control window, or for the connection to be written. */
    size_t waiting;
    /** Bytes of those bodies not yet sent. */
    size_t waiting_bytes;
    /** Body bytes handed to libnghttp2 to send, ever: grows while the peer reads. */
    uint64_t sent_bytes;
    /** Frames libnghttp2 keeps queued to send (submitted, not yet taken with `pm_h2_send`). */
    size_t outbound_frames;
} pm_h2_load;

/** A server session within `limits` (its SETTINGS queued). NULL when out of memory. */
pm_h2 *pm_h2_server_new(const pm_h2_limits *limits);
/** A client session within `limits` (sends the connection preface and its SETTINGS first).
 *  NULL when out of memory. */
pm_h2 *pm_h2_client_new(const pm_h2_limits *limits);
/** Frees the session, its records and the events not taken. */
void pm_h2_free(pm_h2 *session);

/** Feeds bytes read from the peer. 0, or a negative libnghttp2 error: the connection is
 *  broken (write what `pm_h2_send` still gives, then close). */
int pm_h2_recv(pm_h2 *session, const uint8_t *data, size_t length);
/** The next event (the caller's, to free with `pm_h2_event_free`), or NULL. */
pm_h2_event *pm_h2_next_event(pm_h2 *session);
/** Frees an event and all it holds. NULL is ignored. */
void pm_h2_event_free(pm_h2_event *event);
/** Bytes to write to the peer: sets `data` (valid until the next call) and returns their
 *  length; 0 when nothing is pending; negative on a fatal error. */
ssize_t pm_h2_send(pm_h2 *session, const uint8_t **data);
/** Whether the session still wants to read or write; 0 means the connection can close. */
int pm_h2_alive(pm_h2 *session);
/** What the session holds now. */
void pm_h2_get_load(pm_h2 *session, pm_h2_load *load);

/** The field at `*offset` in packed fields: 1 (and `*offset` moved past it), 0 at the end, -1
 *  when the layout is broken. */
int pm_h2_field_next(const uint8_t *packed, size_t length, size_t *offset, pm_h2_field *field);

/** Server: answers a stream with `count` fields (`:status` first) and a body (copied), sent
 *  with END_STREAM. 0, or negative when the stream is gone (the client reset it). */
int pm_h2_respond(
    pm_h2 *session, int32_t stream_id, const pm_h2_field *fields, size_t count, const uint8_t *body,
    size_t body_length);
/** Resets a stream (`RST_STREAM` with the error code `code`); a client's request still queued
 *  is not sent. */
int pm_h2_reset(pm_h2 *session, int32_t stream_id, uint32_t code);
/** `GOAWAY` naming the last stream processed, error code `NO_ERROR`: streams in flight go on. */
int pm_h2_goaway(pm_h2 *session);
/** `GOAWAY` with the error code `code`: the session ends once it is sent. */
int pm_h2_terminate(pm_h2 *session, uint32_t code);

/** Client: opens a stream with `count` fields (pseudo-fields first) and a body (copied).
 *  Streams past the server's `SETTINGS_MAX_CONCURRENT_STREAMS` wait in libnghttp2's queue (a
 *  caller that keeps within `pm_h2_peer_max_streams` has none waiting there).
 *  Returns the stream's id, or negative (no stream ids left, out of memory). */
int32_t pm_h2_request(
    pm_h2 *session, const pm_h2_field *fields, size_t count, const uint8_t *body, size_t body_length);

/** Client: queues a `PING` (the peer's `PING` ACK keeps the connection known alive). */
int pm_h2_ping(pm_h2 *session);

/** Client: the streams the server allows open at once (its `SETTINGS_MAX_CONCURRENT_STREAMS`,
 *  `peer_max_streams_initial` until its SETTINGS arrive). */
uint32_t pm_h2_peer_max_streams(pm_h2 *session);

/** Gives the allocator's free memory back to the system (glibc's `malloc_trim(0)`): after the
 *  connections that held much of it are gone. May take a while: not on an event loop. */
void pm_trim_memory(void);

#endif
