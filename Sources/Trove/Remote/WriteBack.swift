import Foundation
import Synchronization

/// The store's write-back: what a put or fetch stores goes to the store's
/// writable remotes as each remote's ``RemoteWrite`` says — `sync` before
/// the call returns, `async` by a drain of the upload queue that the call
/// starts and does not wait for, `off` only when asked
/// (``Store/uploadQueued(to:everything:ifIdle:probing:onEach:)``). It never fails
/// the put or fetch: a remote that fails is a warning
/// (``StoreConfiguration/onWarning``), and its objects stay queued.
///
/// The upload queue follows from the index, so what an `async` drain has
/// not sent when the process ends is sent by the next drain of any process.
/// How an `async` drain is started is the embedding program's choice
/// (``StoreConfiguration/startsBackgroundUpload``): by default a thread of
/// this process, one at a time, which drains again when more was stored
/// while it ran.
final class WriteBack: Sendable {
  private struct State: Sendable {
    var draining = false
    var again = false
  }
  private let state = Mutex(State())

  /// After a put or fetch of `store` stored something: sends it on.
  func run(_ store: Store) {
    guard store.configuration.writesBack, !store.isReadOnly,
      let remotes = try? store.remotes().filter({ !$0.readOnly }), !remotes.isEmpty
    else { return }
    var background = false
    for remote in remotes {
      switch remote.write ?? .async {
      case .off: continue
      case .async: background = true
      case .sync: upload(store, to: remote.name, waiting: true)
      }
    }
    guard background else { return }
    if let start = store.configuration.startsBackgroundUpload {
      if let failure = start(store.root) {
        store.warn(
          "cannot start the background upload of store '\(store.root)': \(failure); the objects stay queued"
        )
      }
      return
    }
    let first = state.withLock { state -> Bool in
      if state.draining {
        state.again = true
        return false
      }
      state.draining = true
      return true
    }
    guard first else { return }
    let thread = Thread { [self] in drainInProcess(store) }
    thread.name = "trove write-back"
    thread.start()
  }

  /// Drains the queue to every writable remote until nothing more was
  /// stored meanwhile by this process.
  private func drainInProcess(_ store: Store) {
    while true {
      upload(store, to: nil, waiting: false)
      let more = state.withLock { state -> Bool in
        if state.again {
          state.again = false
          return true
        }
        state.draining = false
        return false
      }
      if !more { return }
    }
  }

  /// One drain: a `sync` one (`waiting`) waits for a drain under way to let
  /// go of the queue and then sends what is left, so the call returns only
  /// once it is up; a background one is never behind another (that one
  /// sends these too), and passes over `off` remotes.
  private func upload(_ store: Store, to remote: String?, waiting: Bool) {
    do {
      _ = try store.uploadQueued(to: remote, ifIdle: !waiting) { item in
        // A remote its breaker skips was warned about when it failed.
        if let error = item.error, !item.skippedByBreaker {
          store.warn("not uploaded: \(store.line(error))")
        }
      }
    } catch {
      store.warn(
        "not uploaded to \(remote.map { "remote '\($0)'" } ?? "the remotes"): \(store.line(error))")
    }
  }

  /// Whether an in-process drain is running (tests).
  var isDraining: Bool { state.withLock { $0.draining } }
}
