/// An input staged in `tmp/` in its final form, not yet published: the
/// step of an ingest between staging and publishing. Published alone
/// (``publish()``), coalesced with the puts other threads make at the same
/// time, or with others of a multi-file put in one group commit
/// (``Store/publish(_:)``); then finished (``Store/finish(_:of:sweepingOverBudget:)``).
struct StagedPut {
  let store: Store
  /// The staged file (and the key to bind with it); this put owns its descriptor.
  var staged: StagedObject
  var method: IngestMethod
  /// Evictions made for this put so far.
  var sweeps: [SweepReport]
  /// The admission it came in by: the budget its finish checks.
  let admission: Admission

  /// Publishes the object as a single put: alone, with its own syncs and
  /// transaction, or in one group commit with the single puts other
  /// threads of this process make at the same time (``CommitQueue``); then
  /// finishes it.
  func publish() throws(TroveError) -> PutResult {
    let outcome = try store.objects.publishCoalescing(staged)
    return store.finish(outcome, of: self)
  }
}

/// How far an ingest took an input.
enum Ingested {
  /// All the way: the store held the bytes, and the hit is recorded.
  case finished(PutResult)
  /// To a staged object, for the caller to publish.
  case staged(StagedPut)
}

extension Store {
  /// Publishes `puts` in one group commit (``ObjectTable/publish(group:)``)
  /// and finishes each; returns one result per put, in order. A sweep after
  /// the group, if the store went over its budget, appears under its last
  /// new object. One put alone is published as ``StagedPut/publish()``
  /// publishes it. Safe to run on another thread than the one staging the
  /// next group.
  func publish(_ puts: [StagedPut]) -> [Result<PutResult, TroveError>] {
    if puts.count == 1, let only = puts.first {
      do throws(TroveError) {
        return [.success(try only.publish())]
      } catch {
        return [.failure(error)]
      }
    }
    let outcomes = objects.publish(group: puts.map(\.staged))
    var results: [Result<PutResult, TroveError>] = []
    var stored: [(position: Int, digest: BlobDigest)] = []
    for (put, outcome) in zip(puts, outcomes) {
      switch outcome {
      case .success(let published):
        if case .stored = published { stored.append((results.count, put.staged.digest)) }
        results.append(.success(finish(published, of: put, sweepingOverBudget: false)))
      case .failure(let error):
        results.append(.failure(error))
      }
    }
    if let last = stored.last,
      let sweep = try? sweepIfOverBudget(protecting: stored.map(\.digest)),
      case .success(var result) = results[last.position]
    {
      result.sweeps.append(sweep)
      results[last.position] = .success(result)
    }
    return results
  }

  /// The last step of an ingest: the result of a published put, with its
  /// key noted for the records, after the sweep it may call for — if the
  /// object is new and the store is now over its budget, an auto-sweep that
  /// keeps it. The bytes are stored; a failing auto-sweep does not fail the
  /// put (`trove sweep` reports whatever it was).
  func finish(_ outcome: PublishOutcome, of put: StagedPut, sweepingOverBudget: Bool = true)
    -> PutResult
  {
    let entry: StoreEntry
    switch outcome {
    case .duplicate(let hit): entry = hit
    case .stored(let new): entry = new
    }
    records.note(entry.digest)
    for key in put.staged.binding?.keys ?? [] { records.note(entry.digest, key: key) }
    var result = PutResult(
      digest: entry.digest, size: entry.size, isDuplicate: true, method: put.method,
      sweeps: put.sweeps)
    guard case .stored = outcome else { return result }
    result.isDuplicate = false
    if let budget = put.admission.policy.budget {
      result.exceedsBudget = entry.allocatedBytes > budget
    }
    if sweepingOverBudget, let sweep = try? sweepIfOverBudget(protecting: [entry.digest]) {
      result.sweeps.append(sweep)
    }
    return result
  }

  /// Stages a finished raw temp file (`name` in `tmp/`, open as `file`,
  /// holding `size` bytes hashing to `digest`) in the form the admission's
  /// policy chooses — kept raw, or compressed into a new temp file, in
  /// which case the raw one is removed and `file` closed. The raw file is
  /// removed and `file` closed when this throws.
  func stage(
    raw name: String, file: FileDescriptor, digest: BlobDigest, size: Int64,
    admission: Admission, writes: inout PressuredWrites
  ) throws(TroveError) -> StagedObject {
    var sample: UnsafeMutableRawBufferPointer?
    defer { sample?.deallocate() }
    let decision = admission.policy.storage(size: size) {
      let buffer = UnsafeMutableRawBufferPointer.allocate(
        byteCount: CachePolicy.sampleSize, alignment: 4096)
      sample = buffer
      guard let n = try? file.read(into: buffer, at: 0) else { return nil }
      return UnsafeRawBufferPointer(rebasing: buffer[..<n])
    }
    switch decision {
    case .raw(let skip):
      return StagedObject(
        name: name, file: file, digest: digest, size: size, isCompressed: false,
        storedBytes: size, skipped: skip)
    case .zstd(let level, let workers, _):
      defer {
        file.close()
        try? tmpDirectory.removeFile(name)
      }
      let temp = try compressToTemporary(
        file, size: size, level: level, workers: workers, path: tmpPath + "/" + name,
        priority: writes.priority)
      for relief in temp.reliefs { writes.record(relief) }
      return StagedObject(
        name: temp.name, file: temp.file, digest: digest, size: size, isCompressed: true,
        storedBytes: temp.storedBytes)
    }
  }
}
