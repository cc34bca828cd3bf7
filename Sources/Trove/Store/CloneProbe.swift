import Synchronization

/// Whether clones work between two filesystems, learnt once per pair of
/// devices and remembered for the life of the store handle (as uv and pnpm
/// do), with the reason when they do not.
final class CloneProbe: Sendable {
  /// A verdict learnt for a pair of devices.
  private struct Learnt {
    var source: UInt64
    var destination: UInt64
    var verdict: Verdict
  }

  /// What was learnt about one pair.
  enum Verdict: Sendable, Equatable {
    case supported
    case unsupported(SystemCallError)
  }

  /// A list, not a dictionary: a store meets a few devices, and a
  /// dictionary keyed by a type of Trove's costs a short command, at its
  /// first use, a scan of every protocol conformance in the binary.
  private let learnt = Mutex<[Learnt]>([])

  func verdict(from source: UInt64, to destination: UInt64) -> Verdict? {
    learnt.withLock { list in
      list.first { $0.source == source && $0.destination == destination }?.verdict
    }
  }

  func record(_ verdict: Verdict, from source: UInt64, to destination: UInt64) {
    learnt.withLock { list in
      list.removeAll { $0.source == source && $0.destination == destination }
      list.append(Learnt(source: source, destination: destination, verdict: verdict))
    }
  }
}
