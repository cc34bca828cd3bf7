// GNU libmicrohttpd (Debian libmicrohttpd-dev): the HTTP server of
// `trove serve`. Its variadic functions and cast macros, which Swift does
// not import, get fixed-argument wrappers here.
#include <sys/socket.h>
#include <stdint.h>
#include <microhttpd.h>

// MHD_start_daemon is variadic: its options go in an array instead.
static inline struct MHD_Daemon *trove_mhd_start(
    unsigned int flags, MHD_AccessHandlerCallback handler, void *handler_context,
    const struct MHD_OptionItem *options) {
  return MHD_start_daemon(flags, 0, NULL, NULL, handler, handler_context, MHD_OPTION_ARRAY,
                          options, MHD_OPTION_END);
}

// The peer's address of a connection, or NULL.
static inline const struct sockaddr *trove_mhd_client_address(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  return info ? info->client_addr : NULL;
}

// The port a daemon listens on (0 when unknown).
static inline uint16_t trove_mhd_port(struct MHD_Daemon *daemon) {
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
  return info ? info->port : 0;
}

// The content reader's answers for the end of a body and a failure.
static inline ssize_t trove_mhd_end_of_stream(void) { return MHD_CONTENT_READER_END_OF_STREAM; }
static inline ssize_t trove_mhd_end_with_error(void) { return MHD_CONTENT_READER_END_WITH_ERROR; }

// The status of the response queued on a connection (0 when none was),
// including the ones libmicrohttpd sends itself (431 for a head too large).
static inline unsigned int trove_mhd_status(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_HTTP_STATUS);
  return info ? info->http_status : 0;
}

// The socket of a connection (-1 when unknown): a CONNECT tunnel relays on
// it while libmicrohttpd holds the connection suspended.
static inline int trove_mhd_socket(struct MHD_Connection *connection) {
  const union MHD_ConnectionInfo *info =
      MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
  return info ? info->connect_fd : -1;
}
