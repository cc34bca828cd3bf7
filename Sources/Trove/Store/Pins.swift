extension Store {
  /// Pins `digest` under `name`: no sweep removes it while the pin holds.
  /// `for` a duration, the pin is a lease that lapses by itself — a
  /// benchmark run or CI job holds its inputs for its duration, and a
  /// crashed job's lease runs out. Pins with different names are
  /// independent, so users of one store do not unpin each other's data.
  /// Pinning again under the same name replaces that pin.
  ///
  /// The pin is written in the index transaction that confirms the object
  /// is there: when this returns, the object is present and protected; a
  /// sweep that chose it first has either removed it (and this throws) or
  /// will leave it.
  ///
  /// - Throws: `.notFound` when the store does not hold `digest`.
  public func pin(_ digest: BlobDigest, name: String = "default", for duration: Duration? = nil)
    throws(TroveError)
  {
    try requireWritable()
    let now = currentTimeNanoseconds()
    try objects.pin(
      digest, name: name, expires: duration.map { now.addingSaturated(max(0, $0.nanoseconds)) })
  }

  /// Pins `digest` as ``pin(_:name:for:)`` does, first bringing it back
  /// from the remotes when the store does not hold it (an object a sweep
  /// evicted because a remote holds it): the copy is local, and stays so,
  /// when this returns. The blob is rehashed on its way in, as every read
  /// through a remote is.
  ///
  /// - Throws: `.notFound` when neither the store nor any remote holds
  ///   `digest`; `.unavailable` when the store does not and a remote
  ///   could not be asked (unreachable, failing, or skipped by its
  ///   circuit breaker), naming it.
  public func pinLocal(
    _ digest: BlobDigest, name: String = "default", for duration: Duration? = nil
  ) throws(TroveError) {
    try requireWritable()
    // A sweep may evict what was just brought back before the pin's
    // transaction confirms it: then bring it back again, a few times.
    var attempts = 0
    while true {
      var unasked: [(why: String, remedy: TroveError.Remedy?)] = []
      if try objects.find(digest, confirmingMiss: true) == nil,
        !readThrough(digest, unanswered: { unasked.append(($0, $1)) })
      {
        if let first = unasked.first {
          throw TroveError(
            .unavailable,
            "\(digest) is not in store '\(root)', and \(first.why); not pinned",
            value: digest.description, remedy: first.remedy)
        }
        throw TroveError(
          .notFound,
          "\(digest) is neither in store '\(root)' nor on any of its remotes",
          value: digest.description)
      }
      do throws(TroveError) {
        return try pin(digest, name: name, for: duration)
      } catch  where error.code == .notFound && attempts < 3 {
        attempts += 1
      }
    }
  }

  /// Removes `name`'s pin of `digest`; whether there was one. Other names'
  /// pins stay.
  @discardableResult
  public func unpin(_ digest: BlobDigest, name: String = "default") throws(TroveError) -> Bool {
    try requireWritable()
    return try objects.unpin(digest, name: name)
  }

  /// Every pin, lapsed leases included (a sweep removes those), ordered by
  /// digest and name.
  public func pins() throws(TroveError) -> [Pin] {
    try index().read("list pins") { (tx) throws(TroveError) in try tx.pins() }
  }
}
