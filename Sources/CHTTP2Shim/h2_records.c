/* The relays' HTTP/2 shim: packed fields, stream records and events; see h2_internal.h. */
#include "h2_internal.h"

#include <stdlib.h>
#include <string.h>

/* pm_h2_field is handed to libnghttp2 as nghttp2_nv. */
_Static_assert(sizeof(pm_h2_field) == sizeof(nghttp2_nv), "pm_h2_field is not laid out as nghttp2_nv");
_Static_assert(offsetof(pm_h2_field, name) == offsetof(nghttp2_nv, name), "name");
_Static_assert(offsetof(pm_h2_field, value) == offsetof(nghttp2_nv, value), "value");
_Static_assert(offsetof(pm_h2_field, name_length) == offsetof(nghttp2_nv, namelen), "namelen");
_Static_assert(offsetof(pm_h2_field, value_length) == offsetof(nghttp2_nv, valuelen), "valuelen");
_Static_assert(offsetof(pm_h2_field, flags) == offsetof(nghttp2_nv, flags), "flags");

/* ------------------------------------------------------------------ buffers */

int h2_grow(buffer *b, size_t needed) {
    if (needed <= b->capacity) return 1;
    /* 1 KiB to start: a request's fields with a provider token fit in one allocation. */
    size_t capacity = b->capacity ? b->capacity : 1024;
    while (capacity < needed) capacity *= 2;
    uint8_t *grown = realloc(b->bytes, capacity);
    if (!grown) return 0;
    b->bytes = grown;
    b->capacity = capacity;
    return 1;
}

static void put32(uint8_t *at, uint32_t value) {
    at[0] = (uint8_t)value;
    at[1] = (uint8_t)(value >> 8);
    at[2] = (uint8_t)(value >> 16);
    at[3] = (uint8_t)(value >> 24);
}

static uint32_t get32(const uint8_t *at) {
    return (uint32_t)at[0] | (uint32_t)at[1] << 8 | (uint32_t)at[2] << 16 | (uint32_t)at[3] << 24;
}

/* The encoder of the packed layout (pm_h2_field_next is its decoder). */
int h2_field_append(buffer *fields, const uint8_t *name, size_t name_length, const uint8_t *value,
                        size_t value_length, uint8_t flags) {
    size_t needed = fields->length + PM_H2_FIELD_HEADER + name_length + value_length;
    if (!h2_grow(fields, needed)) return 0;
    uint8_t *at = fields->bytes + fields->length;
    at[0] = flags;
    put32(at + 1, (uint32_t)name_length);
    put32(at + 5, (uint32_t)value_length);
    memcpy(at + PM_H2_FIELD_HEADER, name, name_length);
    memcpy(at + PM_H2_FIELD_HEADER + name_length, value, value_length);
    fields->length = needed;
    return 1;
}

int pm_h2_field_next(const uint8_t *packed, size_t length, size_t *offset, pm_h2_field *field) {
    size_t at = *offset;
    if (at >= length) return 0;
    if (length - at < PM_H2_FIELD_HEADER) return -1;
    size_t name_length = get32(packed + at + 1), value_length = get32(packed + at + 5);
    if (length - at - PM_H2_FIELD_HEADER < name_length ||
        length - at - PM_H2_FIELD_HEADER - name_length < value_length) {
        return -1;
    }
    field->flags = packed[at] & PM_H2_NO_INDEX;
    field->name = packed + at + PM_H2_FIELD_HEADER;
    field->name_length = name_length;
    field->value = field->name + name_length;
    field->value_length = value_length;
    *offset = at + PM_H2_FIELD_HEADER + name_length + value_length;
    return 1;
}

/* ------------------------------------------------------------------ records */

record *h2_record_new(pm_h2 *h2, int32_t id) {
    record *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->id = id;
    r->next = h2->records;
    if (h2->records) h2->records->previous = r;
    h2->records = r;
    h2->load.streams++;
    return r;
}

/* What a record's body to send still holds, for the load. */
size_t h2_unsent(const record *r) { return r->out.length - r->out_offset; }

void h2_out_forget(pm_h2 *h2, record *r) {
    if (h2_unsent(r) > 0) {
        h2->load.waiting--;
        h2->load.waiting_bytes -= h2_unsent(r);
    }
    free(r->out.bytes);
    r->out = (buffer){0};
    r->out_offset = 0;
}

/* Hands a received buffer over (to an event), leaving the record's empty. */
buffer h2_take(pm_h2 *h2, buffer *b) {
    buffer taken = *b;
    h2->load.received_bytes -= taken.length;
    *b = (buffer){0};
    return taken;
}

/* The only place a record is freed (it is on the finished list). */
static void record_free(pm_h2 *h2, record *r) {
    free(h2_take(h2, &r->fields).bytes);
    free(h2_take(h2, &r->body).bytes);
    h2_out_forget(h2, r);
    h2->load.streams--;
    free(r);
}

/* Frees the records libnghttp2 is done with; called when no libnghttp2 call is under way. */
void h2_reap(pm_h2 *h2) {
    record *r = h2->finished;
    h2->finished = NULL;
    while (r) {
        record *next = r->next;
        record_free(h2, r);
        r = next;
    }
}

/* libnghttp2 is done with `r`: off the list of those it knows, onto the finished one. */
void h2_finish(pm_h2 *h2, record *r) {
    if (r->finished) return;
    r->finished = 1;
    if (r->previous) r->previous->next = r->next;
    else h2->records = r->next;
    if (r->next) r->next->previous = r->previous;
    r->previous = NULL;
    r->next = h2->finished;
    h2->finished = r;
}

/* A client's record whose HEADERS never went out: libnghttp2 holds no stream for it. */
record *h2_record_unopened(pm_h2 *h2, int32_t id) {
    if (nghttp2_session_find_stream(h2->session, id)) return NULL;
    for (record *r = h2->records; r; r = r->next) {
        if (r->id == id && !r->finished) return r;
    }
    return NULL;
}

/* ------------------------------------------------------------------- events */

/* Queues an event, taking the record's received fields and body when given. */
int h2_push_event(pm_h2 *h2, pm_h2_event_kind kind, int32_t id, uint32_t code, record *r, int with_body) {
    if (h2->event_count == h2->event_capacity) {
        size_t capacity = h2->event_capacity ? h2->event_capacity * 2 : 64;
        pm_h2_event **grown = realloc(h2->events, capacity * sizeof *grown);
        if (!grown) return NGHTTP2_ERR_CALLBACK_FAILURE;
        h2->events = grown;
        h2->event_capacity = capacity;
    }
    pm_h2_event *event = calloc(1, sizeof *event);
    if (!event) return NGHTTP2_ERR_CALLBACK_FAILURE;
    event->kind = kind;
    event->stream_id = id;
    event->code = code;
    if (r) {
        buffer fields = h2_take(h2, &r->fields);
        event->fields = fields.bytes;
        event->fields_length = fields.length;
        buffer body = h2_take(h2, &r->body);
        if (with_body) {
            event->body = body.bytes;
            event->body_length = body.length;
        } else {
            free(body.bytes);
        }
    }
    h2->events[h2->event_count++] = event;
    return 0;
}

void pm_h2_event_free(pm_h2_event *event) {
    if (!event) return;
    free((void *)event->fields);
    free((void *)event->body);
    free(event);
}

