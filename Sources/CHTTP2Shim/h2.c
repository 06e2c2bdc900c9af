/* The relays' HTTP/2 sessions on libnghttp2; see pushmedia_h2.h. */
#include "h2_internal.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------- callbacks */

static int on_begin_headers(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
    pm_h2 *h2 = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    if (h2->server) {
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;
        record *r = h2_record_new(h2, frame->hd.stream_id);
        if (!r) return NGHTTP2_ERR_CALLBACK_FAILURE;
        if (nghttp2_session_set_stream_user_data(session, frame->hd.stream_id, r) != 0) h2_finish(h2, r);
        return 0;
    }
    record *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (r && !r->fields_done && r->status > 0 && r->status < 200) {
        /* The final answer after an interim (1xx) one. */
        h2->load.received_bytes -= r->fields.length;
        r->fields.length = 0;
        r->status = 0;
    }
    return 0;
}

static int on_header(
    nghttp2_session *session, const nghttp2_frame *frame, const uint8_t *name, size_t name_length,
    const uint8_t *value, size_t value_length, uint8_t flags, void *user_data) {
    pm_h2 *h2 = user_data;
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    record *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!r || r->fields_done || r->fields_too_large) return 0;
    if (h2->server && frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0; /* trailers */
    if (r->fields.length + PM_H2_FIELD_HEADER + name_length + value_length > h2->limits.max_header_list) {
        /* Nothing more is kept; the caller is told once the fields end. */
        r->fields_too_large = 1;
        return 0;
    }
    size_t before = r->fields.length;
    uint8_t packed_flags = (flags & NGHTTP2_NV_FLAG_NO_INDEX) ? PM_H2_NO_INDEX : 0;
    if (!h2_field_append(&r->fields, name, name_length, value, value_length, packed_flags)) {
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    h2->load.received_bytes += r->fields.length - before;
    if (!h2->server && name_length == 7 && memcmp(name, ":status", 7) == 0) {
        int status = 0;
        for (size_t i = 0; i < value_length && i < 3; i++) status = status * 10 + (value[i] - '0');
        r->status = status;
    }
    return 0;
}

static int on_data_chunk(
    nghttp2_session *session, uint8_t flags, int32_t stream_id, const uint8_t *data, size_t length,
    void *user_data) {
    pm_h2 *h2 = user_data;
    record *r = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!r || r->too_large || r->fields_too_large) return 0;
    if (r->body.length + length > h2->limits.body_limit) {
        r->too_large = 1;
        if (!h2->server) return 0; /* an answer: what came before the limit is kept, nothing after */
        return h2_push_event(h2, PM_H2_TOO_LARGE, stream_id, 0, r, 0);
    }
    if (!h2_grow(&r->body, r->body.length + length)) return NGHTTP2_ERR_CALLBACK_FAILURE;
    memcpy(r->body.bytes + r->body.length, data, length);
    r->body.length += length;
    h2->load.received_bytes += length;
    return 0;
}

static int on_frame_recv(nghttp2_session *session, const nghttp2_frame *frame, void *user_data) {
    pm_h2 *h2 = user_data;
    if (frame->hd.type == NGHTTP2_GOAWAY) {
        return h2_push_event(h2, PM_H2_GOAWAY, frame->goaway.last_stream_id, frame->goaway.error_code, NULL, 0);
    }
    if (frame->hd.type == NGHTTP2_SETTINGS && !h2->server && !(frame->hd.flags & NGHTTP2_FLAG_ACK)) {
        return h2_push_event(h2, PM_H2_SETTINGS, 0, 0, NULL, 0);
    }
    if (frame->hd.type == NGHTTP2_HEADERS && !h2->server) {
        record *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (r && r->status >= 200) r->fields_done = 1;
        return 0;
    }
    if (frame->hd.type == NGHTTP2_DATA && frame->hd.length == 0 && !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        record *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
        if (r && ++r->empty_data > h2->limits.max_empty_data && !h2->empty_data_raised) {
            h2->empty_data_raised = 1;
            return h2_push_event(h2, PM_H2_EMPTY_DATA, frame->hd.stream_id, 0, NULL, 0);
        }
        return 0;
    }
    if (!h2->server) return 0;
    record *r = nghttp2_session_get_stream_user_data(session, frame->hd.stream_id);
    if (!r || r->too_large) return 0;
    if (r->fields_too_large) {
        /* Told once, when the header block ends; the stream's body is dropped. */
        if (frame->hd.type != NGHTTP2_HEADERS || r->fields_done) return 0;
        r->fields_done = 1;
        return h2_push_event(h2, PM_H2_FIELDS_TOO_LARGE, frame->hd.stream_id, 0, r, 0);
    }
    if (!(frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) return 0;
    if (frame->hd.type != NGHTTP2_HEADERS && frame->hd.type != NGHTTP2_DATA) return 0;
    return h2_push_event(h2, PM_H2_REQUEST, frame->hd.stream_id, 0, r, 1);
}

static int on_stream_close(nghttp2_session *session, int32_t stream_id, uint32_t error_code, void *user_data) {
    pm_h2 *h2 = user_data;
    record *r = nghttp2_session_get_stream_user_data(session, stream_id);
    if (!r) return 0;
    h2_finish(h2, r);
    if (h2->server) return 0;
    if (error_code == NGHTTP2_REFUSED_STREAM) return h2_push_event(h2, PM_H2_REFUSED, stream_id, error_code, NULL, 0);
    return h2_push_event(h2, PM_H2_CLOSED, stream_id, error_code, r, 1);
}

/* A request whose HEADERS did not go out: refused by a GOAWAY, the session closing, or cancelled
 * while queued. One libnghttp2 had opened is closed next (`on_stream_close` says so); one never
 * opened ends here. */
static int on_frame_not_send(nghttp2_session *session, const nghttp2_frame *frame, int error, void *user_data) {
    pm_h2 *h2 = user_data;
    (void)session;
    (void)error;
    if (h2->server || frame->hd.type != NGHTTP2_HEADERS) return 0;
    record *r = h2_record_unopened(h2, frame->hd.stream_id);
    if (!r) return 0;
    h2_finish(h2, r);
    return h2_push_event(h2, PM_H2_REFUSED, frame->hd.stream_id, 0, NULL, 0);
}

static ssize_t read_out(
    nghttp2_session *session, int32_t stream_id, uint8_t *buffer, size_t length, uint32_t *flags,
    nghttp2_data_source *source, void *user_data) {
    (void)session;
    (void)stream_id;
    pm_h2 *h2 = user_data;
    record *r = source->ptr;
    size_t left = h2_unsent(r);
    size_t copied = left < length ? left : length;
    memcpy(buffer, r->out.bytes + r->out_offset, copied);
    r->out_offset += copied;
    h2->load.waiting_bytes -= copied;
    h2->load.sent_bytes += copied;
    if (h2_unsent(r) == 0) {
        *flags |= NGHTTP2_DATA_FLAG_EOF;
        if (copied > 0) h2->load.waiting--;
    }
    return (ssize_t)copied;
}

/* ------------------------------------------------------------------ session */

static pm_h2 *session_new(int server, const pm_h2_limits *limits) {
    pm_h2 *h2 = calloc(1, sizeof *h2);
    if (!h2) return NULL;
    h2->server = server;
    h2->limits = *limits;
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
    if (!server) nghttp2_option_set_peer_max_concurrent_streams(option, limits->peer_max_streams_initial);
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

/* A session of either side, with its SETTINGS queued and the connection's receive window set:
 * the server advertises its bounds, the client also refuses server push. */
static pm_h2 *session_open(int server, const pm_h2_limits *limits) {
    pm_h2 *h2 = session_new(server, limits);
    if (!h2) return NULL;
    nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, limits->max_streams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, limits->max_header_list},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, limits->stream_window},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    size_t count = server ? 3 : 4;
    if (nghttp2_submit_settings(h2->session, NGHTTP2_FLAG_NONE, settings, count) != 0 ||
        nghttp2_session_set_local_window_size(h2->session, NGHTTP2_FLAG_NONE, 0, (int32_t)limits->connection_window) !=
            0) {
        pm_h2_free(h2);
        return NULL;
    }
    return h2;
}

pm_h2 *pm_h2_server_new(const pm_h2_limits *limits) { return session_open(1, limits); }

pm_h2 *pm_h2_client_new(const pm_h2_limits *limits) { return session_open(0, limits); }

void pm_h2_free(pm_h2 *h2) {
    if (!h2) return;
    /* libnghttp2 calls no callback while it deletes the session: after it, every record is done. */
    nghttp2_session_del(h2->session);
    while (h2->records) h2_finish(h2, h2->records);
    h2_reap(h2);
    for (size_t i = h2->event_next; i < h2->event_count; i++) pm_h2_event_free(h2->events[i]);
    free(h2->events);
    free(h2);
}

int pm_h2_recv(pm_h2 *h2, const uint8_t *data, size_t length) {
    ssize_t read = nghttp2_session_mem_recv(h2->session, data, length);
    h2_reap(h2);
    return read < 0 ? (int)read : 0;
}

pm_h2_event *pm_h2_next_event(pm_h2 *h2) {
    if (h2->event_next == h2->event_count) {
        h2->event_next = h2->event_count = 0;
        return NULL;
    }
    return h2->events[h2->event_next++];
}

ssize_t pm_h2_send(pm_h2 *h2, const uint8_t **data) {
    ssize_t length = nghttp2_session_mem_send(h2->session, data);
    h2_reap(h2);
    return length;
}

int pm_h2_alive(pm_h2 *h2) {
    return nghttp2_session_want_read(h2->session) || nghttp2_session_want_write(h2->session);
}

void pm_h2_get_load(pm_h2 *h2, pm_h2_load *load) {
    *load = h2->load;
    load->outbound_frames = nghttp2_session_get_outbound_queue_size(h2->session);
}

/* Gives a record the body it sends. */
static int set_out(pm_h2 *h2, record *r, const uint8_t *body, size_t body_length) {
    h2_out_forget(h2, r);
    if (body_length == 0) return 1;
    r->out.bytes = malloc(body_length);
    if (!r->out.bytes) return 0;
    memcpy(r->out.bytes, body, body_length);
    r->out.length = r->out.capacity = body_length;
    h2->load.waiting++;
    h2->load.waiting_bytes += body_length;
    return 1;
}

int pm_h2_respond(
    pm_h2 *h2, int32_t stream_id, const pm_h2_field *fields, size_t count, const uint8_t *body, size_t body_length) {
    record *r = nghttp2_session_get_stream_user_data(h2->session, stream_id);
    if (!r || r->finished) return NGHTTP2_ERR_STREAM_CLOSED;
    if (!set_out(h2, r, body, body_length)) return NGHTTP2_ERR_NOMEM;
    nghttp2_data_provider provider = {.source = {.ptr = r}, .read_callback = read_out};
    int result =
        nghttp2_submit_response(h2->session, stream_id, (const nghttp2_nv *)fields, count, body_length ? &provider : NULL);
    if (result != 0) h2_out_forget(h2, r);
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

int pm_h2_terminate(pm_h2 *h2, uint32_t code) { return nghttp2_session_terminate_session(h2->session, code); }

int32_t pm_h2_request(pm_h2 *h2, const pm_h2_field *fields, size_t count, const uint8_t *body, size_t body_length) {
    record *r = h2_record_new(h2, 0);
    if (!r) return NGHTTP2_ERR_NOMEM;
    int32_t result = NGHTTP2_ERR_NOMEM;
    if (set_out(h2, r, body, body_length)) {
        nghttp2_data_provider provider = {.source = {.ptr = r}, .read_callback = read_out};
        result = nghttp2_submit_request(
            h2->session, NULL, (const nghttp2_nv *)fields, count, body_length ? &provider : NULL, r);
    }
    if (result > 0) {
        r->id = result;
    } else {
        h2_finish(h2, r);
        h2_reap(h2);
    }
    return result;
}

void pm_trim_memory(void) { malloc_trim(0); }

int pm_h2_ping(pm_h2 *h2) { return nghttp2_submit_ping(h2->session, NGHTTP2_FLAG_NONE, NULL); }

uint32_t pm_h2_peer_max_streams(pm_h2 *h2) {
    return nghttp2_session_get_remote_settings(h2->session, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS);
}
