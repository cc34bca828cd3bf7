extension Store {
  /// Makes the index agree with the objects folder, which is the truth,
  /// one fan-out folder per transaction: adopts object files the index
  /// does not know (an interrupted put, a lost or deleted index), drops rows
  /// whose file is confirmed missing inside the transaction (with their pins
  /// and keys), corrects rows whose form or size is wrong, and removes the
  /// compressed copy of a digest stored in both forms. An index with a
  /// damaged page is set aside first (kept beside it as
  /// `index.sqlite.damaged-…`) and a new one built. Safe while other
  /// processes put and sweep. Runs by itself when a store is opened with a
  /// new index. O(objects).
  ///
  /// - Returns: what was found and fixed.
  @discardableResult
  public func rebuildIndex() throws(TroveError) -> ReconcileReport {
    try requireWritable()
    _ = objects.takeRebuildReport()
    try objects.checkIndex()
    var report = try objects.reconcileAll(repair: true)
    // A new index (this open's, or one set aside as damaged just now) was
    // filled before: that is what this rebuild did.
    if let first = objects.takeRebuildReport() { report.add(first) }
    return report
  }
}
