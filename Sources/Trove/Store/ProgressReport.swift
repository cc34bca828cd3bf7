/// How far a long operation has come: a put of a large file or stream, a
/// `Store.verify(repair:onProgress:)`, a ``Store/recompress(onProgress:)``.
///
/// Handed to an ``ProgressHandler`` on the thread doing the work, at most
/// once per block or object the operation already handles (1 MiB for
/// bytes): a handler should be quick (note the values, draw later). An
/// operation given no handler pays nothing for it.
public struct ProgressReport: Sendable, Hashable {
  /// What ``completed`` and ``total`` count.
  public enum Unit: String, Sendable, Hashable {
    /// Bytes read (the object's length, not its compressed form).
    case bytes
    /// Objects handled.
    case items
  }

  /// What the counts count.
  public var unit: Unit
  /// How many bytes or items are done so far.
  public var completed: Int64
  /// How many there are in all, or nil when that is not known (a stream).
  public var total: Int64?

  /// A report of `completed` of `total` `unit`s.
  public init(unit: Unit, completed: Int64, total: Int64?) {
    self.unit = unit
    self.completed = completed
    self.total = total
  }
}

/// Receives ``ProgressReport``s while an operation runs. Called on the
/// working thread; never after the operation returns.
public typealias ProgressHandler = @Sendable (ProgressReport) -> Void

/// A running count of bytes for one operation, handed on to its handler
/// as ``ProgressReport``s. Made only when there is a handler: an
/// operation without one carries a nil and pays nothing.
final class ByteProgress {
  private let total: Int64?
  private let handler: ProgressHandler
  private var completed: Int64 = 0

  init(total: Int64?, handler: @escaping ProgressHandler) {
    self.total = total
    self.handler = handler
  }

  /// Counts `count` more bytes and reports the sum.
  func add(_ count: Int) {
    completed += Int64(count)
    handler(ProgressReport(unit: .bytes, completed: completed, total: total))
  }

  /// Starts again from zero (the same bytes are about to be read again).
  func restart() {
    completed = 0
  }
}
