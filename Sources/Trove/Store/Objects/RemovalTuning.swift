/// Switches for the removal engine's optimisations, so that each can be
/// measured against its absence (`trove-bench --suite removal` runs every
/// variant in one process) and tested both ways. None changes what a
/// removal does, only what it costs. A store uses ``tuned`` unless its
/// configuration says otherwise.
@_spi(Measuring) public struct RemovalTuning: Sendable, Hashable {
  /// Records packed per `removals` row (1: a row per object).
  public var recordsPerRow: Int
  /// Whether XFS unlinks go one thread per allocation group.
  public var unlinkLanes: Bool
  /// The fewest rows a delete runs with the connection's triggers off,
  /// the counters then updated once (`Int.max`: never).
  public var bulkRemovalMinimum: Int

  public init(
    recordsPerRow: Int, unlinkLanes: Bool, bulkRemovalMinimum: Int
  ) {
    self.recordsPerRow = recordsPerRow
    self.unlinkLanes = unlinkLanes
    self.bulkRemovalMinimum = bulkRemovalMinimum
  }

  /// The switches every store's engine uses.
  public static let tuned = RemovalTuning(
    recordsPerRow: RemovalRow.capacity, unlinkLanes: true, bulkRemovalMinimum: 64)

  /// Every optimisation off.
  public static let untuned = RemovalTuning(
    recordsPerRow: 1, unlinkLanes: false, bulkRemovalMinimum: .max)
}
