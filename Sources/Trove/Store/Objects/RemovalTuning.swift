/// Switches for the removal engine's optimisations, so that each can be
/// measured against its absence (`trove-bench --suite removal` runs every
/// variant in one process) and tested both ways. None changes what a
/// removal does, only what it costs. A store uses ``tuned`` unless its
/// configuration says otherwise.
@_spi(Measuring) public struct RemovalTuning: Sendable, Hashable {
  /// Records packed per `removals` row (1: a row per object).
  public var recordsPerRow: Int
  /// WAL pages a commit may leave before it checkpoints, during a
  /// removal of several parts (1,000: SQLite's default, always).
  public var checkpointPages: Int
  /// Whether XFS unlinks go one thread per allocation group.
  public var unlinkLanes: Bool
  /// How many times the first part later parts may grow (1: never).
  public var partGrowth: Int
  /// The fewest rows a delete runs with the connection's triggers off,
  /// the counters then updated once (`Int.max`: never).
  public var bulkRemovalMinimum: Int

  public init(
    recordsPerRow: Int, checkpointPages: Int, unlinkLanes: Bool, partGrowth: Int,
    bulkRemovalMinimum: Int
  ) {
    self.recordsPerRow = recordsPerRow
    self.checkpointPages = checkpointPages
    self.unlinkLanes = unlinkLanes
    self.partGrowth = partGrowth
    self.bulkRemovalMinimum = bulkRemovalMinimum
  }

  /// The switches every store's engine uses.
  public static let tuned = RemovalTuning(
    recordsPerRow: RemovalRow.capacity, checkpointPages: 16384, unlinkLanes: true, partGrowth: 4,
    bulkRemovalMinimum: 64)

  /// Every optimisation off.
  public static let untuned = RemovalTuning(
    recordsPerRow: 1, checkpointPages: 1000, unlinkLanes: false, partGrowth: 1,
    bulkRemovalMinimum: .max)
}
