/* libvips: start-up, headers, thumbnails, crops and encodes. */
#define _GNU_SOURCE
#include "pushmedia_shim.h"

#include <malloc.h>
#include <string.h>
#include <vips/vips.h>

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

void pm_vips_set_concurrency(int threads) {
    if (threads > 0 && threads != vips_concurrency_get()) vips_concurrency_set(threads);
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

int pm_vips_fit_shrink(pm_image *in, int edge, pm_image **out) {
    int width = vips_image_get_width(in), height = vips_image_get_height(in);
    int longest = width > height ? width : height;
    if (edge <= 0 || longest <= edge) return vips_copy(in, out, NULL);
    int shrink = longest / edge;
    VipsImage *shrunk = in;
    if (shrink >= 2) {
        if (vips_shrink(in, &shrunk, (double)shrink, (double)shrink, NULL)) return -1;
    } else {
        g_object_ref(in);
    }
    int shrunk_longest = vips_image_get_width(shrunk) > vips_image_get_height(shrunk) ? vips_image_get_width(shrunk)
                                                                                       : vips_image_get_height(shrunk);
    int result;
    if (shrunk_longest <= edge) {
        result = vips_copy(shrunk, out, NULL);
    } else {
        result = vips_resize(shrunk, out, (double)edge / (double)shrunk_longest, NULL);
    }
    g_object_unref(shrunk);
    return result;
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

int pm_vips_keep_frames(pm_image *in, int step, pm_image **out) {
    int page_height = vips_image_get_page_height(in);
    int pages = vips_image_get_n_pages(in);
    if (step < 2 || pages < 2 || page_height <= 0) return vips_copy(in, out, NULL);
    int kept = (pages + step - 1) / step;
    int *delays = NULL, n_delays = 0;
    if (vips_image_get_typeof(in, "delay") && vips_image_get_array_int(in, "delay", &delays, &n_delays))
        return -1;
    VipsImage **frames = g_new0(VipsImage *, kept);
    int *kept_delays = g_new0(int, kept);
    int result = 0;
    for (int k = 0; k < kept && result == 0; k++) {
        result = vips_extract_area(in, &frames[k], 0, k * step * page_height, in->Xsize, page_height, NULL);
        for (int page = k * step; page < (k + 1) * step && page < pages; page++)
            kept_delays[k] += page < n_delays ? delays[page] : 100;
    }
    VipsImage *joined = NULL;
    if (result == 0) result = vips_arrayjoin(frames, &joined, kept, "across", 1, NULL);
    for (int k = 0; k < kept; k++)
        if (frames[k]) g_object_unref(frames[k]);
    g_free(frames);
    /* Metadata is set on a copy of its own, never on an operation's output. */
    if (result == 0) result = vips_copy(joined, out, NULL);
    if (joined) g_object_unref(joined);
    if (result == 0) {
        vips_image_set_int(*out, "page-height", page_height);
        vips_image_set_int(*out, "n-pages", kept);
        vips_image_set_array_int(*out, "delay", kept_delays, kept);
        vips_image_set_int(*out, "gif-delay", (kept_delays[0] + 5) / 10);
        int loop = 0;
        if (vips_image_get_typeof(in, "loop") && vips_image_get_int(in, "loop", &loop) == 0)
            vips_image_set_int(*out, "loop", loop);
    }
    g_free(kept_delays);
    return result;
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
