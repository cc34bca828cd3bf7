import Synchronization

/// What a server of a store signs the records it serves as a remote with
/// (`trove serve`, the read side of the WebDAV layout): the store's
/// `signing-key`, as a push by this store would sign. A store that trusts
/// that key for the server (`remote add NAME URL --trust KEY`) then reads
/// from it as from a signed remote.
///
/// The facts of each blob (its length and SHA-256) are read from its bytes,
/// as a push reads them, the first time they are signed, and kept for the
/// server's life: a digest's bytes never change, and a store that serves a
/// blob has checked them against it.
@_spi(Serving)
public final class ServedSigning: Sendable {
  let signer: SigningKey
  private let known = Mutex<[BlobDigest: SignedFacts]>([:])
  /// The most facts kept; past it, the table starts again.
  private static let keptFacts = 65_536

  private init(signer: SigningKey) { self.signer = signer }

  /// The signing of a server of `store`: nil when its settings name no
  /// signing key.
  ///
  /// - Throws: `.invalidConfig` when the `signing-key` setting cannot be
  ///   used (see ``Store`` `signingKey()`: the key file, or a `config.json`
  ///   another user chose it in).
  public static func of(_ store: Store) throws(TroveError) -> ServedSigning? {
    try store.signingKey().map(ServedSigning.init)
  }

  /// The key it signs with, as `--trust` takes it.
  public var publicKey: String { signer.publicKey.description }

  /// `digest`'s facts; nil when `store` does not hold it. O(size) the
  /// first time.
  func facts(of digest: BlobDigest, in store: Store) throws(TroveError) -> SignedFacts? {
    guard try store.objects.find(digest, confirmingMiss: true) != nil else { return nil }
    if let facts = known.withLock({ $0[digest] }) { return facts }
    let facts: SignedFacts
    do throws(TroveError) {
      facts = try store.signedFacts(of: digest)
    } catch  where error.code == .notFound {
      return nil
    }
    known.withLock {
      if $0.count >= Self.keptFacts { $0.removeAll() }
      $0[digest] = facts
    }
    return facts
  }
}
