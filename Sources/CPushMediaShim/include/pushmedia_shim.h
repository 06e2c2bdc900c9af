/*
 * The C shim: every variadic libvips/libcurl call PushMedia makes is wrapped here in a
 * fixed-signature function, together with the libcurl callbacks and the libmagic
 * helpers. Swift sees plain integers, pointers and small structs; libvips and libmagic
 * types stay opaque. One source file per library: curl.c, vips.c, magic.c and spawn.c
 * (child processes).
 */
#ifndef PUSHMEDIA_SHIM_H
#define PUSHMEDIA_SHIM_H

#include <stddef.h>
#include <stdint.h>
#include <curl/curl.h>

/* ---------------------------------------------------------------- libcurl */

/** This thread's easy handle, reset and ready for a new transfer. Reusing it keeps its
 *  connections and DNS cache alive between transfers. Connections were checked against the
 *  address policy when they were opened, so a handle is only reused under the same policy:
 *  a different `policy_tag` gets a fresh handle. Never clean it up. */
CURL *pm_curl_thread_handle(uint64_t policy_tag);
CURLcode pm_curl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode pm_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value);
CURLcode pm_curl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode pm_curl_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value);
CURLcode pm_curl_getinfo_long(CURL *handle, CURLINFO info, long *value);
CURLcode pm_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value);
/** The string stays owned by the handle; copy it before the handle's next transfer. */
CURLcode pm_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value);
/** The value of response header `name` of the transfer's last response (after redirects), or NULL.
 *  Valid until the handle's next transfer. */
const char *pm_curl_response_header(CURL *handle, const char *name);

/** Decides whether a resolved address may be connected to: 1 allow, 0 deny.
 *  `address` holds 4 (IPv4) or 16 (IPv6) bytes in network order; `port` is in host order;
 *  `context` is the transfer's `address_context`. */
typedef int (*pm_address_check_fn)(const unsigned char *address, size_t length, int port, void *context);
/** Sees each chunk of body written to `fd` (the fetch hashes it while it streams). */
typedef void (*pm_data_fn)(const unsigned char *data, size_t length, void *context);

/** State shared with the transfer callbacks. Owned by the caller for the transfer's life. */
typedef struct pm_transfer {
    /* inputs */
    int fd;                         /* body is written here */
    int64_t max_bytes;              /* abort once more than this many body bytes arrive */
    int64_t deadline_ns;            /* CLOCK_MONOTONIC; 0 = none */
    int check_addresses;            /* 1: every connection's address goes through address_allowed */
    pm_address_check_fn address_allowed;
    void *address_context;
    pm_data_fn on_data;             /* optional: called with every chunk written to `fd` */
    void *data_context;
    /* outputs */
    int64_t bytes_written;
    int cap_exceeded;
    int deadline_passed;
    int cancelled;
    int write_failed;
    int blocked;                    /* a connection was refused by address_allowed */
    char blocked_address[64];
    /* body sink: 1 appends the body to `buffer` (grown with malloc, capped at max_bytes) instead
     * of writing to `fd`; free it with pm_transfer_buffer_free */
    int to_buffer;
    unsigned char *buffer;
    size_t buffer_length;
    size_t buffer_capacity;
    /* upload source (see pm_curl_install_upload): 0 none, 1 `upload_data`, 2 `upload_fd` */
    int upload_mode;
    const unsigned char *upload_data;
    int64_t upload_length;
    int64_t upload_offset;
    int upload_fd;
    /* private */
    int cancel_requested;
} pm_transfer;

/** Installs the write, progress and open-socket callbacks of `transfer` on `handle`. */
CURLcode pm_curl_install_transfer(CURL *handle, pm_transfer *transfer);
/** This thread's easy handle for object-store requests, reset and ready: a second handle beside
 *  the origin one, so that store and origin connections are each kept alive per thread. */
CURL *pm_curl_store_handle(void);
/** Makes the transfer an upload of `length` bytes read from `transfer`'s upload source. */
CURLcode pm_curl_install_upload(CURL *handle, pm_transfer *transfer, int64_t length);
/** Frees a body collected with `to_buffer`. */
void pm_transfer_buffer_free(pm_transfer *transfer);
/** Asks a running transfer to stop at its next progress callback (thread-safe). */
void pm_transfer_cancel(pm_transfer *transfer);
/** A body or header callback (`CURLOPT_WRITEFUNCTION`, `CURLOPT_HEADERFUNCTION`): libcurl's own signature. */
typedef size_t (*pm_curl_data_fn)(char *data, size_t size, size_t count, void *context);
/** Sets a callback option (`CURLOPT_WRITEFUNCTION`, `CURLOPT_HEADERFUNCTION`). */
CURLcode pm_curl_setopt_callback(CURL *handle, CURLoption option, pm_curl_data_fn callback);
/** Sets a pointer option (`CURLOPT_WRITEDATA`, `CURLOPT_HEADERDATA`). */
CURLcode pm_curl_setopt_pointer(CURL *handle, CURLoption option, void *value);
/** Resumes a transfer whose write callback paused it (`curl_easy_pause` with CURLPAUSE_CONT);
 *  call it on the thread that drives the transfer's multi handle. */
CURLcode pm_curl_resume(CURL *handle);
/** Gives each new connection of `handle` a fixed 512 KiB receive buffer (no autotuning): what a
 *  paused transfer leaves waiting in the kernel stays small. */
CURLcode pm_curl_bound_receive_buffer(CURL *handle);
CURLMcode pm_curl_multi_setopt_long(CURLM *multi, CURLMoption option, long value);

/** Monotonic clock in nanoseconds, the clock deadlines are expressed in. */
int64_t pm_monotonic_ns(void);

/* ----------------------------------------------------------------- libvips */

typedef struct _VipsImage pm_image;

typedef struct pm_header {
    int width;
    int height;          /* of the whole image: all pages stacked when n_pages > 1 */
    int bands;
    int has_alpha;
    int n_pages;         /* frames in the file (1 for still images) */
    int page_height;     /* height of one frame */
    int orientation;     /* EXIF orientation 1..8 (1 when absent) */
    int has_icc;         /* an embedded ICC profile */
    int icc_usable;      /* ... that lcms reads and that fits the image's colour space */
    char loader[64];     /* libvips loader nickname, e.g. "jpegload" */
} pm_header;

/** Starts libvips once: untrusted loaders blocked, operation cache off, `concurrency` threads per image. */
int pm_vips_init(const char *argv0, int concurrency);
const char *pm_vips_version(void);
/** The pending libvips error text (newly allocated, free with pm_free), and clears it. */
char *pm_vips_error_take(void);
void pm_free(void *pointer);
/** Reads only the header of `filename` (no pixels are decoded). */
int pm_vips_header(const char *filename, pm_header *header);
/** Shrink-on-load thumbnail that fits `width`×`height` (never enlarges), auto-rotated by EXIF.
 *  `filename` may carry loader options, e.g. "a.gif[n=-1]". `fail_on_truncated` makes truncated
 *  or corrupt input an error. `transform_to_srgb` converts through the embedded ICC profile (an
 *  lcms transform, costly: pass it only when the file has a profile). `crop`: 0 fits inside the box,
 *  1 fills it and crops the centre, 2 fills it and crops the most interesting part (attention). */
int pm_vips_thumbnail(const char *filename, int width, int height, int fail_on_truncated, int transform_to_srgb, int crop,
                      pm_image **out);
/** Like pm_vips_thumbnail, from an encoded image in memory (shrink-on-load where the format allows). */
int pm_vips_thumbnail_buffer(const void *buffer, size_t length, int width, int height, int crop, pm_image **out);
/** The largest `aspect` (width / height) rectangle of an encoded image, centred (`crop` 1) or on its
 *  most interesting part (`crop` 2), as fractions of the width and height: rect = x, y, width, height. */
int pm_vips_clip_rect(const void *buffer, size_t length, double aspect, int crop, double rect[4]);
/** Of an animation's frames, the one with the most detail (largest pixel deviation), 0-based. */
int pm_vips_busiest_frame(const void *buffer, size_t length, int *frame);
/** Converts to sRGB (keeps alpha). */
int pm_vips_srgb(pm_image *in, pm_image **out);
/** Decodes a (lazy) image into memory once, so that several encodes and resizes read the same pixels. */
int pm_vips_copy_memory(pm_image *in, pm_image **out);
/** Shrinks an image already decoded (never enlarges) to fit width × height. */
int pm_vips_thumbnail_image(pm_image *in, int width, int height, pm_image **out);
/** Fits an opaque image in memory inside edge × edge, never enlarging: an integer box shrink
 *  (vips_shrink) for the whole part of the factor, then a Lanczos reduce (vips_resize) for the
 *  rest. About half the CPU of vips_thumbnail_image for a 2048 → 512 reduction. */
int pm_vips_fit_shrink(pm_image *in, int edge, pm_image **out);
/** Threads libvips gives each pipeline started from now on (read when a pipeline starts). */
void pm_vips_set_concurrency(int threads);
/** Removes alpha by compositing over white. */
int pm_vips_flatten_white(pm_image *in, pm_image **out);
int pm_vips_jpegsave(pm_image *in, int quality, void **buffer, size_t *length);
int pm_vips_pngsave(pm_image *in, void **buffer, size_t *length);
int pm_vips_gifsave(pm_image *in, void **buffer, size_t *length);
/** An animation with every `step`-th frame of `in` (the first, then every `step`-th after it),
 *  each shown as long as the frames it stands for were (their delays added up); the loop count
 *  is kept. A copy of `in` when `step` < 2 or `in` has one frame. */
int pm_vips_keep_frames(pm_image *in, int step, pm_image **out);
/** An 8-bit image from interleaved pixels (copied). */
int pm_vips_from_memory(const void *pixels, size_t length, int width, int height, int bands, pm_image **out);
/** Uncompressed TIFF, used as a trusted intermediate for formats PushMedia decodes itself. */
int pm_vips_tiffsave_file(pm_image *in, const char *filename);
/** How far an image is from blank: the largest standard deviation of a band, on a 64 px copy
 *  (a black or single-colour frame is near 0). */
int pm_vips_file_deviation(const char *filename, double *deviation);
/** Encodes a tiny image: 0 when libvips works. */
int pm_vips_selftest(void);
int pm_image_width(pm_image *image);
int pm_image_height(pm_image *image);
int pm_image_has_alpha(pm_image *image);
int pm_image_page_height(pm_image *image);
int pm_image_n_pages(pm_image *image);
void pm_image_unref(pm_image *image);

/* ---------------------------------------------------------------- libmagic */

/** MIME type of `buffer` ("image/png"); one magic handle per calling thread. 0 on success. */
int pm_magic_mime(const void *buffer, size_t length, char *out, size_t out_length);
/** Human description ("PNG image data, 800 x 600, ..."). 0 on success. */
int pm_magic_describe(const void *buffer, size_t length, char *out, size_t out_length);

/* ---------------------------------------------------------------- child processes */

/** Starts `path` with `argv` (NULL-terminated) in a new process group: stdin from /dev/null,
 *  stdout and stderr into the given descriptors (-1: /dev/null), every other descriptor closed.
 *  0 and the child's pid in `pid_out`, or an error number. */
int pm_spawn(const char *path, char *const argv[], int stdout_fd, int stderr_fd, int *pid_out);

#endif
