import Synchronization

/// Requests to one remote made by several threads at once, for transfers
/// of many objects: each thread asks on a session of its own
/// (``RemoteBackend/session(through:)``), and one libcurl multi handle
/// runs the transfers of all of them, so a connection opened for one
/// object is reused for the next, and no more are open than threads
/// asking. A backend with no sessions (Redis, which pipelines instead)
/// is asked by the calling thread alone, one object after another.
final class RemoteSessions: @unchecked Sendable {
  /// Objects in flight at most.
  static let standardWidth = 8

  /// A backend, handed to one thread at a time.
  private struct Session: @unchecked Sendable {
    let backend: any RemoteBackend
  }

  private let backend: Session
  private let multi: HTTPMulti?
  /// The sessions, made once and used by every ``forEach(_:_:)``.
  private let sessions: [Session]

  /// Sessions of `backend` for up to `width` threads; none (one thread)
  /// when it has no sessions or they cannot be made.
  init(_ backend: any RemoteBackend, width: Int = standardWidth) {
    self.backend = Session(backend: backend)
    var multi: HTTPMulti?
    var sessions: [Session] = []
    if width > 1, backend.hasSessions, let made = try? HTTPMulti(keeping: width) {
      do throws(TroveError) {
        for _ in 0..<width {
          guard let session = try backend.session(through: made) else { break }
          sessions.append(Session(backend: session))
        }
      } catch {
        sessions.removeAll()
      }
      if sessions.isEmpty { made.shutdown() } else { multi = made }
    }
    self.multi = multi
    self.sessions = sessions
  }

  /// Whether several threads ask at once.
  var isParallel: Bool { !sessions.isEmpty }

  /// Runs `body` for every index in `0..<count`, each on some thread's
  /// session (or on the backend, when there are none), up to one per
  /// session at once. Returns when all are done. One object alone is
  /// asked of the backend itself, on this thread.
  func forEach(_ count: Int, _ body: @escaping @Sendable (any RemoteBackend, Int) -> Void) {
    guard isParallel, count > 1 else {
      for i in 0..<count { body(backend.backend, i) }
      return
    }
    let sessions = self.sessions
    let taken = Atomic<Int>(0)
    // Each thread takes its own session before its first index.
    Parallel.forEach(
      count, width: sessions.count,
      context: { sessions[taken.add(1, ordering: .relaxed).oldValue] },
      { (session: Session, i: Int) -> Void in body(session.backend, i) })
  }

  /// Stops the multi handle. Call once, after the last ``forEach(_:_:)``.
  func close() {
    multi?.shutdown()
  }
}
