import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// An interrupted download kept for resuming: `partial/<k>.ofd.part` holds
/// the body so far (raw bytes), `partial/<k>.ofd.json` says what it is
/// part of.
/// Used only by the holder of the URL's ``FetchLock``, and only where that
/// lock is honoured; never under `objects/`. A finished body is renamed
/// into `tmp/` and published from there like any put.
///
/// The part file becomes the object, so it is `0600` from its creation:
/// no one else can hold it open to write into the object later. In a group
/// store each member has its own (`<k>.<uid>.ofd.part`), and a part this user
/// does not own, or one others could ever write (a group-writable part),
/// is never resumed or published: it is removed if it can be, else the
/// body goes to a private temp file.
///
/// A part survives a killed process (its bytes are in the page cache) but
/// not a reboot, whose loss of unsynced pages could leave holes: the boot
/// id recorded beside it must match for it to be resumed.
final class PartialDownload {
  /// What a partial file is part of.
  struct Info: Codable, Equatable {
    /// The URL the bytes came from: the key's own, or a mirror's.
    var url: String
    /// The strong `ETag` or the `Last-Modified` that makes the resume
    /// conditional (`If-Range`): a changed body is sent whole, not spliced.
    var validator: String
    /// The whole body's length, when the server said.
    var total: Int64?
    /// `/proc/sys/kernel/random/boot_id` when it was written.
    var boot: String
  }

  let store: Store
  private let folder: FileDescriptor
  private let name: String
  /// The part file, open for reading and writing; nil until there is one.
  private(set) var file: FileDescriptor?
  /// What the part file is, when its sidecar says and it can be resumed.
  private(set) var info: Info?
  /// The part file's length.
  private(set) var length: Int64 = 0

  private var partName: String { name + ".part" }
  private var infoName: String { name + ".json" }
  var path: String { store.root + "/" + StoreLayout.partial + "/" + partName }

  /// Opens this user's part file of the key `key` (a fetch's URL), if
  /// there is one; nil when its name holds something this user cannot use
  /// or remove (the body then goes to a private temp file). The caller
  /// holds the key's lock, honoured. The part may have come from a mirror
  /// of the key: its sidecar names the URL it resumes from.
  init?(store: Store, key: String) throws(TroveError) {
    let name = PartialDownload.name(of: key, access: store.access)
    let folder = try store.ensureFolder(StoreLayout.partial, sticky: true)
    let partName = name + ".part"
    let infoName = name + ".json"
    var file: FileDescriptor?
    do throws(SystemCallError) {
      let opened = try FileDescriptor.openRegularFile(partName, in: folder, .readWrite)
      file = opened
      let status = try opened.status()
      guard PartialDownload.isOwnPrivate(status) else {
        throw SystemCallError("open", .notPermitted)
      }
      length = status.size
    } catch  where error.errno == .noSuchFileOrDirectory {
    } catch {
      file?.close()
      file = nil
      // Not this user's private part (another member's, one the group
      // could write, a FIFO): it goes, and the body starts afresh; if it
      // cannot go, no part is used.
      try? folder.removeFile(infoName)
      guard (try? folder.removeFile(partName)) != nil else {
        folder.close()
        return nil
      }
    }
    self.store = store
    self.name = name
    self.folder = folder
    self.file = file
    guard file != nil, let sidecar = try? FileDescriptor.openRegularFile(infoName, in: folder)
    else { return }
    // A sidecar another member planted says nothing of this part.
    let isOwn = (try? sidecar.status()).map(PartialDownload.isOwnPrivate) == true
    if isOwn, let bytes = try? sidecar.readAllClosing(),
      let info = try? JSONDecoder().decode(Info.self, from: Data(bytes)),
      info.boot == PartialDownload.bootID, length > 0,
      info.total.map({ length < $0 }) ?? true
    {
      self.info = info
    } else if !isOwn {
      sidecar.close()
    }
  }

  /// The name of `url`'s part and sidecar (without suffix): the URL's
  /// XXH3-128 hex, in a group store this user's id after a dot (the
  /// lock's name is what precedes the first dot), then `.ofd`. The mark
  /// keeps apart the parts of Trove versions that locked a URL with
  /// `flock` on `locks/<k>.lock`, which would not keep out a holder of
  /// its byte in `fetch.lock`, nor it them.
  static func name(of url: String, access: StoreAccess) -> String {
    let k = Store.downloadName(url)
    return (access == .group ? k + "." + String(Sys.effectiveUserID) : k) + ".ofd"
  }

  /// Whether a part (or sidecar) of `status` is this user's, and no one
  /// else could ever have opened it to write.
  private static func isOwnPrivate(_ status: FileStatus) -> Bool {
    status.owner == Sys.effectiveUserID && status.mode & 0o022 == 0
  }

  deinit {
    // An empty part resumes nothing: it goes (a finished one was moved).
    if let file {
      if length == 0 {
        try? folder.removeFile(partName)
        try? folder.removeFile(infoName)
      }
      file.close()
    }
    folder.close()
  }

  /// Where a resume from `url` starts and what makes it conditional, if
  /// the part can be resumed from there: only from the URL that sent its
  /// bytes, whose validator it holds.
  func resumePoint(from url: String) -> (offset: Int64, validator: String)? {
    guard let info, info.url == url else { return nil }
    return (length, info.validator)
  }

  /// Empties the part file for a new body described by `info` (nil: not
  /// resumable, no sidecar).
  func restart(_ info: Info?) throws(TroveError) {
    self.info = nil
    try? folder.removeFile(infoName)
    try attempt("create", path) { () throws(SystemCallError) in
      if file == nil {
        // Made here, owner-only whatever the store's access: it becomes
        // the object, which nobody else may hold open to write.
        file = try FileDescriptor.open(
          partName, in: folder, [.readWrite, .create, .exclusive, .noFollow], permissions: 0o600)
      }
      try file?.truncate(to: 0)
      try file?.seek(to: 0)
    }
    length = 0
    guard let info, let bytes = try? JSONEncoder().encode(info) else { return }
    // Written whole or not at all: a temp file renamed over the old one.
    let temp = StoreLayout.temporaryName("part")
    do throws(SystemCallError) {
      let fd = try FileDescriptor.open(
        temp, in: folder, [.writeOnly, .create, .exclusive], permissions: 0o600)
      defer { fd.close() }
      try fd.writeAll(Array(bytes))
      try folder.rename(temp, to: infoName, in: folder)
      self.info = info
    } catch {
      try? folder.removeFile(temp)  // not resumable, still a valid download
    }
  }

  /// Feeds the part's bytes to `update` (a resumed body's digest covers its
  /// prefix) and leaves the file positioned at its end.
  func rehash(_ update: (UnsafeRawBufferPointer) -> Void) throws(TroveError) {
    guard let file else { return }
    let buffer = UnsafeMutableRawBufferPointer.allocate(
      byteCount: Transfer.bufferSize, alignment: 4096)
    defer { buffer.deallocate() }
    var offset: Int64 = 0
    try attempt("read", path) { () throws(SystemCallError) in
      while offset < length {
        let n = try file.read(
          into: UnsafeMutableRawBufferPointer(
            rebasing: buffer[..<Int(min(Int64(buffer.count), length - offset))]), at: offset)
        if n == 0 { break }
        update(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
        offset += Int64(n)
      }
      try file.seek(to: offset)
    }
    length = offset
  }

  /// Appends `bytes` (`remaining`: what is still to come, counting them).
  func append(
    _ bytes: UnsafeRawBufferPointer, writes: inout PressuredWrites, remaining: Int64?
  ) throws(TroveError) {
    guard let file else { preconditionFailure("restart(_:) or a resume comes first") }
    do throws(SystemCallError) {
      try writes.writeAll(bytes, to: file, remaining: remaining)
    } catch {
      // What part of `bytes` was written goes: the part holds only whole
      // appends, so a resume never repeats or skips a byte. If even that
      // fails, the part is not resumed.
      do throws(SystemCallError) {
        try file.truncate(to: length)
        try file.seek(to: length)
      } catch {
        discard()
      }
      throw TroveError.system(error, "write", path: path)
    }
    // Large bodies are written back as they arrive, in the background:
    // the sync before publishing then waits for the last pieces only.
    let written = length
    length += Int64(bytes.count)
    if length / Self.writebackStep > written / Self.writebackStep {
      let end = length / Self.writebackStep * Self.writebackStep
      file.startWriteback(at: end - Self.writebackStep, length: Self.writebackStep)
    }
  }

  /// Moves the finished body into `tmp/` under a new temp name, to be
  /// staged and published; the sidecar goes. Returns that name (the file
  /// stays open as ``file``).
  func handOver() throws(TroveError) -> String {
    let temp = StoreLayout.temporaryName("fetch")
    try attempt("move", path) { () throws(SystemCallError) in
      try folder.rename(partName, to: temp, in: store.tmpDirectory)
    }
    try? folder.removeFile(infoName)
    info = nil
    length = 0
    // The descriptor now names the staged body: this part has no file.
    file = nil
    return temp
  }

  /// Empties the part and removes its sidecar: its bytes are not what the
  /// URL has. (The empty file goes when this is dropped.)
  func discard() {
    guard let file else { return }
    try? folder.removeFile(infoName)
    try? file.truncate(to: 0)
    try? file.seek(to: 0)
    info = nil
    length = 0
  }

  /// How often (in bytes written) writeback of a part is started.
  static let writebackStep: Int64 = 8 << 20

  /// This boot's id: a part written before a reboot is not resumed.
  static let bootID: String = {
    let text = (try? String(contentsOfFile: "/proc/sys/kernel/random/boot_id", encoding: .utf8))
    return text?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
  }()
}

extension FileDescriptor {
  /// Reads a small file to its end (64 KiB at most) and closes it.
  fileprivate func readAllClosing() throws(SystemCallError) -> [UInt8] {
    defer { close() }
    return try readAll(limit: 64 * 1024)
  }
}

extension PartialDownload.Info {
  /// Decodes a sidecar, refusing one whose validator could not be sent as
  /// `If-Range` (``ConditionalRequest/isSafe(_:)``): its part is not
  /// resumed. The sidecar is a file in the store, writable by others.
  init(from decoder: any Decoder) throws {
    let values = try decoder.container(keyedBy: CodingKeys.self)
    url = try values.decode(String.self, forKey: .url)
    validator = try values.decode(String.self, forKey: .validator)
    total = try values.decodeIfPresent(Int64.self, forKey: .total)
    boot = try values.decode(String.self, forKey: .boot)
    guard ConditionalRequest.isSafe(validator) else {
      throw DecodingError.dataCorruptedError(
        forKey: .validator, in: values, debugDescription: "not a header value")
    }
  }
}
