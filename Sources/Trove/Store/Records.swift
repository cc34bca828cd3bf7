import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Records: named lists of what runs used — every digest and key that a
/// get, fetch, put or path touched while the record was on — so a
/// benchmark or a CI job can pin, keep, or export exactly its inputs.
///
/// A record is the append-only file `records/NAME.log` in the store, one
/// line per use: `DIGEST TAB TIME [TAB KEY]` (TIME in nanoseconds since
/// 1970; KEY with `\`, tab, newline and carriage return escaped as `\\`,
/// `\t`, `\n`, `\r`). `records/NAME.active` marks a record every process
/// that opens the store writes to; `TROVE_RECORD=NAME`
/// (``StoreConfiguration/recordName``) writes to one for that process
/// only. See Docs/OnDiskFormat.md.
///
/// The records a process writes to are settled when it opens the store:
/// one `openat` of `records/`, which fails in the common case, and a
/// listing only when it exists. A use costs nothing when no record is
/// on; otherwise one `write(2)` of one line per record (`O_APPEND`, so
/// lines from concurrent processes never interleave), once per distinct
/// digest and key in the process.
final class RecordKeeper: Sendable {
  /// The records this process writes to.
  let names: [String]
  private let rootDirectory: FileDescriptor
  private let root: String
  private let access: StoreAccess
  private let warn: @Sendable (String) -> Void
  /// The open log of each record, and the lines already written to it.
  private let state = Mutex<(logs: [String: FileDescriptor], written: Set<String>, warned: Bool)>(
    ([:], [], false))

  /// Reads which records are on in the store at `rootDirectory`, adding
  /// `extra` (the process's own). A store this process cannot write
  /// (`isWritable` false) records nothing and warns of nothing.
  init(
    rootDirectory: FileDescriptor, root: String, access: StoreAccess, extra: String?,
    isWritable: Bool = true, warn: @escaping @Sendable (String) -> Void
  ) {
    var names = Set<String>()
    if let extra { names.insert(extra) }
    if !isWritable {
      names = []
    } else if let folder = try? FileDescriptor.open(
      StoreLayout.records, in: rootDirectory, [.directory, .noFollow])
    {
      defer { folder.close() }
      for entry in (try? folder.entries()) ?? [] where entry.hasSuffix(Self.activeSuffix) {
        let name = String(entry.dropLast(Self.activeSuffix.count))
        if Self.isValidName(name) { names.insert(name) }
      }
    }
    self.names = names.sorted()
    self.rootDirectory = rootDirectory
    self.root = root
    self.access = access
    self.warn = warn
  }

  deinit {
    state.withLock { state in
      for fd in state.logs.values { fd.close() }
    }
  }

  /// How many distinct lines ``note(_:key:)`` remembers not to repeat.
  static let rememberedLines = 4096

  static let logSuffix = ".log"
  static let activeSuffix = ".active"

  /// Whether `name` can name a record: 1 to 64 of `A-Z a-z 0-9 . _ -`,
  /// not starting with a dot.
  static func isValidName(_ name: String) -> Bool {
    guard (1...64).contains(name.utf8.count), !name.hasPrefix(".") else { return false }
    return name.utf8.allSatisfy { byte in
      (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
        || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2E || byte == 0x5F || byte == 0x2D
    }
  }

  /// The error for a record name that cannot be one.
  static func invalidName(_ name: String, source: String = "record name") -> TroveError {
    TroveError(
      .invalidArgument,
      "invalid \(source) '\(name)': expected 1 to 64 letters, digits, '.', '_' or '-', not starting with '.'",
      value: name)
  }

  /// Notes that `digest` (named by `key`, when one was) was used, in every
  /// record this process writes to. Never fails: a record that cannot be
  /// written to is said once through the store's warning.
  func note(_ digest: BlobDigest, key: String? = nil) {
    guard !names.isEmpty else { return }
    let keyField = key.map { "\t" + Self.escaped($0) } ?? ""
    let what = digest.description + keyField
    let line = Array(
      (digest.description + "\t" + String(currentTimeNanoseconds()) + keyField + "\n").utf8)
    state.withLock { state in
      // Lines already written are not written again, within a bound: past
      // it the memory starts afresh (a repeat line is harmless).
      if state.written.count >= Self.rememberedLines { state.written.removeAll() }
      guard state.written.insert(what).inserted else { return }
      for name in names {
        do throws(SystemCallError) {
          let fd: FileDescriptor
          if let open = state.logs[name] {
            fd = open
          } else {
            fd = try openLog(name, creating: true)
            state.logs[name] = fd
          }
          // One write of one line: O_APPEND places it whole at the end. A
          // short write is a failure, not retried: the rest, written
          // apart, could land after another process's line.
          let wrote: Result<Int, SystemCallError> = line.withUnsafeBytes { raw in
            do throws(SystemCallError) { return .success(try fd.write(raw)) } catch {
              return .failure(error)
            }
          }
          let count = try wrote.get()
          if count < line.count { throw SystemCallError("write", Errno(rawValue: EIO)) }
        } catch {
          if !state.warned {
            state.warned = true
            warn(
              TroveError.system(
                error, "record use in",
                path: root + "/" + StoreLayout.records + "/" + name
                  + Self.logSuffix
              ).description)
          }
        }
      }
    }
  }

  /// Opens `records/NAME.log` to append, never through a symbolic link
  /// and never blocking on a FIFO (anything but a regular file is an
  /// error); with `creating`, makes `records/` and the log when missing.
  func openLog(_ name: String, creating: Bool) throws(SystemCallError) -> FileDescriptor {
    let folder = try recordsFolder(creating: creating)
    defer { folder.close() }
    let fd = try FileDescriptor.openRegularFile(
      name + Self.logSuffix, in: folder,
      creating ? [.writeOnly, .append, .create] : [.writeOnly, .append],
      permissions: access.sharedFileMode)
    fd.shareForStore(access)
    return fd
  }

  /// `records/`, made (with the store's folder mode) when `creating`.
  func recordsFolder(creating: Bool) throws(SystemCallError) -> FileDescriptor {
    if creating {
      return try rootDirectory.makeStoreFolder(StoreLayout.records, access: access).0
    }
    return try FileDescriptor.open(
      StoreLayout.records, in: rootDirectory, [.directory, .noFollow])
  }

  /// A key as a record line holds it: `\`, tab, newline and CR escaped.
  static func escaped(_ key: String) -> String {
    var out = ""
    for scalar in key.unicodeScalars {
      switch scalar {
      case "\\": out += "\\\\"
      case "\t": out += "\\t"
      case "\n": out += "\\n"
      case "\r": out += "\\r"
      default: out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  /// The key a record line holds, unescaped; nil when malformed.
  static func unescaped(_ text: Substring) -> String? {
    var out = ""
    var escaping = false
    for scalar in text.unicodeScalars {
      if escaping {
        switch scalar {
        case "\\": out += "\\"
        case "t": out += "\t"
        case "n": out += "\n"
        case "r": out += "\r"
        default: return nil
        }
        escaping = false
      } else if scalar == "\\" {
        escaping = true
      } else if scalar == "\t" || scalar == "\n" || scalar == "\r" {
        // Never written raw: two lines merged into one.
        return nil
      } else {
        out.unicodeScalars.append(scalar)
      }
    }
    return escaping ? nil : out
  }
}

/// One object a record noted, with every key it was used by.
public struct RecordedObject: Sendable, Hashable {
  /// The object.
  public var digest: BlobDigest
  /// The keys it was used by (looked up, bound or fetched), in the order
  /// first seen.
  public var keys: [String]
  /// When it was first noted (nanoseconds since 1970).
  public var firstUsed: Int64
  /// When it was last noted (nanoseconds since 1970).
  public var lastUsed: Int64
}

/// A record: its name, whether it is on, and what it noted.
public struct UsageRecord: Sendable, Hashable {
  /// The record's name.
  public var name: String
  /// Whether every process that opens the store writes to it
  /// (`record start`), rather than only those that name it.
  public var isActive: Bool
  /// The objects it noted, in the order first noted.
  public var objects: [RecordedObject]
  /// Lines that could not be read (a crash mid-write can leave at most one
  /// per writer at the end); they are skipped.
  public var damagedLines: Int
}

extension Store {
  /// Starts `name`: from now on, every process that opens this store
  /// notes in it each digest and key it gets, fetches, puts or looks up the
  /// path of (processes already running keep the records they opened
  /// with). Starting a record that exists keeps what it noted.
  ///
  /// - Throws: `.invalidArgument` for a name that cannot be a record's.
  public func startRecord(_ name: String) throws(TroveError) {
    try checkRecordName(name)
    let path = root + "/" + StoreLayout.records + "/" + name
    try attempt("start record", path + RecordKeeper.logSuffix) { () throws(SystemCallError) in
      try records.openLog(name, creating: true).close()
    }
    try attempt("start record", path + RecordKeeper.activeSuffix) { () throws(SystemCallError) in
      let folder = try records.recordsFolder(creating: true)
      defer { folder.close() }
      let fd = try FileDescriptor.openRegularFile(
        name + RecordKeeper.activeSuffix, in: folder, [.writeOnly, .create],
        permissions: access.sharedFileMode)
      fd.close()
    }
  }

  /// Stops `name`: processes that open the store from now on no longer
  /// note in it. What it noted stays. Returns whether it was on.
  ///
  /// - Throws: `.notFound` when there is no such record.
  public func stopRecord(_ name: String) throws(TroveError) -> Bool {
    try checkRecordName(name)
    _ = try record(named: name)
    let path = root + "/" + StoreLayout.records + "/" + name + RecordKeeper.activeSuffix
    return try attempt("stop record", path) { () throws(SystemCallError) -> Bool in
      let folder = try records.recordsFolder(creating: false)
      defer { folder.close() }
      do throws(SystemCallError) {
        try folder.removeFile(name + RecordKeeper.activeSuffix)
        return true
      } catch  where error.errno == .noSuchFileOrDirectory {
        return false
      }
    }
  }

  /// Removes `name` and what it noted (the objects stay). Returns whether
  /// it existed.
  @discardableResult
  public func removeRecord(_ name: String) throws(TroveError) -> Bool {
    try checkRecordName(name)
    let path = root + "/" + StoreLayout.records + "/" + name
    return try attempt("remove record", path + RecordKeeper.logSuffix) {
      () throws(SystemCallError) -> Bool in
      let folder: FileDescriptor
      do throws(SystemCallError) {
        folder = try records.recordsFolder(creating: false)
      } catch  where error.errno == .noSuchFileOrDirectory {
        return false
      }
      defer { folder.close() }
      var removed = false
      for suffix in [RecordKeeper.activeSuffix, RecordKeeper.logSuffix] {
        do throws(SystemCallError) {
          try folder.removeFile(name + suffix)
          removed = true
        } catch  where error.errno == .noSuchFileOrDirectory {}
      }
      return removed
    }
  }

  /// The names of the store's records, sorted, and whether each is on.
  /// O(records).
  public func recordNames() throws(TroveError) -> [(name: String, isActive: Bool)] {
    let path = root + "/" + StoreLayout.records
    let entries = try attempt("list records in", path) { () throws(SystemCallError) -> [String] in
      do throws(SystemCallError) {
        let folder = try records.recordsFolder(creating: false)
        defer { folder.close() }
        return try folder.entries()
      } catch  where error.errno == .noSuchFileOrDirectory {
        return []
      }
    }
    let names = Set(entries)
    return
      entries
      .filter { $0.hasSuffix(RecordKeeper.logSuffix) }
      .map { String($0.dropLast(RecordKeeper.logSuffix.count)) }
      .filter(RecordKeeper.isValidName)
      .sorted()
      .map { ($0, names.contains($0 + RecordKeeper.activeSuffix)) }
  }

  /// The record `name`: what it noted, one entry per object. O(lines) time;
  /// the log is read in 64 KiB pieces, so memory grows with the objects it
  /// names, not with its lines (a line longer than 1 MiB counts as damaged).
  ///
  /// - Throws: `.notFound` when there is no such record, `.invalidArgument`
  ///   for a name that cannot be a record's.
  public func record(named name: String) throws(TroveError) -> UsageRecord {
    try checkRecordName(name)
    let path = root + "/" + StoreLayout.records + "/" + name + RecordKeeper.logSuffix
    var reader = RecordReader()
    let (found, isActive) = try attempt("read record", path) {
      () throws(SystemCallError) -> (Bool, Bool) in
      do throws(SystemCallError) {
        let folder = try records.recordsFolder(creating: false)
        defer { folder.close() }
        let fd = try FileDescriptor.openRegularFile(name + RecordKeeper.logSuffix, in: folder)
        defer { fd.close() }
        try reader.read(fd)
        let active =
          (try? folder.status(of: name + RecordKeeper.activeSuffix, followSymlinks: false)) != nil
        return (true, active)
      } catch  where error.errno == .noSuchFileOrDirectory {
        return (false, false)
      }
    }
    guard found || (try? recordNames().contains { $0.name == name }) == true else {
      throw TroveError(
        .notFound, "no record '\(name)' in store '\(root)'", path: path, value: name)
    }
    return UsageRecord(
      name: name, isActive: isActive, objects: reader.objects, damagedLines: reader.damaged)
  }

  /// Whether `name` can name a record: 1 to 64 of `A-Z a-z 0-9 . _ -`,
  /// not starting with a dot.
  public static func isValidRecordName(_ name: String) -> Bool {
    RecordKeeper.isValidName(name)
  }

  /// The digests `names` noted, together: what `pin --record` pins and
  /// `sweep --keep-record` keeps. O(lines).
  ///
  /// - Throws: `.notFound` naming a record that does not exist.
  public func recordedDigests(_ names: [String]) throws(TroveError) -> [BlobDigest] {
    var seen = Set<BlobDigest>()
    var digests: [BlobDigest] = []
    for name in names {
      for object in try record(named: name).objects where seen.insert(object.digest).inserted {
        digests.append(object.digest)
      }
    }
    return digests
  }

  /// The records this process notes what it uses in: those on when the
  /// store was opened, and ``StoreConfiguration/recordName``.
  public var activeRecords: [String] { records.names }

  private func checkRecordName(_ name: String) throws(TroveError) {
    guard RecordKeeper.isValidName(name) else { throw RecordKeeper.invalidName(name) }
  }
}

/// Reads a record's log line by line into one entry per object: the
/// file in fixed pieces, each complete line parsed as it comes.
private struct RecordReader {
  /// A line longer than this (no key is) is damaged: skipped, not held.
  static let longestLine = 1 << 20
  static let pieceSize = 64 << 10

  private(set) var objects: [RecordedObject] = []
  private(set) var damaged = 0
  private var position: [BlobDigest: Int] = [:]

  /// Reads `fd` from its offset to its end. O(bytes) time, O(piece +
  /// longest line + objects) memory.
  mutating func read(_ fd: FileDescriptor) throws(SystemCallError) {
    var piece = [UInt8](repeating: 0, count: Self.pieceSize)
    var partial: [UInt8] = []
    var overlong = false
    while true {
      let result: Result<Int, SystemCallError> = piece.withUnsafeMutableBytes { raw in
        do throws(SystemCallError) { return .success(try fd.read(into: raw)) } catch {
          return .failure(error)
        }
      }
      let count = try result.get()
      if count == 0 { break }
      var start = 0
      while let newline = piece[start..<count].firstIndex(of: UInt8(ascii: "\n")) {
        if overlong {
          overlong = false
        } else if partial.isEmpty {
          take(piece[start..<newline])
        } else {
          partial.append(contentsOf: piece[start..<newline])
          take(partial[...])
          partial.removeAll(keepingCapacity: true)
        }
        start = newline + 1
      }
      guard !overlong else { continue }
      partial.append(contentsOf: piece[start..<count])
      if partial.count > Self.longestLine {
        overlong = true
        damaged += 1
        partial = []
      }
    }
    if !overlong && !partial.isEmpty { take(partial[...]) }
  }

  /// Parses one line, `DIGEST TAB TIME [TAB KEY]`, into the entries.
  private mutating func take(_ line: ArraySlice<UInt8>) {
    guard !line.isEmpty else { return }
    let fields = String(decoding: line, as: UTF8.self).split(
      separator: "\t", maxSplits: 2, omittingEmptySubsequences: false)
    guard fields.count >= 2, let digest = try? BlobDigest(parsing: String(fields[0])),
      let time = Int64(fields[1])
    else {
      damaged += 1
      return
    }
    var key: String?
    if fields.count == 3 {
      guard let unescaped = RecordKeeper.unescaped(fields[2]) else {
        damaged += 1
        return
      }
      key = unescaped
    }
    if let at = position[digest] {
      objects[at].firstUsed = min(objects[at].firstUsed, time)
      objects[at].lastUsed = max(objects[at].lastUsed, time)
      if let key, !objects[at].keys.contains(key) { objects[at].keys.append(key) }
    } else {
      position[digest] = objects.count
      objects.append(
        RecordedObject(
          digest: digest, keys: key.map { [$0] } ?? [], firstUsed: time, lastUsed: time))
    }
  }
}
