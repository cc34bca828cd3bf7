// XXH3 through Debian's libxxhash. The `_dispatch` entry points pick the
// widest vector unit the CPU has (SSE2, AVX2, AVX-512) at run time; the
// header macros that would route plain names to them are not visible to
// Swift, so Trove calls the `_dispatch` symbols by name.
#include <xxhash.h>
#include <xxh_x86dispatch.h>
