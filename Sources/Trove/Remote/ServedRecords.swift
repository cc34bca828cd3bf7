/// The records a store serves as the read side of a WebDAV remote's
/// layout (`trove serve`; see ``RemoteNames``), so another store reads
/// through from it as from any remote: the layout record, each key's
/// record, and each blob's signed entry (`sigs/`), as `remote push` by
/// this store writes them: signed with its `signing-key` when it has one
/// (``ServedSigning``), else unsigned and with no signed entries.
extension Store {
  /// `trove-remote.json`: the layout this build reads and writes.
  @_spi(Serving)
  public static var servedLayoutRecord: [UInt8] { RemoteLayout.current.encoded() }

  /// Whether `name` has the form of a key record's name (32 lowercase hex
  /// digits, the XXH3-128 of the key).
  @_spi(Serving)
  public static func isKeyRecordName(_ name: Substring) -> Bool {
    name.utf8.count == 32
      && name.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
  }

  /// The record `remote push` would write for the key whose record name
  /// is `name`, signed by `signing` when given: nil when no key has that
  /// name, its object is gone, its URL holds a login
  /// (``RemoteKeyRecord/holdsLogin(_:)``: such a record is never
  /// published), or a signer would not vouch for it (a binding read from a
  /// remote). O(log keys), and a read of the object the first time it is
  /// signed.
  @_spi(Serving)
  public func servedKeyRecord(named name: String, signing: ServedSigning? = nil)
    throws(TroveError) -> [UInt8]?
  {
    let found = try index().read("look up the key record '\(name)'") {
      (tx) throws(TroveError) -> (KeyBinding, [Checksum])? in
      guard let binding = try tx.binding(forRecordName: name) else { return nil }
      return (binding, try tx.checksums(of: binding.digest))
    }
    guard let (binding, checksums) = found,
      try objects.find(binding.digest, confirmingMiss: true) != nil
    else { return nil }
    var facts: SignedFacts?
    if let signing {
      guard let known = try signing.facts(of: binding.digest, in: self) else { return nil }
      facts = known
    }
    let (record, _) = publishedRecord(
      binding, checksums: checksums, signer: signing?.signer, facts: facts,
      othersWriteIndex: signing == nil ? nil : othersMayWriteIndex(),
      time: currentTimeNanoseconds() / 1_000_000_000)
    return record?.encoded()
  }

  /// The signed entry (`sigs/<aa>/<hex>.json`) `remote push` by this store
  /// would write for `digest`'s blob, signed by `signing`: nil when the
  /// store does not hold it. A read of the object the first time.
  @_spi(Serving)
  public func servedSignedEntry(of digest: BlobDigest, signing: ServedSigning)
    throws(TroveError) -> [UInt8]?
  {
    guard let facts = try signing.facts(of: digest, in: self) else { return nil }
    return SignedObjectEntry(digest: digest, facts: facts, signer: signing.signer, keeping: nil)
      .encoded()
  }
}
