/* The relays' HTTP/2 sessions on libnghttp2; see pushmedia_h2.h. */
#include "pushmedia_h2.h"

#include <nghttp2/nghttp2.h>
#include <stdlib.h>
#include <string.h>

/* The largest header list accepted, as advertised in SETTINGS_MAX_HEADER_LIST_SIZE. */
#define PM_H2_MAX_FIELDS_BYTES (64 * 1024)
/* Bytes of a field's packed header: flags, name length, value length. */
#define PM_H2_FIELD_HEADER 9

struct pm_h2_stream {
    int32_t id;
    /* An event handed out refers to the record: freed by `pm_h2_release`, not by closing. */
    int held;
    /* libnghttp2 closed the stream (or never opened it). */
    int closed;
    /* Client: the HEADERS frame went out. */
    int opened;
    /* Client: given up before it went out. */
    int cancelled;
    /* Client: its HEADERS was never sent; `PM_H2_REFUSED` is already queued (unless cancelled). */
    int refused;
    /* Server: the request's body passed the limit. Client: the answer's did; the rest is dropped. */
    int too_large;
    int ended;
    /* Client: the answer's status once its :status field is seen; a 1xx is replaced. */
    int status;
    /* Client: the final answer's fields are complete (later fields are trailers, ignored). */
    int fields_done;
    uint8_t *fields;
    size_t fields_length, fields_capacity;
    uint8_t *body;
    size_t body_length, body_capacity;
    /* What is sent: a request's or an answer's body. */
    uint8_t *out;
    size_t out_length, out_offset;
    pm_h2_stream *previous, *next;
};

struct pm_h2 {
    nghttp2_session *session;
    int server;
    int dying;
    size_t body_limit;
    pm_h2_event *events;
    size_t event_count, event_capacity, event_next;
    /* Every record not yet freed. */
    pm_h2_stream *streams;
};

/* ------------------------------------------------------------------ records */

static pm_h2_stream *stream_new(pm_h2 *h2, int32_t id) {
    pm_h2_stream *stream = calloc(1, sizeof *stream);
    if (!stream) return NULL;
    stream->id = id;
    stream->next = h2->streams;
    if (h2->streams) h2->streams->previous = stream;
    h2->streams = stream;
    return stream;
}

static void stream_free(pm_h2 *h2, pm_h2_stream *stream) {
    if (stream->previous) stream->previous->next = stream->next;
    else h2->streams = stream->next;
    if (stream->next) stream->next->previous = stream->previous;
    free(stream->fields);
    free(stream->body);
    free(stream->out);
    free(stream);
}

static pm_h2_stream *stream_find(pm_h2 *h2, int32_t id) {
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(h2->session, id);
    if (stream) return stream;
    for (stream = h2->streams; stream; stream = stream->next) {
        if (stream->id == id && !stream->closed) return stream;
    }
    return NULL;
}

static int grow(uint8_t **buffer, size_t *capacity, size_t needed) {
    if (needed <= *capacity) return 1;
    size_t capacity_new = *capacity ? *capacity : 256;
    while (capacity_new < needed) capacity_new *= 2;
    uint8_t *grown = realloc(*buffer, capacity_new);
    if (!grown) return 0;
    *buffer = grown;
    *capacity = capacity_new;
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

static int push_event(pm_h2 *h2, pm_h2_event_kind kind, int32_t id, uint32_t code, pm_h2_stream *stream) {
    if (h2->event_count == h2->event_capacity) {
        size_t capacity = h2->event_capacity ? h2->event_capacity * 2 : 64;
        pm_h2_event *grown = realloc(h2->events, capacity * sizeof *grown);
        if (!grown) return NGHTTP2_ERR_CALLBACK_FAILURE;
        h2->events = grown;
        h2->event_capacity = capacity;
    }
    h2->events[h2->event_count++] = (pm_h2_event){.kind = kind, .stream_id = id, .code = code, .stream = stream};
    if (stream) stream->held = 1;
    return 0;
}

/* ---------------------------------------------------------------- callbacks */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
    pm_h2 *h2 = user_data;
    if (h2->dying || frame->hd.type != NGHTTP2_HEADERS) return 0;
    if (h2->server) {
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
        pm_h2_stream *stream = stream_new(h2, frame->hd.stream_id);
        if (!stream) return NGHTTP2_ERR_CALLBACK_FAILURE;
        nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, stream);
        return 0;
    }
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (stream && !stream->fields_done && stream->status > 0 && stream->status < 200) {
        /* The final answer after an interim (1xx) one. */
        stream->fields_length = 0;
        stream->status = 0;
    }
    return 0;
}

static int on_header(
    nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t name_length,
    const uint8_t *value, size_t value_length, uint8_t flags, void *user_data) {
    pm_h2 *h2 = user_data;
    if (h2->dying || frame->hd.type != NGHTTP2_HEADERS) return 0;
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!stream || stream->fields_done) return 0;
    if (h2->server && frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers */
    size_t needed = stream->fields_length + PM_H2_FIELD_HEADER + name_length + value_length;
    if (needed > PM_H2_MAX_FIELDS_BYTES) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    if (!grow(&stream->fields, &stream->fields_capacity, needed)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    uint8_t *at = stream->fields + stream->fields_length;
    at[0] = (flags & NGHTTP2_NV_FLAG_NO_INDEX) ? PM_H2_NO_INDEX : 0;
    put32(at + 1, (uint32_t)name_length);
    put32(at + 5, (uint32_t)value_length);
    memcpy(at + PM_H2_FIELD_HEADER, name, name_length);
    memcpy(at + PM_H2_FIELD_HEADER + name_length, value, value_length);
    stream->fields_length = needed;
    if (!h2->server && name_length == 7 && memcmp(name, ":status", 7) == 0) {
        int status = 0;
        for (size_t i = 0; i < value_length && i < 3; i++) status = status * 10 + (value[i] - '0');
        stream->status = status;
    }
    return 0;
}

static int on_data_chunk(
    nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t length,
    void *user_data) {
    pm_h2 *h2 = user_data;
    if (h2->dying) return 0;
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!stream || stream->too_large) return 0;
    if (stream->body_length + length > h2->body_limit) {
        stream->too_large = 1;
        if (!h2->server) return 0; /* an answer: what came before the limit is kept, nothing after */
        free(stream->body);
        stream->body = NULL;
        stream->body_length = stream->body_capacity = 0;
        return push_event(h2, PM_H2_TOO_LARGE, stream_id, 0, stream);
    }
    if (!grow(&stream->body, &stream->body_capacity, stream->body_length + length)) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    memcpy(stream->body + stream->body_length, data, length);
    stream->body_length += length;
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
    pm_h2 *h2 = user_data;
    if (h2->dying) return 0;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        return push_event(h2, PM_H2_GOAWAY, frame->goaway.last_stream_id, frame->goaway.error_code, NULL);
    }
    if (frame->hd.type == NGHTTP2_HEADERS && !h2->server) {
        pm_h2_stream *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (stream && stream->status >= 200) stream->fields_done = 1;
        return 0;
    }
    if (!h2->server || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!stream || stream->too_large || stream->ended) return 0;
    stream->ended = 1;
    return push_event(h2, PM_H2_REQUEST, frame->hd.stream_id, 0, stream);
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data) {
    pm_h2 *h2 = user_data;
    if (h2->dying) return 0;
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!stream) return 0;
    stream->closed = 1;
    if (!h2->server && !stream->cancelled && !stream->refused) {
        if (error_code != NGHTTP2_REFUSED_STREAM) return push_event(h2, PM_H2_CLOSED, stream_id, error_code, stream);
        stream_free(h2, stream);
        return push_event(h2, PM_H2_REFUSED, stream_id, error_code, NULL);
    }
    if (!stream->held) stream_free(h2, stream);
    return 0;
}

static int before_frame_send(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
    pm_h2 *h2 = user_data;
    if (h2->server || frame->hd.type != NGHTTP2_HEADERS) return 0;
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!stream) return 0;
    if (stream->cancelled) return NGHTTP2_ERR_CANCEL;
    stream->opened = 1;
    return 0;
}

static int on_frame_not_send(nghttp2_session *session, const nghttp2_frame *frame, int error, void *user_data) {
    pm_h2 *h2 = user_data;
    if (h2->dying || h2->server || frame->hd.type != NGHTTP2_HEADERS) return 0;
    pm_h2_stream *stream = NULL;
    for (pm_h2_stream *each = h2->streams; each; each = each->next) {
        if (each->id == frame->hd.stream_id && !each->closed && !each->refused) {
            stream = each;
            break;
        }
    }
    if (!stream) return 0;
    stream->refused = 1;
    int cancelled = stream->cancelled;
    /* A stream libnghttp2 already opened (the HEADERS was cancelled, or the session is closing)
     * is closed next, and `on_stream_close` frees its record; one never opened (a GOAWAY came
     * first) has no other end. */
    if (nghttp2_session_get_stream_user_data(session, frame->hd.stream_id) != stream) {
        stream->closed = 1;
        stream_free(h2, stream);
    }
    return cancelled ? 0 : push_event(h2, PM_H2_REFUSED, frame->hd.stream_id, 0, NULL);
}

static ssize_t read_out(
    nghttp2_session *session, int32_t stream_id, uint8_t *buffer, size_t length, uint32_t *flags,
    nghttp2_data_source *source, void *user_data) {
    pm_h2_stream *stream = source->ptr;
    size_t left = stream->out_length - stream->out_offset;
    size_t copied = left < length ? left : length;
    memcpy(buffer, stream->out + stream->out_offset, copied);
    stream->out_offset += copied;
    if (stream->out_offset == stream->out_length) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return (ssize_t)copied;
}

/* ------------------------------------------------------------------ session */

static pm_h2 *session_new(int server, size_t body_limit) {
    pm_h2 *h2 = calloc(1, sizeof *h2);
    if (!h2) return NULL;
    h2->server = server;
    h2->body_limit = body_limit;
    nghttp2_session_callbacks *callbacks;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) {
        free(h2);
        return NULL;
    }
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, on_stream_close);
    nghttp2_session_callbacks_set_before_frame_send_callback(callbacks, before_frame_send);
    nghttp2_session_callbacks_set_on_frame_not_send_callback(callbacks, on_frame_not_send);
    nghttp2_option *option;
    if (nghttp2_option_new(&option) != 0) {
        nghttp2_session_callbacks_del(callbacks);
        free(h2);
        return NULL;
    }
    /* HTTP/1.1-style validation of fields (RFC 9113 section 8) stays on: a malformed request is
     * reset before it reaches the relay. Closed streams are forgotten at once (no priority tree). */
    nghttp2_option_set_no_closed_streams(option, 1);
    /* Until the server's SETTINGS arrive, one stream at a time: Apple starts a connection at
     * SETTINGS_MAX_CONCURRENT_STREAMS 1, and refuses streams over it. */
    if (!server) nghttp2_option_set_peer_max_concurrent_streams(option, 1);
    int failed = server ? nghttp2_session_server_new2(&h2->session, callbacks, h2, option)
                        : nghttp2_session_client_new2(&h2->session, callbacks, h2, option);
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(callbacks);
    if (failed) {
        free(h2);
        return NULL;
    }
    return h2;
}

pm_h2 *pm_h2_server_new(size_t body_limit, uint32_t max_streams) {
    pm_h2 *h2 = session_new(1, body_limit);
    if (!h2) return NULL;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, PM_H2_MAX_FIELDS_BYTES},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 256 * 1024},
    };
    if (nghttp2_submit_settings(h2->session, NGHTTP2_FLAG_NONE, settings, 3) != 0 ||
        nghttp2_session_set_local_window_size(h2->session, NGHTTP2_FLAG_NONE, 0, 1 << 24) != 0) {
        pm_h2_free(h2);
        return NULL;
    }
    return h2;
}

pm_h2 *pm_h2_client_new(size_t body_limit) {
    pm_h2 *h2 = session_new(0, body_limit);
    if (!h2) return NULL;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 100},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 1 << 20},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, PM_H2_MAX_FIELDS_BYTES},
    };
    if (nghttp2_submit_settings(h2->session, NGHTTP2_FLAG_NONE, settings, 4) != 0 ||
        nghttp2_session_set_local_window_size(h2->session, NGHTTP2_FLAG_NONE, 0, 1 << 24) != 0) {
        pm_h2_free(h2);
        return NULL;
    }
    return h2;
}

void pm_h2_free(pm_h2 *h2) {
    if (!h2) return;
    h2->dying = 1;
    nghttp2_session_del(h2->session);
    while (h2->streams) stream_free(h2, h2->streams);
    free(h2->events);
    free(h2);
}

int pm_h2_recv(pm_h2 *h2, const uint8_t *data, size_t length) {
    ssize_t read = nghttp2_session_mem_recv(h2->session, data, length);
    return read < 0 ? (int)read : 0;
}

int pm_h2_next_event(pm_h2 *h2, pm_h2_event *event) {
    if (h2->event_next == h2->event_count) {
        h2->event_next = h2->event_count = 0;
        return 0;
    }
    *event = h2->events[h2->event_next++];
    return 1;
}

ssize_t pm_h2_send(pm_h2 *h2, const uint8_t **data) { return nghttp2_session_mem_send(h2->session, data); }

int pm_h2_alive(pm_h2 *h2) {
    return nghttp2_session_want_read(h2->session) || nghttp2_session_want_write(h2->session);
}

size_t pm_h2_stream_fields(const pm_h2_stream *stream, const uint8_t **packed) {
    *packed = stream->fields;
    return stream->fields_length;
}

size_t pm_h2_stream_body(const pm_h2_stream *stream, const uint8_t **data) {
    *data = stream->body;
    return stream->body_length;
}

void pm_h2_release(pm_h2 *h2, pm_h2_stream *stream) {
    stream->held = 0;
    if (stream->closed) {
        stream_free(h2, stream);
        return;
    }
    /* What was received is no longer needed; the stream stays for what is sent. */
    free(stream->fields);
    free(stream->body);
    stream->fields = stream->body = NULL;
    stream->fields_length = stream->fields_capacity = stream->body_length = stream->body_capacity = 0;
}

/* The packed fields as libnghttp2's name/value pairs, pointing into `packed`. NULL when the
 * layout is broken or memory is short. */
static nghttp2_nv *unpack(const uint8_t *packed, size_t packed_length, size_t count, nghttp2_nv *inline_nv,
                          size_t inline_count) {
    nghttp2_nv *nv = count <= inline_count ? inline_nv : malloc(count * sizeof *nv);
    if (!nv) return NULL;
    size_t at = 0;
    for (size_t i = 0; i < count; i++) {
        if (packed_length - at < PM_H2_FIELD_HEADER) goto broken;
        uint8_t flags = packed[at];
        uint32_t name_length = get32(packed + at + 1), value_length = get32(packed + at + 5);
        at += PM_H2_FIELD_HEADER;
        if (packed_length - at < (size_t)name_length + value_length) goto broken;
        nv[i] = (nghttp2_nv){
            .name = (uint8_t *)packed + at,
            .namelen = name_length,
            .value = (uint8_t *)packed + at + name_length,
            .valuelen = value_length,
            .flags = (flags & PM_H2_NO_INDEX) ? NGHTTP2_NV_FLAG_NO_INDEX : NGHTTP2_NV_FLAG_NONE,
        };
        at += (size_t)name_length + value_length;
    }
    return nv;
broken:
    if (nv != inline_nv) free(nv);
    return NULL;
}

static int set_out(pm_h2_stream *stream, const uint8_t *body, size_t body_length) {
    free(stream->out);
    stream->out = NULL;
    stream->out_length = stream->out_offset = 0;
    if (body_length == 0) return 1;
    stream->out = malloc(body_length);
    if (!stream->out) return 0;
    memcpy(stream->out, body, body_length);
    stream->out_length = body_length;
    return 1;
}

int pm_h2_respond(
    pm_h2 *h2, int32_t stream_id, const uint8_t *packed, size_t packed_length, size_t count, const uint8_t *body,
    size_t body_length) {
    pm_h2_stream *stream = nghttp2_session_get_stream_user_data(h2->session, stream_id);
    if (!stream || stream->closed) return NGHTTP2_ERR_STREAM_CLOSED;
    nghttp2_nv inline_nv[32];
    nghttp2_nv *nv = unpack(packed, packed_length, count, inline_nv, 32);
    if (!nv) return NGHTTP2_ERR_INVALID_ARGUMENT;
    int result = NGHTTP2_ERR_NOMEM;
    if (set_out(stream, body, body_length)) {
        nghttp2_data_provider provider = {.source = {.ptr = stream}, .read_callback = read_out};
        result = nghttp2_submit_response(h2->session, stream_id, nv, count, body_length ? &provider : NULL);
    }
    if (nv != inline_nv) free(nv);
    return result;
}

int pm_h2_reset(pm_h2 *h2, int32_t stream_id, uint32_t code) {
    return nghttp2_submit_rst_stream(h2->session, NGHTTP2_FLAG_NONE, stream_id, code);
}

int pm_h2_goaway(pm_h2 *h2) {
    return nghttp2_submit_goaway(
        h2->session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(h2->session), NGHTTP2_NO_ERROR, NULL,
        0);
}

int32_t pm_h2_request(
    pm_h2 *h2, const uint8_t *packed, size_t packed_length, size_t count, const uint8_t *body, size_t body_length) {
    nghttp2_nv inline_nv[32];
    nghttp2_nv *nv = unpack(packed, packed_length, count, inline_nv, 32);
    if (!nv) return NGHTTP2_ERR_INVALID_ARGUMENT;
    int32_t result = NGHTTP2_ERR_NOMEM;
    pm_h2_stream *stream = stream_new(h2, 0);
    if (stream && set_out(stream, body, body_length)) {
        nghttp2_data_provider provider = {.source = {.ptr = stream}, .read_callback = read_out};
        result = nghttp2_submit_request(h2->session, NULL, nv, count, body_length ? &provider : NULL, stream);
    }
    if (result > 0) {
        stream->id = result;
    } else if (stream) {
        stream_free(h2, stream);
    }
    if (nv != inline_nv) free(nv);
    return result;
}

void pm_h2_cancel(pm_h2 *h2, int32_t stream_id, uint32_t code) {
    pm_h2_stream *stream = stream_find(h2, stream_id);
    if (!stream) return;
    stream->cancelled = 1;
    if (stream->opened) nghttp2_submit_rst_stream(h2->session, NGHTTP2_FLAG_NONE, stream_id, code);
}

int pm_h2_ping(pm_h2 *h2) { return nghttp2_submit_ping(h2->session, NGHTTP2_FLAG_NONE, NULL); }
