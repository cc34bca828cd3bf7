/// The records a store serves as the read side of a WebDAV remote's
/// layout (`trove serve`; see ``RemoteNames``), so another store reads
/// through from it as from any remote: the layout record, and each key's
/// record as `remote push` writes it unsigned. Signed entries (`sigs/`)
/// are not served: a store that trusts keys for such a remote reads
/// nothing from it.
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
  /// is `name` (unsigned): nil when no key has that name, its object is
  /// gone, or its URL holds a login (``RemoteKeyRecord/holdsLogin(_:)``:
  /// such a record is never published). O(log keys).
  @_spi(Serving)
  public func servedKeyRecord(named name: String) throws(TroveError) -> [UInt8]? {
    let found = try index().read("look up the key record '\(name)'") {
      (tx) throws(TroveError) -> (KeyBinding, [Checksum])? in
      guard let binding = try tx.binding(forRecordName: name) else { return nil }
      return (binding, try tx.checksums(of: binding.digest))
    }
    guard let (binding, checksums) = found, !RemoteKeyRecord.holdsLogin(binding),
      try objects.find(binding.digest, confirmingMiss: true) != nil
    else { return nil }
    return RemoteKeyRecord(binding, checksums: checksums).encoded()
  }
}
