import CCurl
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A libcurl share handle for the clients of one ``Store/fetch(_:jobs:options:progress:)``:
/// their easy handles, each driven by its own thread, share one pool of
/// connections, the DNS cache and TLS sessions, so a connection opened for
/// one URL is reused for the next, whichever thread fetches it.
///
/// (One `curl_multi` handle driving every transfer was tried: the body
/// callbacks — hashing, writing, syncing — then all ran on its one thread,
/// and 4 parallel 256 MiB fetches with SHA-256 took as long as one after
/// the other. Here each thread hashes and writes its own bodies.)
final class HTTPShare: @unchecked Sendable {
  let handle: UnsafeMutableRawPointer
  /// One mutex for each kind of shared data (`curl_lock_data`).
  private let locks: UnsafeMutablePointer<pthread_mutex_t>
  private static let kinds = Int(CURL_LOCK_DATA_LAST.rawValue)

  init() throws(TroveError) {
    guard HTTPClient.libraryReady, let share = curl_share_init() else {
      throw TroveError(.ioError, "cannot start libcurl: curl_share_init failed")
    }
    handle = share
    locks = .allocate(capacity: Self.kinds)
    for i in 0..<Self.kinds { pthread_mutex_init(locks + i, nil) }
    let user = Unmanaged.passUnretained(self).toOpaque()
    var code = trove_curl_share_locks(
      share,
      { _, data, _, user in
        let share = Unmanaged<HTTPShare>.fromOpaque(user!).takeUnretainedValue()
        pthread_mutex_lock(share.locks + Int(data.rawValue))
      },
      { _, data, user in
        let share = Unmanaged<HTTPShare>.fromOpaque(user!).takeUnretainedValue()
        pthread_mutex_unlock(share.locks + Int(data.rawValue))
      }, user)
    for data in [CURL_LOCK_DATA_CONNECT, CURL_LOCK_DATA_DNS, CURL_LOCK_DATA_SSL_SESSION]
    where code == CURLSHE_OK {
      code = trove_curl_share_data(share, data)
    }
    guard code == CURLSHE_OK else {
      curl_share_cleanup(share)
      throw TroveError(
        .ioError, "cannot share libcurl connections: \(String(cString: curl_share_strerror(code)))")
    }
  }

  /// Call once every easy handle using it is gone.
  deinit {
    curl_share_cleanup(handle)
    for i in 0..<Self.kinds { pthread_mutex_destroy(locks + i) }
    locks.deallocate()
  }
}
