// LD_PRELOAD for h2load: every request body's first run of 16 `@` becomes a counter in hex, so
// that h2load (which sends one body file) sends a different body each time. It wraps
// nghttp2_submit_request's data provider: the body is still read by h2load's own callback, then
// patched in nghttp2's frame buffer. Built by bench/relay-lib.sh; used for the `distinct` rows.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nghttp2/nghttp2.h>
#include <stdatomic.h>
#include <string.h>
static nghttp2_data_source_read_callback original;
static atomic_ulong counter;
static const char marker[] = "@@@@@@@@@@@@@@@@";
static ssize_t patched(nghttp2_session *session, int32_t stream_id, uint8_t *buf, size_t length,
                       uint32_t *data_flags, nghttp2_data_source *source, void *user_data) {
  ssize_t n = original(session, stream_id, buf, length, data_flags, source, user_data);
  if (n >= 16) {
    uint8_t *at = memmem(buf, (size_t)n, marker, 16);
    if (at) {
      unsigned long value = atomic_fetch_add(&counter, 1);
      static const char hex[] = "0123456789abcdef";
      for (int i = 15; i >= 0; i--) { at[i] = (uint8_t)hex[value & 15]; value >>= 4; }
    }
  }
  return n;
}
int32_t nghttp2_submit_request(nghttp2_session *session, const nghttp2_priority_spec *pri_spec,
                               const nghttp2_nv *nva, size_t nvlen, const nghttp2_data_provider *data_prd,
                               void *stream_user_data) {
  static int32_t (*real)(nghttp2_session *, const nghttp2_priority_spec *, const nghttp2_nv *, size_t,
                         const nghttp2_data_provider *, void *);
  if (!real) real = dlsym(RTLD_NEXT, "nghttp2_submit_request");
  if (!data_prd) return real(session, pri_spec, nva, nvlen, data_prd, stream_user_data);
  nghttp2_data_provider copy = *data_prd;
  original = data_prd->read_callback;
  copy.read_callback = patched;
  return real(session, pri_spec, nva, nvlen, &copy, stream_user_data);
}
