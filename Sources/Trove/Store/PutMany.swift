import Foundation

extension Store {
  /// At most this many objects share one group commit: the temp files
  /// stay open until it (a descriptor each).
  static let groupCommitObjects = 512
  /// A group commits once its staged bytes reach this, bounding the dirty
  /// data one sync must write.
  static let groupCommitBytes: Int64 = 64 << 20
  /// In a group, a file up to this size is not hashed before it is
  /// written to look for a stored copy (see ``prepare(_:path:key:expectedSize:priority:onProgress:grouped:)``).
  static let groupedHashFirstLimit: Int64 = 1 << 20
  /// In a group, a file under this size is copied rather than cloned.
  static let groupedCloneMinimum: Int64 = 64 << 10

  /// Stores the files at `paths`, each as `put(file:key:expectedSize:priority:onProgress:)`
  /// stores one, with a group commit: the files of a group (up to 512
  /// objects or 64 MiB) are written into `tmp/`, made durable together,
  /// published, and recorded in one index transaction. The guarantee per
  /// object is the one of a single put: a result is given only once its
  /// object is durable and indexed; the bytes behind a digest are exactly
  /// the bytes it names.
  ///
  /// Each input succeeds or fails on its own: a missing file, one over
  /// `max-object-size`, or one whose bytes could not be made durable fails
  /// alone (and leaves nothing in the store) while the others are stored.
  /// Inputs that hold the same bytes, in the group or already stored, are
  /// dedup hits (``PutResult/isDuplicate``). The settings are read and the
  /// free space measured once per group. The budget is
  /// checked once per group: a sweep after it, if the store went over, appears in the
  /// ``PutResult/sweeps`` of the group's last new object.
  ///
  /// `onProgress`, when given, hears of the bytes of input `index` read (or
  /// hashed after a clone) block by block, out of its length, as
  /// `put(file:key:expectedSize:priority:onProgress:)`'s does.
  /// `onResult`, when given, hears of each input's result as soon as it is
  /// acknowledged, in the order of `paths`, on the calling thread.
  ///
  /// A group commits on a thread of its own while the calling thread stages
  /// the next group (one commit at a time), when the process may open
  /// enough files for two groups (3,072 descriptors): its syncs are
  /// waited for while the next files are read and written.
  ///
  /// - Returns: one result per path, in order.
  /// - Throws: `.readOnlyStore` before reading anything; every other
  ///   failure is its input's result.
  public func put(
    files paths: [String], priority: PutPriority = .important,
    onProgress: (@Sendable (_ index: Int, ProgressReport) -> Void)? = nil,
    onResult: ((Int, Result<PutResult, TroveError>) -> Void)? = nil
  ) throws(TroveError) -> [Result<PutResult, TroveError>] {
    try requireWritable()
    if paths.count > 1 {
      // A staged file and its folder for each input of up to two groups.
      let groups = Self.groupCommitsOverlap ? 2 : 1
      Sys.reserveDescriptors(groups * (min(paths.count, Self.groupCommitObjects) + 256) + 64)
    }
    var results = [Result<PutResult, TroveError>?](repeating: nil, count: paths.count)
    var reported = 0
    var group: [(index: Int, put: StagedPut)] = []
    var groupBytes: Int64 = 0
    // The settings and the free-space measurement the group's files share.
    var admission: Admission?
    // The group committing on its own thread while the next is staged.
    var committing: GroupInFlight?

    func report() {
      while reported < results.count, let result = results[reported] {
        onResult?(reported, result)
        reported += 1
      }
    }
    // Takes the outcomes of the group committing, once it is done (or, with
    // `wait`, when it is).
    func collect(wait: Bool) {
      guard let inFlight = committing, wait || inFlight.isFinished else { return }
      for (index, result) in inFlight.wait() { results[index] = result }
      committing = nil
      report()
    }
    func commitGroup() {
      let members = group
      group = []
      groupBytes = 0
      admission = nil
      // One group commits at a time: the next waits for this one.
      collect(wait: true)
      let work = { [self] in commit(group: members, paths: paths) }
      if Self.groupCommitsOverlap, members.count > 1 {
        committing = GroupInFlight(work)
      } else {
        for (index, result) in work() { results[index] = result }
      }
    }

    for (index, path) in paths.enumerated() {
      do throws(TroveError) {
        let shared: Admission
        if let current = admission, !current.isExpired {
          shared = current
        } else {
          shared = try Admission(store: self)
          admission = shared
        }
        let source = try openSource(path)
        defer { source.close() }
        var progress: ProgressHandler?
        if let onProgress { progress = { @Sendable report in onProgress(index, report) } }
        switch try prepare(
          source, path: path, key: nil, expectedSize: nil, priority: priority,
          onProgress: progress, grouped: true, admission: shared, atStart: true)
        {
        case .finished(let result): results[index] = .success(result)
        case .staged(let put):
          group.append((index, put))
          groupBytes += put.staged.storedBytes
        }
      } catch {
        results[index] = .failure(Self.naming(path, in: error))
      }
      if group.count >= Self.groupCommitObjects || groupBytes >= Self.groupCommitBytes {
        commitGroup()
      }
      collect(wait: false)
      report()
    }
    if !group.isEmpty { commitGroup() }
    collect(wait: true)
    report()
    writeBack.run(self)
    return results.map { $0! }
  }

  /// Whether a put of many files commits a group on a thread of its own
  /// while it stages the next: when this process may open enough files for
  /// two groups at once (each holds a descriptor per object and per fan-out
  /// folder until it is committed) and many more besides.
  static let groupCommitsOverlap: Bool = {
    guard let limit = Sys.openFileLimit else { return false }
    return limit >= UInt64(4 * (groupCommitObjects + 256))
  }()

  /// Publishes `group` (staged inputs of a put of many files, with their
  /// indexes in `paths`) in one group commit, and returns each input's
  /// result. Safe to run on another thread than the one staging the next
  /// group.
  private func commit(group: [(index: Int, put: StagedPut)], paths: [String])
    -> GroupInFlight.Outcomes
  {
    zip(group, publish(group.map(\.put))).map { member, result in
      (member.index, result.mapError { Self.naming(paths[member.index], in: $0) })
    }
  }

  /// `error`, for input `path` of a put of many files: its message names
  /// the input, as every line of such a put does (a write that failed names
  /// the temp file it was writing, a failed publish the object).
  static func naming(_ path: String, in error: TroveError) -> TroveError {
    if error.path == path || error.value == path { return error }
    return TroveError(
      error.code, "\(error.message) for '\(path)'", path: path, value: error.value,
      cause: error.cause, remedy: error.remedy)
  }

  /// Opens the file at `path` to be put, with the errors a put gives.
  func openSource(_ path: String) throws(TroveError) -> FileDescriptor {
    do throws(SystemCallError) {
      return try FileDescriptor.open(path)
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      throw TroveError(.sourceMissing, "cannot read '\(path)'", path: path, cause: error)
    } catch {
      throw TroveError.system(error, "read", path: path)
    }
  }
}
