#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import.
static inline sqlite3_destructor_type trove_sqlite_transient(void) {
  return SQLITE_TRANSIENT;
}
