import Synchronization

/// Whether clones work between two filesystems, learnt once per pair of
/// devices and remembered for the life of the store handle (as uv and pnpm
/// do), with the reason when they do not.
final class CloneProbe: Sendable {
  struct Pair: Hashable {
    var source: UInt64
    var destination: UInt64
  }

  /// What was learnt about one pair.
  enum Verdict: Sendable, Equatable {
    case supported
    case unsupported(SystemCallError)
  }

  private let verdicts = Mutex<[Pair: Verdict]>([:])

  func verdict(from source: UInt64, to destination: UInt64) -> Verdict? {
    verdicts.withLock { $0[Pair(source: source, destination: destination)] }
  }

  func record(_ verdict: Verdict, from source: UInt64, to destination: UInt64) {
    verdicts.withLock { $0[Pair(source: source, destination: destination)] = verdict }
  }
}
