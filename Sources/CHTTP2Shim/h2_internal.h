/* What the shim's two files share (h2.c: the session and its callbacks; h2_records.c: the
 * packed fields, the stream records and the events). Not part of the shim's interface. */
#ifndef PUSHMEDIA_H2_INTERNAL_H
#define PUSHMEDIA_H2_INTERNAL_H

#include "pushmedia_h2.h"

#include <nghttp2/nghttp2.h>
#include <stddef.h>

#pragma GCC visibility push(hidden)

/* Bytes of a field's packed header: flags, name length, value length. */
#define PM_H2_FIELD_HEADER 9

typedef struct {
    uint8_t *bytes;
    size_t length, capacity;
} buffer;

/* A stream's record, the session's alone: created with the stream (server: its first HEADERS;
 * client: `pm_h2_request`), moved to the finished list once libnghttp2 is done with it, and freed
 * by `reap` alone. Events copy nothing out of it by reference: they take its buffers. */
typedef struct record {
    int32_t id;
    /* libnghttp2 closed the stream, or will never open it: `reap` frees the record. */
    int finished;
    /* Server: the request's body passed the limit. Client: the answer's did; the rest is dropped. */
    int too_large;
    /* Client: the answer's status once its :status field is seen; a 1xx is replaced. */
    int status;
    /* Client: the final answer's fields are complete (later fields are trailers, ignored). */
    int fields_done;
    /* DATA frames of no length without END_STREAM received. */
    uint32_t empty_data;
    /* Server: the request's fields passed max_header_list; the rest were dropped. */
    int fields_too_large;
    buffer fields, body;
    /* What is sent: a request's or an answer's body. */
    buffer out;
    size_t out_offset;
    struct record *previous, *next;
} record;

struct pm_h2 {
    nghttp2_session *session;
    int server;
    pm_h2_limits limits;
    /* PM_H2_EMPTY_DATA was raised (once per session). */
    int empty_data_raised;
    /* Events not yet taken, in order. */
    pm_h2_event **events;
    size_t event_count, event_capacity, event_next;
    /* The records libnghttp2 still knows (doubly linked), and those it is done with, to be freed
     * by `reap` (linked by `next`). */
    record *records;
    record *finished;
    pm_h2_load load;
};

/* A buffer able to hold `needed` bytes (0 when memory ran out). */
int h2_grow(buffer *b, size_t needed);
/* Appends a field in the packed layout that pm_h2_field_next decodes (0 when memory ran out). */
int h2_field_append(buffer *fields, const uint8_t *name, size_t name_length, const uint8_t *value,
                    size_t value_length, uint8_t flags);
/* A new stream record on the list of those libnghttp2 knows. */
record *h2_record_new(pm_h2 *h2, int32_t id);
/* What a record's body to send still holds, for the load. */
size_t h2_unsent(const record *r);
/* Frees a record's body to send. */
void h2_out_forget(pm_h2 *h2, record *r);
/* Hands a received buffer over (to an event), leaving the record's empty. */
buffer h2_take(pm_h2 *h2, buffer *b);
/* Frees the records libnghttp2 is done with; called when no libnghttp2 call is under way. */
void h2_reap(pm_h2 *h2);
/* libnghttp2 is done with `r`: off the list of those it knows, onto the finished one. */
void h2_finish(pm_h2 *h2, record *r);
/* A client's record whose HEADERS never went out: libnghttp2 holds no stream for it. */
record *h2_record_unopened(pm_h2 *h2, int32_t id);
/* Queues an event, taking the record's received fields and body when given. */
int h2_push_event(pm_h2 *h2, pm_h2_event_kind kind, int32_t id, uint32_t code, record *r, int with_body);

#pragma GCC visibility pop

#endif
