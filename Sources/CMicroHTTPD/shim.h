// GNU libmicrohttpd (Debian libmicrohttpd-dev): the HTTP server of
// `trove serve`, with no link: it is loaded with dlopen when a server
// starts, so every other command neither maps it nor the TLS libraries it
// brings in (GnuTLS and eight more in Debian 12), whose start-up code runs
// in every process that links them. Each function Trove calls has a
// wrapper here that resolves it on first use; its variadic functions and
// cast macros, which Swift does not import, get fixed-argument wrappers.
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <microhttpd.h>

#define TROVE_MHD_SONAME "libmicrohttpd.so.12"

// The library, loaded once (dlopen counts its references, so a second load
// from another translation unit returns the same handle); NULL when it
// cannot be loaded.
static inline void *trove_mhd_library(void) {
  static void *library;
  void *loaded = __atomic_load_n(&library, __ATOMIC_ACQUIRE);
  if (!loaded) {
    loaded = dlopen(TROVE_MHD_SONAME, RTLD_NOW | RTLD_LOCAL);
    __atomic_store_n(&library, loaded, __ATOMIC_RELEASE);
  }
  return loaded;
}

// Loads the library: NULL when it is there, else the loader's reason. A
// server calls it before anything else, so the wrappers below never run
// without it.
static inline const char *trove_mhd_load(void) {
  if (trove_mhd_library()) return NULL;
  const char *reason = dlerror();
  return reason ? reason : TROVE_MHD_SONAME ": cannot be loaded";
}

static inline void *trove_mhd_resolve(const char *name) {
  void *library = trove_mhd_library();
  void *function = library ? dlsym(library, name) : NULL;
  if (!function) {
    // Only a libmicrohttpd older than Trove's headers lacks one: no
    // server can run on it.
    fprintf(stderr, "trove: %s has no %s\n", TROVE_MHD_SONAME, name);
    abort();
  }
  return function;
}

// The function NAME, resolved on the first call of its wrapper.
#define TROVE_MHD_FUNCTION(name)                                                     \
  static __typeof__(&name) resolved;                                                 \
  __typeof__(&name) function = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);         \
  if (!function) {                                                                   \
    function = (__typeof__(&name))trove_mhd_resolve(#name);                          \
    __atomic_store_n(&resolved, function, __ATOMIC_RELEASE);                         \
  }

static inline void trove_mhd_suspend_connection(struct MHD_Connection *connection) {
  TROVE_MHD_FUNCTION(MHD_suspend_connection)
  function(connection);
}
static inline void trove_mhd_resume_connection(struct MHD_Connection *connection) {
  TROVE_MHD_FUNCTION(MHD_resume_connection)
  function(connection);
}
static inline struct MHD_Response *trove_mhd_create_response_from_callback(
    uint64_t size, size_t block_size, MHD_ContentReaderCallback reader, void *context,
    MHD_ContentReaderFreeCallback free_context) {
  TROVE_MHD_FUNCTION(MHD_create_response_from_callback)
  return function(size, block_size, reader, context, free_context);
}
static inline struct MHD_Response *trove_mhd_create_response_from_fd_at_offset64(uint64_t size,
                                                                                int fd,
                                                                                uint64_t offset) {
  TROVE_MHD_FUNCTION(MHD_create_response_from_fd_at_offset64)
  return function(size, fd, offset);
}
static inline struct MHD_Response *trove_mhd_create_response_from_buffer(
    size_t size, void *buffer, enum MHD_ResponseMemoryMode mode) {
  TROVE_MHD_FUNCTION(MHD_create_response_from_buffer)
  return function(size, buffer, mode);
}
static inline enum MHD_Result trove_mhd_add_response_header(struct MHD_Response *response,
                                                            const char *header,
                                                            const char *content) {
  TROVE_MHD_FUNCTION(MHD_add_response_header)
  return function(response, header, content);
}
static inline void trove_mhd_destroy_response(struct MHD_Response *response) {
  TROVE_MHD_FUNCTION(MHD_destroy_response)
  function(response);
}
static inline enum MHD_Result trove_mhd_queue_response(struct MHD_Connection *connection,
                                                       unsigned int status_code,
                                                       struct MHD_Response *response) {
  TROVE_MHD_FUNCTION(MHD_queue_response)
  return function(connection, status_code, response);
}
static inline const char *trove_mhd_lookup_connection_value(struct MHD_Connection *connection,
                                                            enum MHD_ValueKind kind,
                                                            const char *key) {
  TROVE_MHD_FUNCTION(MHD_lookup_connection_value)
  return function(connection, kind, key);
}
static inline MHD_socket trove_mhd_quiesce_daemon(struct MHD_Daemon *daemon) {
  TROVE_MHD_FUNCTION(MHD_quiesce_daemon)
  return function(daemon);
}
static inline void trove_mhd_stop_daemon(struct MHD_Daemon *daemon) {
  TROVE_MHD_FUNCTION(MHD_stop_daemon)
  function(daemon);
}

// MHD_start_daemon is variadic: its options go in an array instead.
static inline struct MHD_Daemon *trove_mhd_start(
    unsigned int flags, MHD_AccessHandlerCallback handler, void *handler_context,
    const struct MHD_OptionItem *options) {
  TROVE_MHD_FUNCTION(MHD_start_daemon)
  return function(flags, 0, NULL, NULL, handler, handler_context, MHD_OPTION_ARRAY, options,
                  MHD_OPTION_END);
}

// The peer's address of a connection, or NULL.
static inline const struct sockaddr *trove_mhd_client_address(struct MHD_Connection *connection) {
  TROVE_MHD_FUNCTION(MHD_get_connection_info)
  const union MHD_ConnectionInfo *info =
      function(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info ? info->client_addr : NULL;
}

// The port a daemon listens on (0 when unknown).
static inline uint16_t trove_mhd_port(struct MHD_Daemon *daemon) {
  TROVE_MHD_FUNCTION(MHD_get_daemon_info)
  const union MHD_DaemonInfo *info = function(daemon, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : 0;
}

// The listening socket of a daemon (-1 when unknown).
static inline int trove_mhd_listen_socket(struct MHD_Daemon *daemon) {
  TROVE_MHD_FUNCTION(MHD_get_daemon_info)
  const union MHD_DaemonInfo *info = function(daemon, MHD_DAEMON_INFO_LISTEN_FD);
  return info ? info->listen_fd : -1;
}

// The content reader's answers for the end of a body and a failure.
static inline ssize_t trove_mhd_end_of_stream(void) { return MHD_CONTENT_READER_END_OF_STREAM; }
static inline ssize_t trove_mhd_end_with_error(void) { return MHD_CONTENT_READER_END_WITH_ERROR; }

// The status of the response queued on a connection (0 when none was),
// including the ones libmicrohttpd sends itself (431 for a head too large).
static inline unsigned int trove_mhd_status(struct MHD_Connection *connection) {
  TROVE_MHD_FUNCTION(MHD_get_connection_info)
  const union MHD_ConnectionInfo *info =
      function(connection, MHD_CONNECTION_INFO_HTTP_STATUS);
  return info ? info->http_status : 0;
}

// The socket of a connection (-1 when unknown): a CONNECT tunnel relays on
// it while libmicrohttpd holds the connection suspended.
static inline int trove_mhd_socket(struct MHD_Connection *connection) {
  TROVE_MHD_FUNCTION(MHD_get_connection_info)
  const union MHD_ConnectionInfo *info =
      function(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info ? info->connect_fd : -1;
}
