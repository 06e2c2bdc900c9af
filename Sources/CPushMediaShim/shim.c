#define _GNU_SOURCE
#include "pushmedia_shim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <magic.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <spawn.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <vips/vips.h>

/* ---------------------------------------------------------------- libcurl */

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

/* Body bytes: counted against the cap while streaming, written straight to the file. */
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

/* ----------------------------------------------------------------- libvips */

/* libvips reports recoverable oddities of untrusted files (bad ICC tags, trailing bytes) as
 * GLib warnings; real failures come back as errors, so the warnings are dropped. */
static void quiet_log(const gchar *domain, GLogLevelFlags level, const gchar *message, gpointer data) {}

int pm_vips_init(const char *argv0, int concurrency) {
    /* Image buffers are freed on other threads than they were allocated on; with glibc's default
     * of one arena per thread that keeps RSS high long after the work. Two arenas keep it flat.
     * A fixed 1 MiB mmap threshold puts every large buffer (decoded rows, encoded images) in its
     * own mapping, returned to the system when freed; glibc's default threshold grows to 32 MiB
     * after the first large free and then carves such buffers out of the heap, where they
     * fragment it (a 1,000-image batch peaked 25 % higher). */
    mallopt(M_ARENA_MAX, 2);
    mallopt(M_MMAP_THRESHOLD, 1024 * 1024);
    if (VIPS_INIT(argv0)) return -1;
    g_log_set_handler("VIPS", G_LOG_LEVEL_WARNING | G_LOG_LEVEL_MESSAGE | G_LOG_LEVEL_INFO, quiet_log, NULL);
    vips_block_untrusted_set(TRUE);
    vips_cache_set_max(0);
    if (concurrency > 0) vips_concurrency_set(concurrency);
    return 0;
}

const char *pm_vips_version(void) {
    return vips_version_string();
}

char *pm_vips_error_take(void) {
    char *text = g_strdup(vips_error_buffer());
    vips_error_clear();
    return text;
}

void pm_free(void *pointer) {
    g_free(pointer);
}

int pm_vips_header(const char *filename, pm_header *header) {
    memset(header, 0, sizeof *header);
    const char *loader = vips_foreign_find_load(filename);
    if (loader == NULL) return -1;
    VipsImage *image = vips_image_new_from_file(filename, "access", VIPS_ACCESS_SEQUENTIAL, NULL);
    if (image == NULL) return -1;
    header->width = vips_image_get_width(image);
    header->height = vips_image_get_height(image);
    header->bands = vips_image_get_bands(image);
    header->has_alpha = vips_image_hasalpha(image);
    header->n_pages = vips_image_get_n_pages(image);
    header->page_height = vips_image_get_page_height(image);
    int orientation = 1;
    if (vips_image_get_typeof(image, VIPS_META_ORIENTATION) &&
        vips_image_get_int(image, VIPS_META_ORIENTATION, &orientation) == 0)
        header->orientation = orientation;
    else
        header->orientation = 1;
    header->has_icc = vips_image_get_typeof(image, VIPS_META_ICC_NAME) != 0;
    if (header->has_icc) {
        const void *profile = NULL;
        size_t length = 0;
        header->icc_usable = vips_image_get_blob(image, VIPS_META_ICC_NAME, &profile, &length) == 0 &&
                             vips_icc_is_compatible_profile(image, profile, length);
    }
    VipsObjectClass *class = VIPS_OBJECT_CLASS(g_type_class_peek(g_type_from_name(loader)));
    g_strlcpy(header->loader, class ? class->nickname : loader, sizeof header->loader);
    g_object_unref(image);
    return 0;
}

static VipsInteresting pm_interesting(int crop) {
    switch (crop) {
    case 1: return VIPS_INTERESTING_CENTRE;
    case 2: return VIPS_INTERESTING_ATTENTION;
    default: return VIPS_INTERESTING_NONE;
    }
}

int pm_vips_thumbnail(const char *filename, int width, int height, int fail_on_truncated, int transform_to_srgb, int crop,
                      pm_image **out) {
    VipsFailOn fail_on = fail_on_truncated ? VIPS_FAIL_ON_TRUNCATED : VIPS_FAIL_ON_NONE;
    if (transform_to_srgb)
        return vips_thumbnail(filename, out, width, "height", height, "size", VIPS_SIZE_DOWN, "crop", pm_interesting(crop),
                              "export_profile", "srgb", "fail_on", fail_on, NULL);
    return vips_thumbnail(filename, out, width, "height", height, "size", VIPS_SIZE_DOWN, "crop", pm_interesting(crop),
                          "fail_on", fail_on, NULL);
}

int pm_vips_thumbnail_buffer(const void *buffer, size_t length, int width, int height, int crop, pm_image **out) {
    /* Only ever our own output: already sRGB, no profile. */
    return vips_thumbnail_buffer((void *)buffer, length, out, width, "height", height, "size", VIPS_SIZE_DOWN,
                                 "crop", pm_interesting(crop), NULL);
}

int pm_vips_clip_rect(const void *buffer, size_t length, double aspect, int crop, double rect[4]) {
    /* Analysed on a small copy: attention needs edges and skin tones, not detail. */
    VipsImage *small = NULL;
    if (vips_thumbnail_buffer((void *)buffer, length, &small, 256, "height", 256, "size", VIPS_SIZE_DOWN, NULL))
        return -1;
    int width = small->Xsize, height = small->Ysize;
    int crop_width = width, crop_height = (int)(width / aspect + 0.5);
    if (crop_height > height) {
        crop_height = height;
        crop_width = (int)(height * aspect + 0.5);
    }
    if (crop_width < 1) crop_width = 1;
    if (crop_height < 1) crop_height = 1;
    int left = (width - crop_width) / 2, top = (height - crop_height) / 2;
    if (crop == 2 && (crop_width < width || crop_height < height)) {
        VipsImage *cropped = NULL;
        if (vips_smartcrop(small, &cropped, crop_width, crop_height, "interesting", VIPS_INTERESTING_ATTENTION, NULL)) {
            g_object_unref(small);
            return -1;
        }
        /* vips_extract_area, which smartcrop ends with, records the area's origin as minus the offset. */
        left = -cropped->Xoffset;
        top = -cropped->Yoffset;
        g_object_unref(cropped);
        if (left < 0 || top < 0 || left + crop_width > width || top + crop_height > height) {
            left = (width - crop_width) / 2;
            top = (height - crop_height) / 2;
        }
    }
    g_object_unref(small);
    rect[0] = (double)left / width;
    rect[1] = (double)top / height;
    rect[2] = (double)crop_width / width;
    rect[3] = (double)crop_height / height;
    return 0;
}

int pm_vips_busiest_frame(const void *buffer, size_t length, int *frame) {
    VipsImage *pages = NULL;
    *frame = 0;
    if (vips_thumbnail_buffer((void *)buffer, length, &pages, 64, "height", 64, "size", VIPS_SIZE_DOWN,
                              "option_string", "n=-1", NULL))
        return -1;
    int page_height = vips_image_get_page_height(pages);
    int count = page_height > 0 ? pages->Ysize / page_height : 1;
    double best = -1;
    for (int i = 0; i < count; i++) {
        VipsImage *page = NULL;
        double deviation = 0;
        if (vips_extract_area(pages, &page, 0, i * page_height, pages->Xsize, page_height, NULL)) {
            g_object_unref(pages);
            return -1;
        }
        int failed = vips_deviate(page, &deviation, NULL);
        g_object_unref(page);
        if (failed) {
            g_object_unref(pages);
            return -1;
        }
        if (deviation > best) {
            best = deviation;
            *frame = i;
        }
    }
    g_object_unref(pages);
    return 0;
}

int pm_vips_srgb(pm_image *in, pm_image **out) {
    return vips_colourspace(in, out, VIPS_INTERPRETATION_sRGB, NULL);
}

int pm_vips_copy_memory(pm_image *in, pm_image **out) {
    *out = vips_image_copy_memory(in);
    return *out ? 0 : -1;
}

int pm_vips_thumbnail_image(pm_image *in, int width, int height, pm_image **out) {
    return vips_thumbnail_image(in, out, width, "height", height, "size", VIPS_SIZE_DOWN, NULL);
}

int pm_vips_flatten_white(pm_image *in, pm_image **out) {
    double white[3] = {255.0, 255.0, 255.0};
    VipsArrayDouble *background = vips_array_double_new(white, 3);
    int result = vips_flatten(in, out, "background", background, NULL);
    vips_area_unref(VIPS_AREA(background));
    return result;
}

/* Metadata is never written: no EXIF, XMP, IPTC or ICC in the output. */
#if VIPS_MAJOR_VERSION > 8 || (VIPS_MAJOR_VERSION == 8 && VIPS_MINOR_VERSION >= 15)
#define PM_NO_METADATA "keep", VIPS_FOREIGN_KEEP_NONE
#else
#define PM_NO_METADATA "strip", TRUE
#endif

int pm_vips_jpegsave(pm_image *in, int quality, void **buffer, size_t *length) {
    return vips_jpegsave_buffer(in, buffer, length, "Q", quality, "optimize_coding", TRUE,
                                "interlace", FALSE, PM_NO_METADATA, NULL);
}

int pm_vips_pngsave(pm_image *in, void **buffer, size_t *length) {
    return vips_pngsave_buffer(in, buffer, length, "compression", 6, PM_NO_METADATA, NULL);
}

int pm_vips_gifsave(pm_image *in, void **buffer, size_t *length) {
    return vips_gifsave_buffer(in, buffer, length, PM_NO_METADATA, NULL);
}

int pm_vips_from_memory(const void *pixels, size_t length, int width, int height, int bands, pm_image **out) {
    *out = vips_image_new_from_memory_copy(pixels, length, width, height, bands, VIPS_FORMAT_UCHAR);
    if (*out == NULL) return -1;
    (*out)->Type = bands >= 3 ? VIPS_INTERPRETATION_sRGB : VIPS_INTERPRETATION_B_W;
    return 0;
}

int pm_vips_tiffsave_file(pm_image *in, const char *filename) {
    return vips_tiffsave(in, filename, "compression", VIPS_FOREIGN_TIFF_COMPRESSION_NONE, PM_NO_METADATA, NULL);
}

int pm_vips_file_deviation(const char *filename, double *deviation) {
    VipsImage *small = NULL;
    if (vips_thumbnail(filename, &small, 64, "height", 64, "size", VIPS_SIZE_DOWN, "fail_on", VIPS_FAIL_ON_NONE, NULL))
        return -1;
    VipsImage *stats = NULL;
    int result = vips_stats(small, &stats, NULL);
    g_object_unref(small);
    if (result) return -1;
    /* Rows 1.. hold each band's statistics; column 5 is the standard deviation. */
    double largest = 0;
    for (int band = 1; band < stats->Ysize; band++) {
        double value = *VIPS_MATRIX(stats, 5, band);
        if (value > largest) largest = value;
    }
    g_object_unref(stats);
    *deviation = largest;
    return 0;
}

int pm_vips_selftest(void) {
    VipsImage *image = NULL;
    if (vips_black(&image, 8, 8, "bands", 3, NULL)) return -1;
    void *buffer = NULL;
    size_t length = 0;
    int result = vips_jpegsave_buffer(image, &buffer, &length, NULL);
    g_object_unref(image);
    g_free(buffer);
    return result == 0 && length > 0 ? 0 : -1;
}

int pm_image_width(pm_image *image) { return vips_image_get_width(image); }
int pm_image_height(pm_image *image) { return vips_image_get_height(image); }
int pm_image_has_alpha(pm_image *image) { return vips_image_hasalpha(image); }
int pm_image_page_height(pm_image *image) { return vips_image_get_page_height(image); }
int pm_image_n_pages(pm_image *image) { return vips_image_get_n_pages(image); }
void pm_image_unref(pm_image *image) { if (image) g_object_unref(image); }

/* ---------------------------------------------------------------- libmagic */

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

/* -------------------------------------------------------------------- GLib */

static void checksum_hex(GChecksum *checksum, char out_hex[65]) {
    g_strlcpy(out_hex, g_checksum_get_string(checksum), 65);
}

int pm_sha256_file(const char *path, char out_hex[65]) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errno;
    GChecksum *checksum = g_checksum_new(G_CHECKSUM_SHA256);
    unsigned char block[65536];
    for (;;) {
        ssize_t n = read(fd, block, sizeof block);
        if (n < 0) {
            if (errno == EINTR) continue;
            int error = errno;
            g_checksum_free(checksum);
            close(fd);
            return error;
        }
        if (n == 0) break;
        g_checksum_update(checksum, block, (gssize)n);
    }
    close(fd);
    checksum_hex(checksum, out_hex);
    g_checksum_free(checksum);
    return 0;
}

void pm_sha256_buffer(const void *buffer, size_t length, char out_hex[65]) {
    GChecksum *checksum = g_checksum_new(G_CHECKSUM_SHA256);
    g_checksum_update(checksum, buffer, (gssize)length);
    checksum_hex(checksum, out_hex);
    g_checksum_free(checksum);
}

/* ---------------------------------------------------------------- child processes */

int pm_spawn(const char *path, char *const argv[], int stdout_fd, int stderr_fd, int *pid_out) {
    /* posix_spawn (vfork + exec in glibc): nothing runs in the child but the file actions, and
     * the sanitizers and the Swift runtime see no fork of a multithreaded process. */
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attributes;
    if (posix_spawn_file_actions_init(&actions)) return errno;
    if (posix_spawnattr_init(&attributes)) {
        posix_spawn_file_actions_destroy(&actions);
        return errno;
    }
    int result = posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    if (!result) result = stdout_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1)
                                         : posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    if (!result) result = stderr_fd >= 0 ? posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2)
                                         : posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    if (!result) result = posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (!result) result = posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
    if (!result) result = posix_spawnattr_setpgroup(&attributes, 0);
    pid_t pid = 0;
    if (!result) result = posix_spawn(&pid, path, &actions, &attributes, argv, __environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attributes);
    if (!result) *pid_out = pid;
    return result;
}
