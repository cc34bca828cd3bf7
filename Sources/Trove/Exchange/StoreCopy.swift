#if canImport(Glibc)
  import Glibc
#endif

/// What an export or an import copied.
public struct ExchangeReport: Sendable, Hashable, Codable {
  /// Objects stored in the destination by this copy.
  public var objects = 0
  /// Objects the destination held already.
  public var duplicates = 0
  /// Bytes (content) of the objects copied, duplicates included.
  public var bytes: Int64 = 0
  /// Keys bound in the destination.
  public var keys = 0
  /// Objects asked for that the source no longer holds: not copied.
  public var missing: [BlobDigest] = []

  /// A report of nothing copied yet.
  public init() {}
}

extension Store {
  /// Copies `digest` from `source` into this store: its bytes are put in
  /// as a new file would be (cloned when the two stores share a
  /// filesystem that clones) and hashed on the way in, so nothing the
  /// source calls `digest` is stored under that name unless it hashes to
  /// it. Returns whether it was new here; nil when `source` does not hold it.
  ///
  /// - Throws: `.corruptObject` when the source's bytes do not match
  ///   `digest` (nothing is stored), and the errors of
  ///   ``materialize(_:at:mode:replacing:durable:verify:)-4kx8g`` and
  ///   ``put(file:expectedSize:priority:)``.
  func copyObject(_ digest: BlobDigest, from source: Store) throws(TroveError) -> PutResult? {
    guard let entry = try source.entry(for: digest) else { return nil }
    let name = StoreLayout.temporaryName("import")
    defer { try? tmpDirectory.removeFile(name) }
    do throws(TroveError) {
      try source.materialize(digest, at: tmpPath + "/" + name, mode: .auto, verify: true)
    } catch  where error.code == .notFound {
      return nil
    }
    let put = try put(file: tmpPath + "/" + name, expectedSize: entry.size)
    guard put.digest == digest else {
      // Only a process writing into our tmp/ could get here: undo it.
      if !put.isDuplicate { _ = try? remove(put.digest) }
      throw source.corrupt(digest, actual: put.digest)
    }
    return put
  }

  /// Copies `objects` from this store, with their keys, into a new store
  /// at `directory` (which must not exist, or be an empty folder): a
  /// small Trove store holding only that set, for a CI cache upload or a
  /// benchmark's inputs. Objects this store no longer holds are listed in
  /// the report's `missing` and skipped. When it throws, what it made at
  /// `directory` is removed.
  ///
  /// - Throws: `.destinationExists` for a `directory` that is not empty,
  ///   `.corruptObject`, and the errors of putting into a store.
  public func export(_ objects: [RecordedObject], to directory: String) throws(TroveError)
    -> ExchangeReport
  {
    let created = try Self.claimEmptyFolder(directory)
    do throws(TroveError) {
      let destination = try Store(
        StoreConfiguration(
          root: directory, createIfMissing: true, onWarning: configuration.onWarning,
          recordName: nil))
      var report = ExchangeReport()
      for object in objects {
        guard let put = try destination.copyObject(object.digest, from: self) else {
          report.missing.append(object.digest)
          continue
        }
        report.note(put)
        for key in object.keys {
          try destination.bind(key: key, to: object.digest)
          report.keys += 1
        }
      }
      return report
    } catch {
      Self.removeExport(directory, created: created)
      throw error
    }
  }

  /// Adds every object of the store at `directory`, and every key bound
  /// to one, to this store: each object hashed on the way in (the source's
  /// names are never trusted), duplicates kept once. Stops at the first
  /// object whose bytes do not match its name (`.corruptObject`, naming
  /// it): the objects copied before it are complete and stay.
  ///
  /// - Throws: `.storeMissing` when there is no store at `directory`, and
  ///   the errors of ``export(_:to:)``.
  public func importStore(at directory: String) throws(TroveError) -> ExchangeReport {
    let source = try Store(
      StoreConfiguration(
        root: directory, createIfMissing: false, onWarning: configuration.onWarning,
        recordName: nil))
    var report = ExchangeReport()
    var copied = Set<BlobDigest>()
    for entry in try source.entries() {
      guard let put = try copyObject(entry.digest, from: source) else {
        report.missing.append(entry.digest)
        continue
      }
      report.note(put)
      copied.insert(entry.digest)
    }
    for binding in try source.keys() where copied.contains(binding.digest) {
      try bind(key: binding.key, to: binding.digest)
      report.keys += 1
    }
    return report
  }

  /// Makes sure `path` is a new or empty folder an export may fill;
  /// returns whether this made it.
  static func claimEmptyFolder(_ path: String) throws(TroveError) -> Bool {
    do throws(SystemCallError) {
      _ = try Sys.call("mkdir") { mkdir(path, 0o700) }
      return true
    } catch  where error.errno == .fileExists {
      let names = try attempt("open", path, code: .destinationExists) {
        () throws(SystemCallError) -> [String] in
        let folder = try FileDescriptor.open(path, [.directory])
        defer { folder.close() }
        return try folder.entries()
      }
      guard names.isEmpty else {
        throw TroveError(
          .destinationExists,
          "cannot export to '\(path)': it is not empty; name a new or empty folder", path: path)
      }
      return false
    } catch  where error.errno == .noSuchFileOrDirectory {
      throw TroveError(
        .destinationDirectoryMissing, "cannot export to '\(path)': its folder does not exist",
        path: path, cause: error)
    } catch {
      throw TroveError.system(error, "create", path: path, code: .storeUnavailable)
    }
  }

  /// Removes what a failed export made at `path`: the folder itself when
  /// it made it, else everything in it.
  static func removeExport(_ path: String, created: Bool) {
    guard let folder = try? FileDescriptor.open(path, [.directory, .noFollow]) else { return }
    for name in (try? folder.entries()) ?? [] {
      _ = folder.removeTree(name, dryRun: false)
    }
    folder.close()
    if created { _ = rmdir(path) }
  }
}

extension ExchangeReport {
  mutating func note(_ put: PutResult) {
    if put.isDuplicate { duplicates += 1 } else { objects += 1 }
    bytes += put.size
  }
}
