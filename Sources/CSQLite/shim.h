#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast macro Swift cannot import.
static inline sqlite3_destructor_type trove_sqlite_transient(void) {
  return SQLITE_TRANSIENT;
}

// sqlite3_db_config is variadic, which Swift cannot call: turns the
// connection's triggers off (0) or on (1); SQLITE_OK or an error code.
static inline int trove_sqlite_enable_triggers(sqlite3 *db, int on) {
  int now = -1;
  int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_ENABLE_TRIGGER, on, &now);
  return rc == SQLITE_OK && now != on ? SQLITE_ERROR : rc;
}

// Whether closing the last connection checkpoints the WAL (1, SQLite's
// default) or leaves its frames for a later writer (0); SQLITE_OK or an
// error code.
static inline int trove_sqlite_checkpoint_on_close(sqlite3 *db, int on) {
  int now = -1;
  int rc = sqlite3_db_config(db, SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, on ? 0 : 1, &now);
  return rc == SQLITE_OK && now != (on ? 0 : 1) ? SQLITE_ERROR : rc;
}
