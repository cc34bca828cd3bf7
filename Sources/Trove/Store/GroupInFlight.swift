import Foundation
import Synchronization

/// One group commit of a put of many files, run on a thread of its own
/// while the caller stages the next group, so that the group's two syncs
/// are waited for while the next files are read and written
/// (``Store/put(files:priority:onProgress:onResult:)``).
///
/// The work runs once; its outcomes are handed back by ``wait()``, which
/// the caller calls once. Unchecked sendability: the work and the values it
/// captured are used only on the commit's thread until it finishes, and the
/// outcomes are written before the semaphore is signalled and read after
/// it is waited for.
final class GroupInFlight: @unchecked Sendable {
  typealias Outcomes = [(index: Int, result: Result<PutResult, TroveError>)]

  private var work: (() -> Outcomes)?
  private var outcomes: Outcomes = []
  private let finished = Atomic<Bool>(false)
  private let done = DispatchSemaphore(value: 0)

  /// Starts `work` on a new thread.
  init(_ work: @escaping () -> Outcomes) {
    self.work = work
    let thread = Thread { [self] in
      outcomes = self.work?() ?? []
      self.work = nil
      finished.store(true, ordering: .releasing)
      done.signal()
    }
    // SQLite and the commit's own frames: as much stack as the main thread.
    thread.stackSize = 8 << 20
    thread.start()
  }

  /// Whether the commit is done: ``wait()`` will not block.
  var isFinished: Bool { finished.load(ordering: .acquiring) }

  /// The outcomes, once the commit is done.
  func wait() -> Outcomes {
    done.wait()
    return outcomes
  }
}
