import Foundation

/// The write side of the WebDAV layout a store serves (`trove serve
/// --writable`): blobs come in through the store's own writer
/// (``Store/makeWriter(key:expectedSize:priority:)``, committed with the
/// digest their name claims), and key records through this file, checked
/// as a record read from a remote is.
extension Store {
  /// Binds the key of a key record another store pushed (`PUT
  /// keys/<name>.json`), as a record read through from a remote binds
  /// it: the record must be one of the key `name` names, usable
  /// (``RemoteKeyRecord/validated(remote:)``), and name an object this
  /// store holds, with the length and checksums it claims (computed from
  /// the bytes). The binding counts as pulled (``KeyBinding/isPulled``):
  /// the pushing store chose it, so this store never signs it as its own.
  /// A later record of the key replaces it.
  ///
  /// - Throws: `.invalidArgument` for bytes that are not a record of that
  ///   name, or of a key that is a URL holding a login; `.checksumMismatch` for a record that cannot be used or
  ///   claims what the object is not; `.notFound` when the store does not
  ///   hold its object (the blob goes first).
  @_spi(Serving)
  public func bindPushedKeyRecord(_ bytes: [UInt8], named name: String) throws(TroveError) {
    struct KeyOnly: Decodable { var key: String }
    guard bytes.count <= RemoteKeyRecord.sizeLimit,
      let key = try? JSONDecoder().decode(KeyOnly.self, from: Data(bytes)).key,
      RemoteKeyRecord.name(of: key) == name,
      let decoded = RemoteKeyRecord.decode(bytes, key: key), let digest = decoded.blobDigest
    else {
      throw TroveError(
        .invalidArgument,
        "not a key record whose key's XXH3-128 is \(name) (a JSON object of at most 64 KiB)",
        value: name)
    }
    // A login in a key would be a secret kept, listed and served.
    guard URLUserinfo.range(in: key) == nil else {
      throw TroveError(
        .invalidArgument, "the record's key is a URL holding a login; not stored",
        value: URLUserinfo.split(key).url)
    }
    let record = try decoded.validated(remote: "HTTP client")
    guard let entry = try entry(for: digest) else {
      throw TroveError(
        .notFound, "the store does not hold \(digest): push the blob before its key's record",
        value: digest.description)
    }
    try checkClaims(of: record, key: key, digest: digest, size: entry.size, source: "")
    try objects.bind(
      key: key, to: digest, origin: record.origin.map(Freshness.pulled), existing: .replace,
      pulled: true)
  }
}
