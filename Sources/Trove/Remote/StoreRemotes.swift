import Foundation

/// The remotes a store is configured with: listing, adding and removing
/// them in `remotes.json`.
extension Store {
  private var remotesPath: String { root + "/" + RemoteList.fileName }

  /// The configured remotes, in the order they are tried; none when
  /// `remotes.json` does not exist.
  ///
  /// - Throws: `.invalidConfig` naming `remotes.json` when it cannot be used.
  public func remotes() throws(TroveError) -> [RemoteSpec] {
    try readRemoteList().remotes
  }

  /// The remote named `name`.
  ///
  /// - Throws: `.notFound` when no remote has that name.
  public func remote(named name: String) throws(TroveError) -> RemoteSpec {
    guard let spec = try remotes().first(where: { $0.name == name }) else {
      throw TroveError(
        .notFound, "no remote '\(name)' in store '\(root)'", value: name, remedy: .listRemotes)
    }
    return spec
  }

  /// Adds `spec` after the remotes already configured. Nothing is sent to
  /// the remote (`checkRemote(named:)` does that).
  ///
  /// - Throws: `.invalidArgument` when the spec is invalid (see
  ///   ``RemoteSpec/validated()``) or its name is taken; nothing is written.
  public func addRemote(_ spec: RemoteSpec) throws(TroveError) {
    let spec = try spec.validated()
    try rewriteRemoteList { (list) throws(TroveError) in
      if list.remotes.contains(where: { $0.name == spec.name }) {
        throw TroveError(
          .invalidArgument,
          "remote '\(spec.name)' already exists in store '\(root)'",
          value: spec.name, remedy: .removeRemoteFirst(name: spec.name))
      }
      // Its upload queue starts now (what the store held before goes up
      // by 'remote push --all'), recorded before the remote is published:
      // no put sees the remote without it. A remote of the same name
      // removed before leaves nothing behind.
      let now = currentTimeNanoseconds()
      try index().write("add remote '\(spec.name)'") { (tx) throws(TroveError) in
        try tx.dropRemote(spec.name)
        try tx.dropHoldings(spec.name)
        try tx.setRemote(spec.name, ["since": now])
      }
      list.remotes.append(spec)
    }
  }

  /// Removes the remote named `name` from the configuration (nothing on
  /// the remote changes), and its status (``remoteStatus()``). Returns
  /// false when there was none.
  @discardableResult
  public func removeRemote(named name: String) throws(TroveError) -> Bool {
    var removed = false
    try rewriteRemoteList { list in
      let before = list.remotes.count
      list.remotes.removeAll { $0.name == name }
      removed = list.remotes.count != before
    }
    if removed {
      // Its breaker and counts go with it: a remote added again under
      // the name starts afresh.
      _ = try? index().write("forget remote '\(name)'") { (tx) throws(TroveError) in
        try tx.dropRemote(name)
        try tx.dropHoldings(name)
      }
    }
    return removed
  }

  private func readRemoteList() throws(TroveError) -> RemoteList {
    let path = remotesPath
    let bytes: [UInt8]? = try attempt("read", path) { () throws(SystemCallError) -> [UInt8]? in
      let fd: FileDescriptor
      do throws(SystemCallError) {
        fd = try FileDescriptor.open(
          RemoteList.fileName, in: rootDirectory, [.readOnly, .noFollow])
      } catch  where error.errno == .noSuchFileOrDirectory {
        return nil
      }
      defer { fd.close() }
      return try fd.readAll(limit: 1 << 20)
    }
    guard let bytes else { return RemoteList() }
    return try RemoteList.decode(bytes, path: path)
  }

  /// Reads `remotes.json` under the root's lock, applies `change`, and
  /// replaces the file atomically (``replaceRootFile(_:with:)``, as
  /// `config.json` is rewritten); when `change` throws, nothing is written.
  private func rewriteRemoteList(_ change: (inout RemoteList) throws(TroveError) -> Void)
    throws(TroveError)
  {
    _ = try? rootDirectory.lock()
    defer { rootDirectory.unlock() }
    var list = try readRemoteList()
    try change(&list)
    try replaceRootFile(RemoteList.fileName, with: list.encoded())
  }
}
