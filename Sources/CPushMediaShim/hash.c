/* SHA-256 of files and buffers, with GLib's checksums. */
#define _GNU_SOURCE
#include "pushmedia_shim.h"

#include <errno.h>
#include <fcntl.h>
#include <glib.h>
#include <unistd.h>

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
