extension Store {
  /// Pins `digest` under `name`: no sweep removes it while the pin holds.
  /// With `duration` (seconds) the pin is a lease that lapses by itself — a
  /// benchmark run or CI job holds its inputs for its duration, and a
  /// crashed job's lease runs out. Pins with different names are
  /// independent, so users of one store do not unpin each other's data.
  /// Pinning again under the same name replaces that pin.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  public func pin(_ digest: Digest, name: String = "default", duration: Int64? = nil)
    throws(TroveError)
  {
    guard try objectStatus(digest) != nil else { throw notFound(digest) }
    let now = currentTimeNanoseconds()
    try index().pin(
      digest, name: name, expires: duration.map { now + $0 * 1_000_000_000 }, now: now)
  }

  /// Removes `name`'s pin of `digest`; whether there was one. Other names'
  /// pins stay.
  @discardableResult
  public func unpin(_ digest: Digest, name: String = "default") throws(TroveError) -> Bool {
    try index().unpin(digest, name: name)
  }

  /// Every pin, lapsed leases included (a sweep removes those), ordered by
  /// digest and name.
  public func pins() throws(TroveError) -> [Pin] {
    try index().pins()
  }
}
