import Foundation

/// What one server allows its clients, each with a default and a flag of
/// `trove serve`.
public struct Limits: Sendable, Hashable {
  /// Connections open at once, per listening address (`--max-connections`);
  /// more are refused by closing them.
  public var connections = 256
  /// Seconds a connection may stay idle — no byte received or sent —
  /// before it is closed (`--idle-timeout`): a client that opens
  /// connections and sends nothing holds none for long.
  public var idleTimeout = 30
  /// Bytes of memory per connection, which bound the request line and
  /// headers (`--max-header-size`): a longer request head gets 431.
  public var headerBytes = 32 * 1024
  /// Threads answering requests, per listening address (`--threads`):
  /// one a CPU, as nginx's `worker_processes auto`, and at least 2. More
  /// threads than CPUs only switch among themselves on small requests;
  /// a `--writable` server's commits wait for the disk on theirs.
  public var threads = Limits.threadsForCPUs(ProcessInfo.processInfo.activeProcessorCount)

  /// The default thread count for a machine of `cpus` CPUs.
  static func threadsForCPUs(_ cpus: Int) -> Int { min(max(2, cpus), 256) }
  /// Seconds a stopping server lets responses under way finish
  /// (`--grace-period`) before it closes them.
  public var gracePeriod = 30
  /// Mirror fetches run at once (`--max-origin-transfers`); more wait
  /// for one to end. Requests of one URL make one transfer whatever this is.
  public var originTransfers = 32

  /// The defaults.
  public init() {}
}
