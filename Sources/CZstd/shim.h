// zstd through Debian's libzstd. ZSTD_CONTENTSIZE_* are macros Swift cannot
// import as values; the wrappers below return them.
#include <zstd.h>

static inline unsigned long long trove_zstd_contentsize_unknown(void) {
  return ZSTD_CONTENTSIZE_UNKNOWN;
}
static inline unsigned long long trove_zstd_contentsize_error(void) {
  return ZSTD_CONTENTSIZE_ERROR;
}
