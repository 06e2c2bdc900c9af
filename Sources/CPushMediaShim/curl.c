/* libcurl: the easy-handle wrappers and the transfer callbacks (body sink, upload source,
 * progress and deadline, address check before each connection). */
#define _GNU_SOURCE
#include "pushmedia_shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static __thread CURL *thread_handle = NULL;
static __thread uint64_t thread_handle_tag = 0;

CURL *pm_curl_thread_handle(uint64_t policy_tag) {
    if (thread_handle != NULL && thread_handle_tag != policy_tag) {
        curl_easy_cleanup(thread_handle);
        thread_handle = NULL;
    }
    if (thread_handle == NULL) {
        thread_handle = curl_easy_init();
        thread_handle_tag = policy_tag;
    } else {
        curl_easy_reset(thread_handle);
    }
    return thread_handle;
}

CURLcode pm_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pm_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pm_curl_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pm_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pm_curl_setopt_callback(CURL *handle, CURLoption option, pm_curl_data_fn callback) {
    return curl_easy_setopt(handle, option, callback);
}

CURLcode pm_curl_setopt_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode pm_curl_resume(CURL *handle) { return curl_easy_pause(handle, CURLPAUSE_CONT); }

CURLMcode pm_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value) {
    return curl_multi_setopt(multi, option, value);
}

/* A fixed receive buffer instead of the kernel's autotuning, which grows to tcp_rmem's maximum
 * (megabytes): a paused transfer then holds at most this much in the kernel (Linux doubles it),
 * and its sender waits. */
static int bounded_receive_buffer(void *user, curl_socket_t fd, curlsocktype purpose) {
    int size = 512 * 1024;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
    return CURL_SOCKOPT_OK;
}

CURLcode pm_curl_bound_receive_buffer(CURL *handle) {
    return curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, bounded_receive_buffer);
}

CURLcode pm_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode pm_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode pm_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    char *result = NULL;
    CURLcode code = curl_easy_getinfo(handle, info, &result);
    *value = result;
    return code;
}

const char *pm_curl_response_header(CURL *handle, const char *name) {
    struct curl_header *header = NULL;
    /* request -1: the last response of the transfer (after redirects) */
    if (curl_easy_header(handle, name, 0, CURLH_HEADER, -1, &header) != CURLHE_OK || header == NULL) return NULL;
    return header->value;
}

int64_t pm_monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec;
}

void pm_transfer_cancel(pm_transfer *transfer) {
    __atomic_store_n(&transfer->cancel_requested, 1, __ATOMIC_SEQ_CST);
}

static int transfer_should_stop(pm_transfer *t) {
    if (__atomic_load_n(&t->cancel_requested, __ATOMIC_SEQ_CST)) {
        t->cancelled = 1;
        return 1;
    }
    if (t->deadline_ns > 0 && pm_monotonic_ns() >= t->deadline_ns) {
        t->deadline_passed = 1;
        return 1;
    }
    return 0;
}

/* Body bytes: counted against the cap while streaming, written straight to the file and shown to
 * `on_data` (or, with `to_buffer`, appended to the buffer). */
static size_t transfer_write(char *data, size_t size, size_t count, void *user) {
    pm_transfer *t = user;
    size_t length = size * count;
    if (transfer_should_stop(t)) return 0;
    if (t->bytes_written + (int64_t)length > t->max_bytes) {
        t->cap_exceeded = 1;
        return 0;
    }
    if (t->to_buffer) {
        if (t->buffer_length + length > t->buffer_capacity) {
            size_t capacity = t->buffer_capacity ? t->buffer_capacity : 4096;
            while (capacity < t->buffer_length + length) capacity *= 2;
            unsigned char *grown = realloc(t->buffer, capacity);
            if (grown == NULL) {
                t->write_failed = ENOMEM;
                return 0;
            }
            t->buffer = grown;
            t->buffer_capacity = capacity;
        }
        memcpy(t->buffer + t->buffer_length, data, length);
        t->buffer_length += length;
        t->bytes_written += (int64_t)length;
        return length;
    }
    size_t done = 0;
    while (done < length) {
        ssize_t n = write(t->fd, data + done, length - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            t->write_failed = errno;
            return 0;
        }
        done += (size_t)n;
    }
    if (t->on_data) t->on_data((const unsigned char *)data, length, t->data_context);
    t->bytes_written += (int64_t)length;
    return length;
}

static int transfer_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                             curl_off_t ulnow) {
    return transfer_should_stop(user);
}

/* Every connection, including each redirect hop, is opened here: the resolved address is
 * checked before the socket exists. */
static curl_socket_t transfer_open_socket(void *user, curlsocktype purpose, struct curl_sockaddr *address) {
    pm_transfer *t = user;
    if (t->check_addresses) {
        const unsigned char *bytes = NULL;
        size_t length = 0;
        int port = 0;
        if (address->family == AF_INET) {
            bytes = (const unsigned char *)&((struct sockaddr_in *)&address->addr)->sin_addr;
            length = 4;
            port = ntohs(((struct sockaddr_in *)&address->addr)->sin_port);
        } else if (address->family == AF_INET6) {
            bytes = (const unsigned char *)&((struct sockaddr_in6 *)&address->addr)->sin6_addr;
            length = 16;
            port = ntohs(((struct sockaddr_in6 *)&address->addr)->sin6_port);
        }
        if (bytes == NULL || t->address_allowed == NULL || !t->address_allowed(bytes, length, port, t->address_context)) {
            t->blocked = 1;
            if (bytes == NULL || !inet_ntop(address->family, bytes, t->blocked_address, sizeof t->blocked_address))
                snprintf(t->blocked_address, sizeof t->blocked_address, "(address family %d)", address->family);
            return CURL_SOCKET_BAD;
        }
    }
    return socket(address->family, address->socktype | SOCK_CLOEXEC, address->protocol);
}

CURLcode pm_curl_install_transfer(CURL *handle, pm_transfer *transfer) {
    CURLcode code;
    if ((code = curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, transfer_write))) return code;
    if ((code = curl_easy_setopt(handle, CURLOPT_WRITEDATA, transfer))) return code;
    if ((code = curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, transfer_progress))) return code;
    if ((code = curl_easy_setopt(handle, CURLOPT_XFERINFODATA, transfer))) return code;
    if ((code = curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L))) return code;
    if ((code = curl_easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, transfer_open_socket))) return code;
    return curl_easy_setopt(handle, CURLOPT_OPENSOCKETDATA, transfer);
}

static __thread CURL *store_handle = NULL;

CURL *pm_curl_store_handle(void) {
    if (store_handle == NULL) {
        store_handle = curl_easy_init();
    } else {
        curl_easy_reset(store_handle);
    }
    return store_handle;
}

/* Request body bytes, from memory or a file descriptor. */
static size_t transfer_read(char *out, size_t size, size_t count, void *user) {
    pm_transfer *t = user;
    size_t room = size * count;
    if (transfer_should_stop(t)) return CURL_READFUNC_ABORT;
    if (t->upload_mode == 1) {
        int64_t left = t->upload_length - t->upload_offset;
        size_t n = left < (int64_t)room ? (size_t)left : room;
        memcpy(out, t->upload_data + t->upload_offset, n);
        t->upload_offset += (int64_t)n;
        return n;
    }
    for (;;) {
        ssize_t n = read(t->upload_fd, out, room);
        if (n >= 0) {
            t->upload_offset += n;
            return (size_t)n;
        }
        if (errno == EINTR) continue;
        t->write_failed = errno;
        return CURL_READFUNC_ABORT;
    }
}

CURLcode pm_curl_install_upload(CURL *handle, pm_transfer *transfer, int64_t length) {
    CURLcode code;
    if ((code = curl_easy_setopt(handle, CURLOPT_UPLOAD, 1L))) return code;
    if ((code = curl_easy_setopt(handle, CURLOPT_READFUNCTION, transfer_read))) return code;
    if ((code = curl_easy_setopt(handle, CURLOPT_READDATA, transfer))) return code;
    return curl_easy_setopt(handle, CURLOPT_INFILESIZE_LARGE, (curl_off_t)length);
}

void pm_transfer_buffer_free(pm_transfer *transfer) {
    free(transfer->buffer);
    transfer->buffer = NULL;
    transfer->buffer_length = 0;
    transfer->buffer_capacity = 0;
}
