import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// What an export archive holds: its first member, `trove-export.json`.
struct ExportManifest: Codable {
  struct Item: Codable {
    var digest: String
    var size: Int64
    var keys: [String]
    /// The keys of `keys` the exporting store had from a remote's record;
    /// absent when none.
    var pulled: [String]? = nil
  }
  var format = "trove-export"
  var version = 1
  var objects: [Item]

  static let memberName = "trove-export.json"
}

extension Store {
  /// Writes `objects` this store holds, with their keys, as a ustar
  /// archive to the new file `path` (see Docs/OnDiskFormat.md): the
  /// manifest `trove-export.json`, then `objects/xx/HEX` per object. The
  /// file appears whole or not at all (a temp file beside it, renamed
  /// without replacing). Objects the store no longer holds are listed in
  /// the report's `missing`.
  ///
  /// - Throws: `.destinationExists` when `path` exists, `.corruptObject`
  ///   for an object whose bytes do not match its digest, `.ioError`.
  public func exportArchive(_ objects: [RecordedObject], toFile path: String) throws(TroveError)
    -> ExchangeReport
  {
    let (folderPath, name) = Self.split(path)
    let folder = try attempt("open", folderPath, code: .destinationDirectoryMissing) {
      () throws(SystemCallError) in try FileDescriptor.open(folderPath, .directory)
    }
    defer { folder.close() }
    if (try? folder.status(of: name, followSymlinks: false)) != nil {
      throw TroveError(.destinationExists, "cannot export to '\(path)': it exists", path: path)
    }
    let temp = "." + StoreLayout.temporaryName("export")
    let file = try attempt("create", folderPath + "/" + temp) { () throws(SystemCallError) in
      try FileDescriptor.open(
        temp, in: folder, [.writeOnly, .create, .exclusive, .noFollow], permissions: 0o644)
    }
    var done = false
    defer {
      file.close()
      if !done { try? folder.removeFile(temp) }
    }
    let report = try writeArchive(objects, to: file, name: path)
    try attempt("write", path) { () throws(SystemCallError) in
      try file.sync()
      try folder.renameWithoutReplacing(temp, to: name, in: folder)
      // The new name is durable when this returns, not only its bytes.
      try folder.sync()
    }
    done = true
    return report
  }

  /// Writes the archive of `objects` to `handle` (standard output, a pipe).
  /// A failure midway leaves a cut-short archive, which ``importArchive(from:name:replacingKeys:)``
  /// refuses.
  public func exportArchive(_ objects: [RecordedObject], to handle: FileHandle)
    throws(TroveError) -> ExchangeReport
  {
    try writeArchive(objects, to: FileDescriptor(rawValue: handle.fileDescriptor), name: "<output>")
  }

  private func writeArchive(_ objects: [RecordedObject], to out: FileDescriptor, name: String)
    throws(TroveError) -> ExchangeReport
  {
    var report = ExchangeReport()
    // Every object is opened before the manifest is written: one removed
    // meanwhile is left out of it, and one opened keeps its bytes until it
    // is written, whatever a sweep or an `rm` does in between.
    var opened: [(item: ExportManifest.Item, digest: BlobDigest, file: FileDescriptor, Bool)] = []
    defer { for entry in opened { entry.file.close() } }
    for object in objects {
      guard let (file, isCompressed) = try self.objects.open(object.digest) else {
        report.missing.append(object.digest)
        continue
      }
      let size: Int64?
      if isCompressed {
        size = try entry(for: object.digest)?.size
      } else {
        size = try? file.status().size
      }
      guard let size else {
        file.close()
        report.missing.append(object.digest)
        continue
      }
      let pulled = try pulledKeys(object.keys)
      let keys = object.keys.map(URLUserinfo.exported(key:))
      opened.append(
        (
          .init(
            digest: object.digest.description, size: size, keys: keys,
            pulled: pulled.isEmpty ? nil : keys.filter(pulled.contains)),
          object.digest, file, isCompressed
        ))
    }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let manifest = Array(
      (try? encoder.encode(ExportManifest(objects: opened.map(\.item)))) ?? Data())
    let now = Int64(Date().timeIntervalSince1970)
    func emit(_ bytes: [UInt8]) throws(TroveError) {
      try attempt("write", name) { () throws(SystemCallError) in try out.writeAll(bytes) }
    }
    try emit(Ustar.header(name: ExportManifest.memberName, size: Int64(manifest.count), time: now))
    try emit(manifest + [UInt8](repeating: 0, count: Ustar.padding(Int64(manifest.count))))
    for (item, digest, file, isCompressed) in opened {
      try emit(
        Ustar.header(
          name: StoreLayout.objects + "/" + StoreLayout.objectPath(digest), size: item.size,
          time: now))
      let written = try write(
        digest, from: file, isCompressed: isCompressed, to: out, destination: name)
      guard written == item.size else {
        throw TroveError(
          .corruptObject,
          "object \(digest) changed size while it was exported to '\(name)': \(written) bytes, not \(item.size)",
          path: name, value: digest.description)
      }
      try emit([UInt8](repeating: 0, count: Ustar.padding(item.size)))
      report.objects += 1
      report.bytes += item.size
      report.keys += item.keys.count
    }
    try emit([UInt8](repeating: 0, count: 2 * Ustar.blockSize))
    return report
  }

  /// Adds the objects and keys of the export archive at `path` to this
  /// store; see ``importArchive(from:name:replacingKeys:)``.
  public func importArchive(fromFile path: String, replacingKeys: Bool = false)
    throws(TroveError) -> ExchangeReport
  {
    let file: FileDescriptor
    do throws(SystemCallError) {
      file = try FileDescriptor.open(path, [.readOnly])
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      throw TroveError(.sourceMissing, "cannot read '\(path)'", path: path, cause: error)
    } catch {
      throw TroveError.system(error, "read", path: path)
    }
    defer { file.close() }
    return try readArchive(file, name: path, replacingKeys: replacingKeys)
  }

  /// Adds the objects and keys of the export archive `handle` yields
  /// (standard input) to this store, `name` naming it in messages. Every
  /// member is checked before anything of it is stored: its path must be
  /// `objects/xx/HEX` of an object the manifest lists, with the size it
  /// lists (no absolute path, no `..`, no link or special file), and its
  /// bytes must hash to HEX. The first bad or cut-short member stops the
  /// import, storing nothing of it; the members before it are complete and
  /// stay.
  ///
  /// Each object is written through a writer, so `max-object-size` and the
  /// room the store makes apply before its first byte, and its keys are
  /// bound in the transaction that publishes it. A key this store has bound
  /// to another object keeps that binding and is listed in the report's
  /// `keptKeys`, unless `replacingKeys`; one bound to the same object keeps
  /// what a fetch learnt about it.
  ///
  /// - Throws: `.corruptObject` naming `name` and the cause, and the
  ///   errors of putting into the store.
  public func importArchive(from handle: FileHandle, name: String, replacingKeys: Bool = false)
    throws(TroveError) -> ExchangeReport
  {
    try readArchive(
      FileDescriptor(rawValue: handle.fileDescriptor), name: name, replacingKeys: replacingKeys)
  }

  private func readArchive(_ input: FileDescriptor, name: String, replacingKeys: Bool)
    throws(TroveError) -> ExchangeReport
  {
    try requireWritable()
    func bad(_ reason: String) -> TroveError {
      TroveError(.corruptObject, "cannot import '\(name)': \(reason)", path: name)
    }
    var reader = ArchiveReader(input: input, name: name)
    func nextHeader() throws(TroveError) -> Ustar.Header? {
      guard let block = try reader.block() else {
        throw bad("it ends before its end-of-archive blocks (cut short)")
      }
      do throws(Ustar.Malformed) {
        return try Ustar.parse(block)
      } catch {
        throw bad(error.reason)
      }
    }
    guard let first = try nextHeader(), first.name == ExportManifest.memberName,
      first.isRegularFile, first.size <= 256 << 20
    else {
      throw bad("its first member is not \(ExportManifest.memberName): not a Trove export")
    }
    let manifestBytes = try reader.bytes(Int(first.size))
    guard manifestBytes.count == Int(first.size), try reader.skip(Ustar.padding(first.size)),
      let manifest = try? JSONDecoder().decode(ExportManifest.self, from: Data(manifestBytes)),
      manifest.format == "trove-export"
    else {
      throw bad("its \(ExportManifest.memberName) is cut short or not a Trove export manifest")
    }
    guard manifest.version == 1 else {
      throw TroveError(
        .unsupportedFormat,
        "cannot import '\(name)': export format \(manifest.version) is newer than this Trove's (1)",
        path: name)
    }
    var listed: [BlobDigest: ExportManifest.Item] = [:]
    for item in manifest.objects {
      guard let digest = try? BlobDigest(parsing: item.digest), item.size >= 0 else {
        throw bad("its manifest names '\(item.digest)', not a digest")
      }
      listed[digest] = item
    }
    var report = ExchangeReport()
    var seen = Set<BlobDigest>()
    let kept = KeptKeys()
    while let header = try nextHeader() {
      let member = header.name
      let shown = MessageText.excerpt(member)
      let parts = member.split(separator: "/", omittingEmptySubsequences: false)
      if member.hasPrefix("/") || parts.contains("..") {
        throw bad("member '\(shown)' would be written outside the folder: refused")
      }
      if header.isFolder {
        let folder = parts.filter { !$0.isEmpty }
        guard header.size == 0, folder.first == "objects", folder.count <= 2 else {
          throw bad("unexpected folder '\(shown)': refused")
        }
        continue
      }
      guard header.isRegularFile else {
        throw bad(
          "member '\(shown)' is a link or a special file (type '\(MessageText.escaped(bytes: [header.type]))'): refused"
        )
      }
      guard parts.count == 3, parts[0] == "objects", let digest = BlobDigest(hex: parts[2]),
        String(parts[1]) == StoreLayout.fanout(digest)
      else {
        throw bad("unexpected member '\(shown)': refused")
      }
      guard let item = listed[digest] else {
        throw bad("member '\(shown)' is not in its manifest: refused")
      }
      guard seen.insert(digest).inserted else {
        throw bad("member '\(shown)' appears twice: refused")
      }
      guard header.size == item.size else {
        throw bad("member '\(shown)' is \(header.size) bytes, its manifest says \(item.size)")
      }
      // An archive is anyone's word: its keys are bound as pulled, so a
      // signer never vouches for them, whatever its manifest says.
      let binding = KeyRequest(
        key: nil, moreKeys: item.keys, existing: replacingKeys ? .repoint : .keep,
        pulledKeys: Set(item.keys), onKept: kept.note)
      let put = try receive(
        digest, size: header.size, from: &reader, member: member, binding: binding, bad: bad)
      report.note(put)
      report.keys += item.keys.count
    }
    report.keptKeys = kept.keys
    report.keys -= report.keptKeys.count
    let absent = listed.keys.filter { !seen.contains($0) }
    guard absent.isEmpty else {
      throw bad("it lacks \(absent.count) of the objects its manifest lists (cut short?)")
    }
    return report
  }

  /// Stores the `size` bytes of member `member` through a writer, hashing
  /// them once as they pass: `max-object-size` and the room the store
  /// makes for them apply before the first byte, and the object is
  /// published (with `binding`, in the same transaction) only when they
  /// hash to `digest`.
  private func receive(
    _ digest: BlobDigest, size: Int64, from reader: inout ArchiveReader, member: String,
    binding: KeyRequest, bad: (String) -> TroveError
  ) throws(TroveError) -> PutResult {
    let writer = try makeWriter(
      expectedSize: size, priority: .important,
      source: "\(reader.name) member \(MessageText.excerpt(member))", binding: binding)
    defer { writer.cancel() }
    var left = size
    while left > 0 {
      let chunk = try reader.bytes(Int(min(left, 1 << 20)))
      guard !chunk.isEmpty else {
        throw bad("member '\(MessageText.excerpt(member))' is cut short")
      }
      try writer.write(chunk)
      left -= Int64(chunk.count)
    }
    guard try reader.skip(Ustar.padding(size)) else {
      throw bad("member '\(MessageText.excerpt(member))' is cut short")
    }
    do throws(TroveError) {
      return try writer.commit(method: .stream, expecting: digest, size: size)
    } catch  where error.code == .checksumMismatch {
      throw bad(
        "member '\(MessageText.excerpt(member))': \(error.message); nothing of it stored")
    }
  }
}

/// Reads an archive in order, from a file or a pipe.
struct ArchiveReader {
  let input: FileDescriptor
  let name: String

  /// Up to `count` bytes: fewer only at the end of the input.
  mutating func bytes(_ count: Int) throws(TroveError) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: count)
    let read: Result<Int, SystemCallError> = buffer.withUnsafeMutableBytes { raw in
      do throws(SystemCallError) { return .success(try input.readFully(into: raw)) } catch {
        return .failure(error)
      }
    }
    let n = try attempt("read", name) { () throws(SystemCallError) in try read.get() }
    buffer.removeSubrange(n...)
    return buffer
  }

  /// The next block; nil at the end of the input (a cut-short block too).
  mutating func block() throws(TroveError) -> [UInt8]? {
    let block = try bytes(Ustar.blockSize)
    return block.count == Ustar.blockSize ? block : nil
  }

  /// Skips `count` bytes; false when the input ends first.
  mutating func skip(_ count: Int) throws(TroveError) -> Bool {
    if count == 0 { return true }
    return try bytes(count).count == count
  }
}

/// The keys an import kept bound to other objects, as the transactions
/// that bind them report them (each once, should one be retried).
final class KeptKeys: Sendable {
  private let state = Mutex<[String]>([])

  /// Notes `key` kept bound to `digest`.
  @Sendable func note(_ key: String, _ digest: BlobDigest) {
    state.withLock { if !$0.contains(key) { $0.append(key) } }
  }

  /// The keys noted, in order.
  var keys: [String] { state.withLock { $0 } }
}
