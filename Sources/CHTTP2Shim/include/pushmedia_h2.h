/*
 * The relays' HTTP/2, by libnghttp2: one session per connection, fed the bytes read and asked
 * for the bytes to write (no socket I/O here). libnghttp2's callbacks only record: header
 * fields and bodies go into the stream's buffers, and what Swift must act on goes into the
 * session's event queue, drained after each `pm_h2_recv`. Swift never runs inside a callback.
 *
 * Header fields cross in one packed layout, both ways: per field one flags byte
 * (`PM_H2_NO_INDEX`), the name's length and the value's length (4 bytes each, little-endian),
 * then the name and the value.
 */
#ifndef PUSHMEDIA_H2_H
#define PUSHMEDIA_H2_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct pm_h2 pm_h2;
typedef struct pm_h2_stream pm_h2_stream;

/** A field not to be put in the HPACK table (new on every message). */
#define PM_H2_NO_INDEX 1

typedef enum {
    /** Server: a request ended; its fields and body are complete. */
    PM_H2_REQUEST = 1,
    /** Server: a request's body passed the limit; the rest of it is dropped. */
    PM_H2_TOO_LARGE = 2,
    /** Client: a stream closed; `code` 0 means its answer is complete. */
    PM_H2_CLOSED = 3,
    /** Client: a stream the server did not process (`REFUSED_STREAM`, above a `GOAWAY`, or
     *  never sent because the connection is going away): safe to send again. */
    PM_H2_REFUSED = 4,
    /** The peer sent `GOAWAY`; `stream_id` is its last stream. */
    PM_H2_GOAWAY = 5,
} pm_h2_event_kind;

typedef struct {
    pm_h2_event_kind kind;
    int32_t stream_id;
    uint32_t code;
    /** The stream's record (`PM_H2_REQUEST`, `PM_H2_TOO_LARGE`, `PM_H2_CLOSED`): read it, then
     *  give it back with `pm_h2_release`. NULL for the others. */
    pm_h2_stream *stream;
} pm_h2_event;

/** A server session: advertises `max_streams` concurrent streams and 64 KiB of header list;
 *  request bodies past `body_limit` bytes become `PM_H2_TOO_LARGE`. NULL when out of memory. */
pm_h2 *pm_h2_server_new(size_t body_limit, uint32_t max_streams);
/** A client session (sends the connection preface first); answer bodies are kept up to
 *  `body_limit` bytes (a longer one is cut there). NULL when out of memory. */
pm_h2 *pm_h2_client_new(size_t body_limit);
void pm_h2_free(pm_h2 *session);

/** Feeds bytes read from the peer. 0, or a negative libnghttp2 error: the connection is
 *  broken (write what `pm_h2_send` still gives, then close). */
int pm_h2_recv(pm_h2 *session, const uint8_t *data, size_t length);
/** The next event, 1 if there was one. */
int pm_h2_next_event(pm_h2 *session, pm_h2_event *event);
/** Bytes to write to the peer: sets `data` (valid until the next call) and returns their
 *  length; 0 when nothing is pending; negative on a fatal error. */
ssize_t pm_h2_send(pm_h2 *session, const uint8_t **data);
/** Whether the session still wants to read or write; 0 means the connection can close. */
int pm_h2_alive(pm_h2 *session);

/** The fields of a stream's request or final answer, pseudo-fields first, packed. */
size_t pm_h2_stream_fields(const pm_h2_stream *stream, const uint8_t **packed);
/** A stream's body as received. */
size_t pm_h2_stream_body(const pm_h2_stream *stream, const uint8_t **data);
/** Gives an event's stream record back. */
void pm_h2_release(pm_h2 *session, pm_h2_stream *stream);

/** Server: answers a stream with `count` packed fields (`:status` first) and a body (copied),
 *  sent with END_STREAM. 0, or negative when the stream is gone (the client reset it). */
int pm_h2_respond(
    pm_h2 *session, int32_t stream_id, const uint8_t *packed, size_t packed_length, size_t count,
    const uint8_t *body, size_t body_length);
/** Server: resets an open stream (`RST_STREAM` with `code`). */
int pm_h2_reset(pm_h2 *session, int32_t stream_id, uint32_t code);
/** Server: `GOAWAY` (no error) naming the last stream processed. */
int pm_h2_goaway(pm_h2 *session);

/** Client: opens a stream with `count` packed fields (pseudo-fields first) and a body
 *  (copied). Streams past the server's `SETTINGS_MAX_CONCURRENT_STREAMS` wait in libnghttp2's
 *  queue. Returns the stream's id, or negative (no stream ids left, out of memory). */
int32_t pm_h2_request(
    pm_h2 *session, const uint8_t *packed, size_t packed_length, size_t count, const uint8_t *body,
    size_t body_length);
/** Client: gives up a stream (`RST_STREAM` with `code`, or not sent at all if still queued). */
void pm_h2_cancel(pm_h2 *session, int32_t stream_id, uint32_t code);
/** Client: queues a `PING` (the peer's `PING` ACK keeps the connection known alive). */
int pm_h2_ping(pm_h2 *session);

#endif
