import CMicroHTTPD
import Foundation
import Synchronization
@_spi(Serving) import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// One mirror URL's fetch in this server, and the requests waiting on it:
/// the clients of one URL share it (the store's own lock makes one
/// transfer across processes as well). Once the body is arriving in a part
/// file with a known length, plain `GET`s are answered from that file as it
/// grows (read-along); the others get the fetch's outcome.
///
/// A read-along response never presents a body it has not verified: it
/// sends the bytes as they arrive but the last one, and sends that only
/// when the fetch has verified the body (the length announced, every
/// expected checksum; before the store's commit, which may take a sync of
/// the whole body) and the bytes it read hash to the fetch's digest. Any
/// other end (the origin failing, a restarted transfer, a mismatch)
/// closes the connection short of the announced `Content-Length`.
final class MirrorTransfer: @unchecked Sendable {
  let url: String
  /// How the fetch ended.
  enum End {
    case succeeded(BlobDigest, size: Int64)
    case failed
  }
  /// The growing part file and what its response says.
  struct Source {
    let file: Int32
    let total: Int64
    let headers: MirroredHeaders
  }
  /// A connection libmicrohttpd holds suspended; only resumed, under the
  /// lock, by whoever takes it from the list.
  private struct Suspended: @unchecked Sendable {
    let connection: OpaquePointer
  }
  private struct State {
    /// Requests suspended until there is a body to read along or an outcome.
    var waiters: [PendingFetch] = []
    var source: Source?
    /// Whether the fetch has returned (``finish(_:stored:)``); `end` may
    /// be set before, when the body was verified ahead of the commit.
    var finished = false
    /// Bumped each time the file may have grown or the fetch ended.
    var generation = 0
    /// Read-along connections suspended until the next bump.
    var sleepers: [Suspended] = []
    var end: End?
    var stopping = false
  }
  private let state = Mutex(State())

  init(url: String) { self.url = url }

  deinit {
    if let file = state.withLock({ $0.source?.file }) { close(file) }
  }

  /// What a request joining the transfer does.
  enum Joined {
    /// It waits, for a body to read along or the outcome.
    case waiting
    /// The body is arriving: it reads along at once.
    case readAlong
    /// The fetch has ended: it fetches on its own.
    case ended
  }

  /// Adds a request (suspended) to the transfer.
  func wait(_ fetch: PendingFetch) -> Joined {
    state.withLock {
      if $0.finished { return .ended }
      // Also after the verdict, while the commit runs: the body is whole.
      if $0.source != nil, fetch.readsAlong { return .readAlong }
      $0.waiters.append(fetch)
      return .waiting
    }
  }

  /// The fetch's progress: the first report of a part file with a known
  /// length (not a package index page, which is rewritten whole) opens it
  /// and hands it to the waiting `GET`s; every report wakes the readers.
  func progress(_ report: FetchProgress) {
    var ready: [PendingFetch] = []
    state.withLock {
      // A body first seen at its verdict (it came within one report) is
      // answered with the fetch's outcome, as a package index page is.
      if $0.source == nil, report.verified == nil, let path = report.partFile,
        let total = report.total, total > 0, PackageIndex.format(of: report.contentType) == nil
      {
        let file = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)
        if file >= 0 {
          var headers: [(String, String)] = [("X-Trove-Cache", "miss")]
          if let modified = report.lastModified { headers.append(("Last-Modified", modified)) }
          $0.source = Source(
            file: file, total: total,
            headers: MirroredHeaders(
              contentType: report.contentType, etag: report.etag, headers: headers))
          ready = $0.waiters.filter(\.readsAlong)
          $0.waiters.removeAll { $0.readsAlong }
        }
      }
      if $0.end == nil, let digest = report.verified, let source = $0.source,
        report.received == source.total
      {
        // The readers' verdict; the waiters wait on for the stored outcome.
        $0.end = .succeeded(digest, size: source.total)
      }
      $0.generation += 1
      for sleeper in $0.sleepers { trove_mhd_resume_connection(sleeper.connection) }
      $0.sleepers.removeAll()
    }
    for fetch in ready { fetch.finish(.readAlong(self)) }
  }

  /// The fetch ended with `outcome` (`digest` and `size` when it stored a
  /// body): the waiters get it, the readers learn how it ended.
  func finish(_ outcome: MirrorOutcome, stored: (BlobDigest, Int64)?) {
    let end: End = stored.map { .succeeded($0.0, size: $0.1) } ?? .failed
    let waiters = state.withLock { state in
      // Bytes verified stay verified if the store then fails to keep them.
      if case .succeeded? = state.end {} else { state.end = end }
      state.finished = true
      state.generation += 1
      for sleeper in state.sleepers { trove_mhd_resume_connection(sleeper.connection) }
      state.sleepers.removeAll()
      let waiting = state.waiters
      state.waiters.removeAll()
      return waiting
    }
    for fetch in waiters { fetch.finish(outcome) }
  }

  /// The server stops: every suspended reader is resumed and ends short.
  func stop() {
    state.withLock {
      $0.stopping = true
      for sleeper in $0.sleepers { trove_mhd_resume_connection(sleeper.connection) }
      $0.sleepers.removeAll()
    }
  }

  /// What a reader needs to read on: the file, how the fetch ended, and
  /// the generation it saw.
  fileprivate func snapshot() -> (source: Source?, end: End?, generation: Int, stopping: Bool) {
    state.withLock { ($0.source, $0.end, $0.generation, $0.stopping) }
  }

  /// Suspends `connection` until the next bump, unless there was one since
  /// `generation` (then the caller reads again). Called from the content
  /// reader, as libmicrohttpd requires.
  fileprivate func sleep(_ connection: OpaquePointer, since generation: Int) -> Bool {
    state.withLock {
      guard $0.generation == generation, $0.end == nil, !$0.stopping else { return false }
      trove_mhd_suspend_connection(connection)
      $0.sleepers.append(Suspended(connection: connection))
      return true
    }
  }

  var source: Source? { state.withLock { $0.source } }
}

/// The mirror transfers under way in this server, by URL.
final class MirrorTransfers: Sendable {
  private let table = Mutex<[String: MirrorTransfer]>([:])

  /// The transfer of `url` that `fetch` joins, and whether it is new (its
  /// caller then runs the fetch). A joined transfer that already streams
  /// returns false from ``MirrorTransfer/wait(_:)``.
  func join(_ url: String) -> (MirrorTransfer, isNew: Bool) {
    table.withLock {
      if let running = $0[url] { return (running, false) }
      let transfer = MirrorTransfer(url: url)
      $0[url] = transfer
      return (transfer, true)
    }
  }

  func remove(_ transfer: MirrorTransfer) {
    table.withLock {
      if $0[transfer.url] === transfer { $0[transfer.url] = nil }
    }
  }

  func stopAll() {
    for transfer in table.withLock({ Array($0.values) }) { transfer.stop() }
  }
}

/// One read-along response: where it is in the part file and the hash of
/// what it sent.
final class ReadAlongStream: @unchecked Sendable {
  let transfer: MirrorTransfer
  let source: MirrorTransfer.Source
  let connection: OpaquePointer
  var position: Int64 = 0
  var hasher = XXH3Hasher()

  init(transfer: MirrorTransfer, source: MirrorTransfer.Source, connection: OpaquePointer) {
    self.transfer = transfer
    self.source = source
    self.connection = connection
  }

  /// Up to `capacity` next bytes into `buffer`; 0 after suspending the
  /// connection until more arrive; -1 or -2 (libmicrohttpd's end and error).
  func read(into buffer: UnsafeMutableRawPointer, capacity: Int) -> Int {
    while true {
      let (_, end, generation, stopping) = transfer.snapshot()
      if stopping { return trove_mhd_end_with_error() }
      // The last byte waits for the verdict.
      let limit = end == nil ? source.total - 1 : source.total
      if position < limit {
        let wanted = Int(min(Int64(capacity), limit - position))
        let n = pread(source.file, buffer, wanted, off_t(position))
        if n < 0 { return trove_mhd_end_with_error() }
        if n > 0 {
          hasher.update(UnsafeRawBufferPointer(start: buffer, count: n))
          position += Int64(n)
          if position == source.total {
            guard case .succeeded(let digest, let size)? = end, size == source.total,
              hasher.finalize() == digest
            else { return trove_mhd_end_with_error() }
          }
          return n
        }
      }
      if let end {
        if case .succeeded = end, position == source.total { return trove_mhd_end_of_stream() }
        // Failed, or the file holds less than the body: never a short body.
        return trove_mhd_end_with_error()
      }
      if transfer.sleep(connection, since: generation) { return 0 }
    }
  }
}

/// libmicrohttpd asks for a read-along response's next bytes.
let readAlongBlock: MHD_ContentReaderCallback = { context, _, buffer, capacity in
  guard let context, let buffer else { return trove_mhd_end_with_error() }
  let stream = Unmanaged<ReadAlongStream>.fromOpaque(context).takeUnretainedValue()
  return stream.read(into: UnsafeMutableRawPointer(buffer), capacity: capacity)
}

let releaseReadAlong: MHD_ContentReaderFreeCallback = { context in
  guard let context else { return }
  Unmanaged<ReadAlongStream>.fromOpaque(context).release()
}
