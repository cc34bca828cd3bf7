/// One file to make from a stored object: ``Store/materialize(_:mode:replacing:durable:verify:onProgress:)``.
public struct MaterializeRequest: Sendable, Hashable {
  /// The object.
  public var digest: BlobDigest
  /// The file to create.
  public var destination: String

  /// A request for a file at `destination` holding `digest`'s bytes.
  public init(_ digest: BlobDigest, at destination: String) {
    self.digest = digest
    self.destination = destination
  }
}

extension Store {
  /// Makes many files from stored objects, each as
  /// `materialize(_:at:mode:replacing:durable:verify:)` makes one, in
  /// order, with one store.
  ///
  /// Everything that can be checked before a byte is written is checked
  /// first, for every request: that no destination is named twice, that each destination's folder exists,
  /// and (unless `replacing`) that no destination exists; then objects the
  /// store does not hold are read through its remotes, several at once, as
  /// that reads one; then that the store holds each object. One failing
  /// check throws and nothing is written. Then the files are made; a
  /// failure of one of them (a full disk, a corrupt object) is its
  /// result, and the others are still made. Each destination appears
  /// whole or not at all. `onProgress` hears of the files done (made or
  /// failed) after each one. O(requests) checks, then the cost of each
  /// file.
  ///
  /// - Returns: one result a request, in their order.
  /// - Throws: `.notFound` (an object not stored), `.invalidArgument` (a
  ///   destination named twice, or that is no file name),
  ///   `.destinationDirectoryMissing`, `.destinationExists`, before
  ///   anything is written.
  public func materialize(
    _ requests: [MaterializeRequest], mode: LinkMode = .auto, replacing: Bool = false,
    durable: Bool = false, verify: Bool = false, onProgress: ProgressHandler? = nil
  ) throws(TroveError) -> [Result<Materialization, TroveError>] {
    // A destination is its folder (device and inode: `a/b`, `./a/b` and a
    // link to `a` are one folder) and its name there. Checked before
    // anything is downloaded.
    var named = Set<String>()
    for request in requests {
      let place = try checkDestination(request.destination, replacing: replacing)
      guard named.insert(place).inserted else {
        throw TroveError(
          .invalidArgument, "destination '\(request.destination)' is named more than once",
          path: request.destination)
      }
    }
    // Objects the store lacks are read through the remotes, many at once,
    // as one `materialize` reads one.
    var lacking: [BlobDigest] = []
    for request in requests where try objects.find(request.digest, confirmingMiss: true) == nil {
      lacking.append(request.digest)
    }
    _ = readThrough(lacking)
    for request in requests {
      guard try objects.find(request.digest, confirmingMiss: true)?.status.isRegular ?? false else {
        throw notFound(request.digest)
      }
    }
    var results: [Result<Materialization, TroveError>] = []
    results.reserveCapacity(requests.count)
    for (number, request) in requests.enumerated() {
      results.append(
        Result { () throws(TroveError) in
          try materialize(
            request.digest, at: request.destination, mode: mode, replacing: replacing,
            durable: durable, verify: verify)
        })
      onProgress?(
        ProgressReport(unit: .items, completed: Int64(number + 1), total: Int64(requests.count)))
    }
    return results
  }

  /// Checks, before anything is written, that a file can be made at
  /// `destination` (``openDestinationFolder(_:replacing:)``); returns
  /// where it is: its folder's device and inode, and its name there.
  private func checkDestination(_ destination: String, replacing: Bool) throws(TroveError)
    -> String
  {
    let (parent, name) = try openDestinationFolder(destination, replacing: replacing)
    defer { parent.close() }
    let folder = try attempt("write", destination) { () throws(SystemCallError) in
      try parent.status()
    }
    return "\(folder.device):\(folder.inode)/\(name)"
  }
}
