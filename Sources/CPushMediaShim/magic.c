/* libmagic: MIME types and descriptions, one handle per thread. */
#define _GNU_SOURCE
#include "pushmedia_shim.h"

#include <glib.h>
#include <magic.h>
#include <pthread.h>

/* magic_t is not thread-safe: each thread loads its own handle once. */
static pthread_key_t magic_key;
static pthread_once_t magic_key_once = PTHREAD_ONCE_INIT;

static void magic_release(void *cookie) { magic_close(cookie); }
static void magic_make_key(void) { pthread_key_create(&magic_key, magic_release); }

static int magic_run(int flags, const void *buffer, size_t length, char *out, size_t out_length) {
    pthread_once(&magic_key_once, magic_make_key);
    magic_t cookie = pthread_getspecific(magic_key);
    if (cookie == NULL) {
        cookie = magic_open(MAGIC_NONE);
        if (cookie == NULL) return -1;
        if (magic_load(cookie, NULL) != 0) {
            magic_close(cookie);
            return -1;
        }
        pthread_setspecific(magic_key, cookie);
    }
    if (magic_setflags(cookie, flags) != 0) return -1;
    const char *result = magic_buffer(cookie, buffer, length);
    if (result == NULL) {
        const char *error = magic_error(cookie);
        g_strlcpy(out, error ? error : "libmagic failed", out_length);
        return -1;
    }
    g_strlcpy(out, result, out_length);
    return 0;
}

int pm_magic_mime(const void *buffer, size_t length, char *out, size_t out_length) {
    return magic_run(MAGIC_MIME_TYPE | MAGIC_ERROR, buffer, length, out, out_length);
}

int pm_magic_describe(const void *buffer, size_t length, char *out, size_t out_length) {
    return magic_run(MAGIC_ERROR, buffer, length, out, out_length);
}
