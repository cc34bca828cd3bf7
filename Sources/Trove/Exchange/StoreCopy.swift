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
  /// Keys this store had bound to other objects, kept so by an import
  /// (not counted in `keys`).
  public var keptKeys: [String] = []

  /// A report of nothing copied yet.
  public init() {}
}

extension Store {
  /// Copies `digest` from `source` into this store through a writer, as
  /// a download is stored: `max-object-size` and the room this store makes
  /// apply before the first byte, the bytes are hashed once on the way in,
  /// and they are published (with `binding`, in the same transaction) only
  /// when they hash to `digest`. Returns whether it was new here; nil when
  /// `source` does not hold it.
  ///
  /// - Throws: `.corruptObject` when the source's bytes do not match
  ///   `digest` (the source's file goes to its quarantine, nothing is
  ///   stored), and the errors of ``BlobWriter/commit(expecting:size:)``.
  func copyObject(_ digest: BlobDigest, from source: Store, binding: KeyRequest?)
    throws(TroveError) -> PutResult?
  {
    // Opened first: an object removed from `source` from here on still
    // yields its bytes.
    guard let (object, isCompressed) = try source.objects.open(digest) else { return nil }
    defer { object.close() }
    let objectPath = source.objectFilePath(digest, compressed: isCompressed)
    let size: Int64
    if isCompressed {
      guard let entry = try source.entry(for: digest) else { return nil }
      size = entry.size
    } else {
      size = try attempt("read", objectPath) { () throws(SystemCallError) in
        try object.status().size
      }
    }
    let writer = try makeWriter(
      expectedSize: size, priority: .important, source: objectPath, binding: binding)
    defer { writer.cancel() }
    var method = IngestMethod.stream
    object.adviseSequential()
    if isCompressed {
      var failure: TroveError?
      do throws(TroveError) {
        _ = try decompressVerified(
          object, digest: digest, objectPath: objectPath, destination: tmpPath
        ) { (chunk) throws(SystemCallError) in
          do throws(TroveError) { try writer.write(chunk) } catch {
            failure = error
            throw SystemCallError("write", Errno(rawValue: EIO))
          }
        }
      } catch {
        throw source.quarantining(failure ?? error, digest, object: object, compressed: true)
      }
    } else if try clone(object, path: objectPath, into: writer) {
      method = .clone
    } else {
      try writer.absorb(from: object, path: objectPath)
    }
    do throws(TroveError) {
      return try writer.commit(method: method, expecting: digest, size: size)
    } catch  where error.code == .checksumMismatch {
      let corrupt = TroveError(
        .corruptObject,
        "object '\(objectPath)' is corrupt: \(error.message)",
        path: objectPath, value: digest.description, remedy: .removeAndStoreAgain)
      throw source.quarantining(corrupt, digest, object: object, compressed: isCompressed)
    }
  }

  /// Fills `writer` with a clone of `object` (FICLONE) when this store is
  /// on the object's filesystem, clones work there (learnt once per pair
  /// of devices, as gets learn it) and the writer stores raw; the clone is
  /// then hashed like any copy. False, with nothing written, when it
  /// cannot: the caller copies.
  private func clone(_ object: FileDescriptor, path: String, into writer: BlobWriter)
    throws(TroveError) -> Bool
  {
    guard writer.canTakeClone else { return false }
    let source = try attempt("read", path) { () throws(SystemCallError) in
      try object.status().device
    }
    guard source == device else { return false }
    if case .unsupported = cloneProbe.verdict(from: source, to: device) { return false }
    do throws(SystemCallError) {
      try writer.file.cloneContents(from: object)
      cloneProbe.record(.supported, from: source, to: device)
    } catch  where error.errno.meansUnsupported {
      // This filesystem cannot clone (ext4, tmpfs): copy instead.
      cloneProbe.record(.unsupported(error), from: source, to: device)
      return false
    } catch {
      throw TroveError.system(error, "clone", path: path)
    }
    try writer.absorbWritten()
    return true
  }

  /// Copies `objects` from this store, with their keys, into a new store
  /// at `directory` (which must not exist, or be an empty folder): a
  /// small Trove store holding only that set, for a CI cache upload or a
  /// benchmark's inputs. Objects this store no longer holds are listed in
  /// the report's `missing` and skipped. When it throws, what it made at
  /// `directory` is removed. An object stored raw is cloned (FICLONE) when
  /// `directory` is on this store's filesystem and clones work there, and
  /// the clone is hashed; otherwise its bytes are copied.
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
          recordName: nil, remedyWording: configuration.remedyWording))
      var report = ExchangeReport()
      for object in objects {
        // A login older versions kept in a URL key stays here.
        let keys = object.keys.map(URLUserinfo.exported(key:))
        let binding = KeyRequest(
          key: nil, moreKeys: keys, existing: .repoint,
          pulledKeys: try pulledKeys(object.keys))
        guard let put = try destination.copyObject(object.digest, from: self, binding: binding)
        else {
          report.missing.append(object.digest)
          continue
        }
        report.note(put)
        report.keys += object.keys.count
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
  public func importStore(at directory: String, replacingKeys: Bool = false)
    throws(TroveError) -> ExchangeReport
  {
    try requireWritable()
    let source = try Store(
      StoreConfiguration(
        root: directory, createIfMissing: false, onWarning: configuration.onWarning,
        recordName: nil, remedyWording: configuration.remedyWording))
    var report = ExchangeReport()
    var keys: [BlobDigest: [String]] = [:]
    for binding in try source.keys() {
      keys[binding.digest, default: []].append(binding.key)
    }
    let kept = KeptKeys()
    for entry in try source.entries() {
      let wanted = keys[entry.digest] ?? []
      let binding = KeyRequest(
        key: nil, moreKeys: wanted, existing: replacingKeys ? .repoint : .keep,
        // Another store's bindings are its writers' word, as an archive's.
        pulledKeys: Set(wanted), onKept: kept.note)
      guard let put = try copyObject(entry.digest, from: source, binding: binding) else {
        report.missing.append(entry.digest)
        continue
      }
      report.note(put)
      report.keys += wanted.count
    }
    report.keptKeys = kept.keys
    report.keys -= report.keptKeys.count
    return report
  }

  /// Makes sure `path` is a new or empty folder an export may fill;
  /// returns whether this made it. A symbolic link is refused, even to an
  /// empty folder: what a failed export leaves is removed through the
  /// same name, never through a link.
  /// The exported form (``URLUserinfo/exported(key:)``) of each of
  /// `keys` this store binds as pulled (``KeyBinding/isPulled``): an
  /// export carries the mark.
  func pulledKeys(_ keys: [String]) throws(TroveError) -> Set<String> {
    var pulled: Set<String> = []
    for key in keys {
      if try binding(forKey: key)?.isPulled == true {
        pulled.insert(URLUserinfo.exported(key: key))
      }
    }
    return pulled
  }

  static func claimEmptyFolder(_ path: String) throws(TroveError) -> Bool {
    let (parentPath, name) = split(path)
    let parent: FileDescriptor
    do throws(SystemCallError) {
      parent = try FileDescriptor.open(parentPath, .directory)
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      throw TroveError(
        .destinationDirectoryMissing, "cannot export to '\(path)': its folder does not exist",
        path: path, cause: error)
    } catch {
      throw TroveError.system(error, "open", path: parentPath, code: .storeUnavailable)
    }
    defer { parent.close() }
    do throws(SystemCallError) {
      try parent.makeDirectory(name)
      return true
    } catch  where error.errno == .fileExists {
      let names: [String]
      do throws(SystemCallError) {
        let folder = try FileDescriptor.open(name, in: parent, [.directory, .noFollow])
        defer { folder.close() }
        names = try folder.entries()
      } catch  where error.errno.meansNotAFolder {
        throw TroveError(
          .destinationExists,
          "cannot export to '\(path)': it is not a folder (a file or a symbolic link); name a new or empty folder",
          path: path, cause: error)
      } catch {
        throw TroveError.system(error, "open", path: path, code: .destinationExists)
      }
      guard names.isEmpty else {
        throw TroveError(
          .destinationExists,
          "cannot export to '\(path)': it is not empty; name a new or empty folder", path: path)
      }
      return false
    } catch {
      throw TroveError.system(error, "create", path: path, code: .storeUnavailable)
    }
  }

  /// Removes what a failed export made at `path`: the folder itself when
  /// it made it, else everything in it. Never through a symbolic link.
  static func removeExport(_ path: String, created: Bool) {
    let (parentPath, name) = split(path)
    guard let parent = try? FileDescriptor.open(parentPath, .directory) else { return }
    defer { parent.close() }
    guard let folder = try? FileDescriptor.open(name, in: parent, [.directory, .noFollow]) else {
      return
    }
    for entry in (try? folder.entries()) ?? [] {
      _ = folder.removeTree(entry, dryRun: false)
    }
    folder.close()
    if created { try? parent.removeDirectory(name) }
  }
}

extension ExchangeReport {
  mutating func note(_ put: PutResult) {
    if put.isDuplicate { duplicates += 1 } else { objects += 1 }
    bytes += put.size
  }
}
