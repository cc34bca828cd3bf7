import Foundation

extension RemoteSpec {
  /// The keys this store accepts signatures of from the remote; nil when
  /// it reads the remote unsigned.
  var trustedKeys: Set<PublicSigningKey>? { trust.map(Set.init) }
}

extension SignedObjectEntry {
  /// An entry of `digest` signed by `signer`, keeping those signatures of
  /// `earlier` (the remote's entry) that are valid signatures of the same
  /// facts by one of `known` under a key name `keygen` could have given:
  /// anything else on the remote is any writer's, and padding would make
  /// the entry too long for readers.
  init(
    digest: BlobDigest, facts: SignedFacts, signer: SigningKey,
    keeping earlier: SignedObjectEntry?, known: Set<PublicSigningKey> = []
  ) {
    let text = SignedText.object(digest: digest, size: facts.size, sha256: facts.sha256)
    var signatures = [signer.signature(of: text)]
    if let earlier, earlier.signedText == text {
      var seen: Set<PublicSigningKey> = [signer.publicKey]
      for signature in earlier.signatures
      where signatures.count <= Self.keptSignatures && !seen.contains(signature.key)
        && (try? SigningKey.checkName(signature.name)) != nil
        && signature.verifies(text, trusting: known)
      {
        seen.insert(signature.key)
        signatures.append(signature)
      }
    }
    self.init(
      format: Self.currentFormat, digest: digest.description, size: facts.size,
      sha256: facts.sha256.description, signatures: signatures)
  }

  /// What it says of the object, when one of `trusted` signed it.
  func facts(trusting trusted: Set<PublicSigningKey>) -> SignedFacts? {
    guard let text = signedText, let sha = try? Checksum(parsing: sha256),
      signatures.contains(where: { $0.verifies(text, trusting: trusted) })
    else { return nil }
    return SignedFacts(size: size, sha256: sha)
  }

  /// Whether `signer` signed these very facts already.
  func isSigned(by signer: SigningKey, for facts: SignedFacts) -> Bool {
    self.facts(trusting: [signer.publicKey]) == facts
  }
}

extension RemoteKeyRecord {
  /// The text its signatures cover, when it carries signed facts that parse.
  var signedText: SignedText? {
    guard let signed, signed.format == 1, let digest = blobDigest,
      let sha = try? Checksum(parsing: signed.sha256), sha.algorithm == .sha256, signed.size >= 0
    else { return nil }
    return .keyRecord(
      key: key, digest: digest, size: signed.size, sha256: sha, etag: origin?.etag,
      lastModified: origin?.lastModified, time: signed.time)
  }

  /// This record signed by `signer`, saying `facts` of its object at `time`
  /// (seconds since 1970).
  func signed(by signer: SigningKey, facts: SignedFacts, time: Int64) -> RemoteKeyRecord {
    var record = self
    // Readers drop a Last-Modified that is not an HTTP date before they
    // check (``validated(remote:)``): what is signed is what they keep.
    if let modified = record.origin?.lastModified, !ConditionalRequest.isDate(modified) {
      record.origin?.lastModified = nil
    }
    record.signed = KeyRecordSignatures(
      format: 1, size: facts.size, sha256: facts.sha256.description, time: time, signatures: [])
    if let text = record.signedText {
      record.signed?.signatures = [signer.signature(of: text)]
    }
    return record
  }

  /// What it says of its object, when one of `trusted` signed it.
  func facts(trusting trusted: Set<PublicSigningKey>) -> SignedFacts? {
    guard let signed, let text = signedText, let sha = try? Checksum(parsing: signed.sha256),
      signed.signatures.contains(where: { $0.verifies(text, trusting: trusted) })
    else { return nil }
    return SignedFacts(size: signed.size, sha256: sha)
  }
}

/// Signing what a push publishes, and refusing what a trusting store
/// reads unsigned.
extension Store {
  /// The key the settings name (`signing-key`), read from its file now;
  /// nil when none is set.
  ///
  /// A `signing-key` in a `config.json` that neither this user nor root
  /// owns is another user's choice of what this user signs with: it is not
  /// used, and pushes that would sign stop instead of going unsigned.
  /// `TROVE_SIGNING_KEY` is this user's own choice wherever it is set.
  ///
  /// - Throws: `.invalidConfig` naming the file when it cannot be used
  ///   (see ``SigningKey/load(_:)``), or naming `config.json` and its owner.
  func signingKey() throws(TroveError) -> SigningKey? {
    // One read decides both which key and whose choice it is: a second
    // read could find another file renamed into place between them.
    let read = try settingsRead()
    let settings = try read.settings.overriding(configuration.policyOverrides)
      .checked(path: settingsPath)
    guard let path = settings.policy.signingKey else { return nil }
    Sys.pauseForTest("signing-key", path)
    if let refusal = signingKeyRefusal(read) {
      throw TroveError(
        .invalidConfig,
        refusal + "; nothing pushed unsigned (set TROVE_SIGNING_KEY to a key of your own)",
        path: settingsPath)
    }
    return try SigningKey.load(path)
  }

  /// Why the `signing-key` setting is not used: a line naming
  /// `config.json` when it comes from that file and the file is not this
  /// user's (``rootFileRefusal(_:)``, judged on the descriptor the setting
  /// was read from, `read`, or `config.json` as it is now); nil otherwise.
  func signingKeyRefusal(_ read: SettingsRead? = nil) -> String? {
    guard configuration.policyOverrides[.signingKey] == nil,
      let read = read ?? (try? settingsRead()), read.settings.policy.signingKey != nil,
      let reason = Self.rootFileRefusal(read.status)
    else { return nil }
    return "'\(settingsPath)' \(reason): its signing-key is not used, as another user chose it"
  }

  /// What a signer vouches for `digest`: its length and SHA-256, read
  /// from the object's bytes (verified against its digest as they pass),
  /// never from the index, which another user may have written (a store
  /// once shared) or which may lag the objects.
  func signedFacts(of digest: BlobDigest) throws(TroveError) -> SignedFacts {
    let hasher = SHA2Hasher(.sha256)
    let size = try hashBytes(of: digest, into: [hasher])
    return SignedFacts(size: size, sha256: hasher.finalize())
  }

  /// What the index says of `digest`: its length and the SHA-256 recorded
  /// (computed from the object and recorded when there is none). Enough
  /// to match a signed entry of the same digest, which names its bytes
  /// already; a signer uses ``signedFacts(of:)``.
  func recordedFacts(of digest: BlobDigest) throws(TroveError) -> SignedFacts {
    guard let entry = try entry(for: digest) else { throw notFound(digest) }
    guard let sha = try checksums(of: digest, [.sha256])[.sha256] else {
      throw TroveError(.ioError, "no SHA-256 of \(digest)", value: digest.description)
    }
    return SignedFacts(size: entry.size, sha256: sha)
  }

  /// Why the keys in the index may not be this user's own bindings:
  /// another user (not root) owns, or a group or others may write, the
  /// root folder (whose entries can then be renamed) or the index and its
  /// companion files. Nil when only this user or root could have written
  /// them. With `modesOnly`, owners are not judged (whether the store was
  /// shared, whoever asks).
  func othersMayWriteIndex(modesOnly: Bool = false) -> String? {
    func refusal(_ status: FileStatus, _ path: String) -> String? {
      let mode = status.mode & 0o7777
      if !modesOnly, status.owner != Sys.effectiveUserID, status.owner != 0 {
        return "'\(path)' is owned by uid \(status.owner)"
      }
      if mode & 0o022 != 0 {
        return "'\(path)' is writable by others than its owner (mode \(String(mode, radix: 8)))"
      }
      return nil
    }
    guard let folder = try? rootDirectory.status() else { return "'\(root)' cannot be read" }
    if let reason = refusal(folder, root) { return reason }
    for name in [StoreLayout.index] + ObjectTable.indexCompanions.map({ StoreLayout.index + $0 }) {
      guard let status = try? rootDirectory.status(of: name, followSymlinks: false) else {
        continue
      }
      if let reason = refusal(status, root + "/" + name) { return reason }
    }
    return nil
  }

  /// Signs `digest`'s blob on `backend`: writes its signed entry unless
  /// `signer` signed the same facts there already. An earlier entry too
  /// long to be one is replaced: refusing would stop every later push
  /// behind this object.
  func signObject(
    _ digest: BlobDigest, facts: SignedFacts, on backend: any RemoteBackend,
    signer: SigningKey
  ) throws(TroveError) {
    let earlier: SignedObjectEntry?
    do throws(TroveError) {
      earlier = try backend.readSignedEntry(digest)
    } catch  where SignedObjectEntry.isTooLong(error) {
      earlier = nil
    }
    if let earlier, earlier.isSigned(by: signer, for: facts) { return }
    try backend.writeSignedEntry(
      SignedObjectEntry(
        digest: digest, facts: facts, signer: signer, keeping: earlier,
        known: backend.spec.trustedKeys ?? []),
      of: digest)
  }

  /// What a key of `spec`'s trusted ones says of `digest` on `backend`;
  /// nil when `spec` trusts no keys (the remote is read unsigned).
  ///
  /// - Throws: `.untrusted` when no trusted key signed an entry of it.
  func trustedFacts(of digest: BlobDigest, spec: RemoteSpec, backend: any RemoteBackend)
    throws(TroveError) -> SignedFacts?
  {
    guard let trusted = spec.trustedKeys else { return nil }
    guard let facts = try backend.readSignedEntry(digest)?.facts(trusting: trusted) else {
      throw untrusted(spec, "\(digest)", value: digest.description)
    }
    return facts
  }

  /// What a key of `spec`'s trusted ones says of `record`'s object; nil
  /// when `spec` trusts no keys.
  ///
  /// - Throws: `.untrusted` when no trusted key signed the record.
  func trustedFacts(of record: RemoteKeyRecord, spec: RemoteSpec) throws(TroveError)
    -> SignedFacts?
  {
    guard let trusted = spec.trustedKeys else { return nil }
    guard let facts = record.facts(trusting: trusted) else {
      throw untrusted(spec, "the record of key '\(record.key)'", value: record.key)
    }
    return facts
  }

  private func untrusted(_ spec: RemoteSpec, _ what: String, value: String) -> TroveError {
    TroveError(
      .untrusted,
      "remote '\(spec.name)': \(what) is not signed by a key this store trusts for it; not used",
      value: value)
  }

  /// Throws unless the object `digest` this store holds has the SHA-256 a
  /// trusted signer gave (a record naming a local object).
  func checkLocal(_ digest: BlobDigest, against facts: SignedFacts, spec: RemoteSpec)
    throws(TroveError)
  {
    let sha = try checksums(of: digest, [.sha256])[.sha256]
    guard sha == facts.sha256, try entry(for: digest)?.size == facts.size else {
      throw TroveError(
        .checksumMismatch,
        "remote '\(spec.name)': a signed record says \(digest) has \(facts.sha256) and \(facts.size) bytes, which this store's copy does not",
        value: digest.description)
    }
  }
}
