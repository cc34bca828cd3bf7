import Foundation
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// One change of a pin or a key, as `references.log` records it: one JSON
/// object a line.
struct JournalRecord: Codable, Equatable {
  enum Operation: String, Codable {
    case pin, unpin, bind, unbind
    /// The object's row went, with every pin and key of it (an `rm`, an
    /// eviction, a quarantine, a reconcile that found its file gone).
    case drop
  }
  var op: Operation
  var digest: BlobDigest?
  /// A pin's name.
  var name: String?
  /// A pin's expiry (nanoseconds since 1970).
  var expires: Int64?
  var key: String?
  var origin: KeyOrigin?
  var checksums: [Checksum]?
  /// True for a key bound from a remote's record (``KeyBinding/isPulled``).
  var pulled: Bool?
}

/// `references.log`: every pin and key as it changes, appended in the
/// index transaction that makes the change, so that pins and keys
/// outlive the index. When the index is lost (deleted, or set aside as
/// damaged) and rebuilt from `objects/`, the log is replayed in order onto
/// the objects that are there: a pinned object stays pinned and the next
/// sweep cannot take it. A line cut short by a crash is skipped. When the
/// log grows past 1 MiB and four times what it describes, it is rewritten
/// from the index (a temp file renamed over it).
extension ObjectTable {
  static let journalLimit: Int64 = 1 << 20

  /// Appends `records` (call inside the index write transaction that
  /// makes the changes). Best effort: a store whose root cannot be
  /// written (read-only, full) still changes its index — the log is a
  /// safety net for the index, never a reason to fail.
  func journal(_ records: [JournalRecord], _ tx: IndexSession) {
    guard !records.isEmpty else { return }
    let bytes = Self.lines(records)
    guard
      let fd = try? FileDescriptor.open(
        StoreLayout.journal, in: rootDirectory,
        [.writeOnly, .append, .create, .noFollow, .nonBlocking], permissions: 0o644)
    else { return }
    defer { fd.close() }
    fd.shareForStore(access)
    guard (try? fd.status().isRegular) == true, (try? fd.writeAll(bytes)) != nil else { return }
    if let size = try? fd.status().size, size > Self.journalLimit { compactJournal(tx, size: size) }
  }

  /// Deletes `digests`' rows with their pins, keys and checksums (see
  /// ``IndexSession/deleteObjects(_:)``), and says so in the log, so that a
  /// rebuild never brings their pins and keys back onto a later copy.
  /// Call inside the write transaction.
  func forget(_ digests: [BlobDigest], _ tx: IndexSession) throws(TroveError) {
    _ = try tx.deleteObjects(digests)
    removals.journalDrops(digests, tx)
  }

  /// `records` as the log's lines: one JSON object each.
  static func lines(_ records: [JournalRecord]) -> [UInt8] {
    var lines = JournalLine()
    for record in records { lines.append(record) }
    return lines.bytes
  }

  /// Rewrites the log as the pins and keys the index holds now, whatever
  /// its size: nothing another user appended to it is left to replay. The
  /// new log is written beside it in the root folder (which only this
  /// user may write by now, unlike `tmp/`), private until it is whole,
  /// then given `access`'s mode and `owner` (uid, gid) when one is given.
  func rewriteJournal(access newAccess: StoreAccess, owner: (UInt32, UInt32)? = nil)
    throws(TroveError)
  {
    try index().write("rewrite \(StoreLayout.journal)") { (tx) throws(TroveError) in
      let all = try records(tx)
      try attempt("rewrite", root + "/" + StoreLayout.journal) { () throws(SystemCallError) in
        try writeJournal(
          Self.lines(all), in: rootDirectory, mode: newAccess.sharedFileMode, owner: owner)
      }
    }
  }

  /// Every pin and key the index holds, as log records.
  private func records(_ tx: IndexSession) throws(TroveError) -> [JournalRecord] {
    var records = try tx.pins().map {
      JournalRecord(op: .pin, digest: $0.digest, name: $0.name, expires: $0.expiresNanoseconds)
    }
    records += try tx.keys().map {
      JournalRecord(
        op: .bind, digest: $0.digest, key: $0.key, origin: $0.origin,
        checksums: (try? tx.checksums(of: $0.digest)).flatMap { $0.isEmpty ? nil : $0 },
        pulled: $0.isPulled ? true : nil)
    }
    return records
  }

  /// Replaces the log with `bytes`: a temp file in `folder` (`tmp/` by
  /// default), private to this user until it is whole and synced (no one
  /// else gets a handle to write it), then given `mode` (the store's
  /// shared mode by default) and `owner`, and renamed into place.
  private func writeJournal(
    _ bytes: [UInt8], in folder: FileDescriptor? = nil, mode: mode_t? = nil,
    owner: (UInt32, UInt32)? = nil
  ) throws(SystemCallError) {
    let folder = folder ?? tmpDirectory
    let temp = StoreLayout.temporaryName("journal")
    do throws(SystemCallError) {
      let fd = try FileDescriptor.open(
        temp, in: folder, [.writeOnly, .create, .exclusive, .noFollow], permissions: 0o600)
      defer { fd.close() }
      try fd.writeAll(bytes)
      try fd.sync()
      try fd.setPermissions(mode ?? (access == .group ? access.sharedFileMode : 0o644))
      if let owner { try fd.setOwner(owner.0, owner.1) }
      try folder.rename(temp, to: StoreLayout.journal, in: rootDirectory)
    } catch {
      try? folder.removeFile(temp)
      throw error
    }
  }

  /// Rewrites the log as the pins and keys the index holds now, when it
  /// is more than four times their size. Best effort.
  private func compactJournal(_ tx: IndexSession, size: Int64) {
    // Measuring writes every key's line: measured again only once the log
    // could be four times what was measured, not at every append.
    if let live = journalLive.withLock({ $0 }), live * 4 >= size { return }
    guard let all = try? records(tx) else { return }
    let bytes = Self.lines(all)
    journalLive.withLock { $0 = Int64(bytes.count) }
    guard Int64(bytes.count) * 4 < size else { return }
    try? writeJournal(bytes)
  }

  /// What replaying the log onto a rebuilt index did.
  struct JournalReplay {
    var pins = 0
    var keys = 0
    /// Pins and keys whose object is not in the store (or whose lease ran out).
    var lost = 0
  }

  /// Replays the first `length` bytes of the log onto a new index: the
  /// last word on each pin and key wins, and is applied where its object
  /// is present.
  func replayJournal(length: Int64) throws(TroveError) -> JournalReplay? {
    guard
      let fd = try? FileDescriptor.open(
        StoreLayout.journal, in: rootDirectory, [.readOnly, .noFollow, .nonBlocking]),
      (try? fd.status().isRegular) == true
    else { return nil }
    let bytes = (try? fd.readAll(limit: Int(min(length, 1 << 30)))) ?? []
    // A log another user could write says nothing of whose a binding is:
    // each is replayed as a remote's would be, never for a signer.
    let status = try? fd.status()
    let folderOwner = (try? rootDirectory.status().owner) ?? Sys.effectiveUserID
    let shared =
      status.map {
        ![Sys.effectiveUserID, 0, folderOwner].contains($0.owner) || $0.mode & 0o022 != 0
      } ?? true
    fd.close()
    var pins: [String: JournalRecord] = [:]
    var keys: [String: JournalRecord] = [:]
    var pinsOf: [BlobDigest: Set<String>] = [:]
    var keysOf: [BlobDigest: Set<String>] = [:]
    let decoder = JSONDecoder()
    for line in bytes.split(separator: 0x0A) {
      guard let record = try? decoder.decode(JournalRecord.self, from: Data(line)) else { continue }
      switch record.op {
      case .pin, .unpin:
        guard let digest = record.digest, let name = record.name else { continue }
        let id = digest.hex + "\n" + name
        pins[id] = record.op == .pin ? record : nil
        if record.op == .pin { pinsOf[digest, default: []].insert(id) }
      case .bind, .unbind:
        guard let key = record.key else { continue }
        if let old = keys[key]?.digest { keysOf[old]?.remove(key) }
        keys[key] = record.op == .bind ? record : nil
        if record.op == .bind, let digest = record.digest {
          keysOf[digest, default: []].insert(key)
        }
      case .drop:
        guard let digest = record.digest else { continue }
        for id in pinsOf.removeValue(forKey: digest) ?? [] { pins[id] = nil }
        for key in keysOf.removeValue(forKey: digest) ?? [] where keys[key]?.digest == digest {
          keys[key] = nil
        }
      }
    }
    if pins.isEmpty && keys.isEmpty { return nil }
    let now = currentTimeNanoseconds()
    return try index().write("replay \(StoreLayout.journal)") { (tx) throws(TroveError) in
      var replay = JournalReplay()
      for record in pins.values {
        guard let digest = record.digest, let name = record.name,
          record.expires.map({ $0 > now }) ?? true, try tx.entry(for: digest) != nil
        else {
          replay.lost += 1
          continue
        }
        try tx.insertPin(digest, name: name, expires: record.expires, now: now)
        replay.pins += 1
      }
      for record in keys.values {
        guard let digest = record.digest, let key = record.key, try tx.entry(for: digest) != nil
        else {
          replay.lost += 1
          continue
        }
        try tx.insertKey(
          key, digest: digest, origin: record.origin, pulled: shared || record.pulled == true,
          at: now)
        try tx.insertChecksums(record.checksums ?? [], for: digest)
        replay.keys += 1
      }
      return replay
    }
  }
}
