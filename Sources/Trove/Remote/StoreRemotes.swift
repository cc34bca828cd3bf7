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

  /// Why the remotes are not this user's choice: a line naming
  /// `remotes.json` and its owner when neither this user nor root owns it
  /// (whoever does chose the URLs and the `--trust` keys this store reads
  /// with); nil when they own it or there is none.
  public func remotesChosenByAnother() -> String? {
    guard let read = try? readRemoteFile() else { return nil }
    if let reason = Self.rootFileRefusal(read.status) {
      return
        "'\(remotesPath)' \(reason): its remotes and their trusted keys are another user's choice"
    }
    guard let list = try? RemoteList.decode(read.bytes, path: remotesPath) else { return nil }
    let carried = list.remotes.filter { $0.chosenBy.map { $0 != Sys.effectiveUserID } ?? false }
    guard !carried.isEmpty else { return nil }
    return
      "\(Self.naming(carried)) in '\(remotesPath)' \(carried.count == 1 ? "is" : "are") another user's choice, with the keys it trusts: remove and add again what you want to keep"
  }

  /// `remote 'a' (uid N)` or `remotes 'a' (uid N), 'b' (uid M)`.
  private static func naming(_ remotes: [RemoteSpec]) -> String {
    (remotes.count == 1 ? "remote " : "remotes ")
      + remotes.map { "'\($0.name)' (\(RemoteSpec.chooserName($0.chosenBy ?? 0)))" }
      .joined(separator: ", ")
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
  /// the remote (`checkRemote(named:cleaningUploadsOlderThan:)` does that).
  ///
  /// - Throws: `.invalidArgument` when the spec is invalid (see
  ///   ``RemoteSpec/validated()``), its ``RemoteSpec/authEnvironment``
  ///   does not start with `TROVE_`, or its name is taken; nothing is
  ///   written.
  public func addRemote(_ spec: RemoteSpec) throws(TroveError) {
    let spec = try spec.validated()
    if let variable = spec.authEnvironment,
      let refusal = RemoteSpec.credentialVariableRefusal(variable, remote: spec.name)
    {
      throw TroveError(
        .invalidArgument, refusal + "; name a TROVE_ variable (export TROVE_\(variable)=…)",
        value: variable)
    }
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
    // Nothing to remove writes nothing: a rewrite makes the file this
    // user's.
    guard try readRemoteList().remotes.contains(where: { $0.name == name }) else { return false }
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

  /// Reads `remotes.json`: never blocked on (a FIFO or device in its
  /// place is refused), and its credential bindings (auth-env, and
  /// `~/.netrc` for its hosts) refused unless this user or root owns it.
  private func readRemoteList() throws(TroveError) -> RemoteList {
    let path = remotesPath
    guard let read = try readRemoteFile() else { return RemoteList() }
    var list = try RemoteList.decode(read.bytes, path: path)
    let refusal = Self.rootFileRefusal(read.status)
    for i in list.remotes.indices {
      let reason: String
      if let refusal {
        reason = "'\(path)' \(refusal)"
        // Whoever owns the file chose its remotes, unless it says another
        // did — which is only its owner's word: that chooser is unknown.
        // Never this user: this file is not theirs.
        let owner = read.status.owner
        let claimed = list.remotes[i].chosenBy ?? owner
        list.remotes[i].chosenBy =
          claimed == owner && owner != Sys.effectiveUserID ? owner : RemoteSpec.unknownChooser
      } else if let chooser = list.remotes[i].chosenBy, chooser != Sys.effectiveUserID {
        reason =
          "remote '\(list.remotes[i].name)' in '\(path)' was chosen by \(RemoteSpec.chooserName(chooser))"
      } else {
        continue
      }
      list.remotes[i].isOwnConfiguration = false
      if list.remotes[i].authEnvironment != nil {
        list.remotes[i].credentialRefusal =
          reason
          + ": its auth-env for remote '\(list.remotes[i].name)' is not used, as another user chose where the credential goes"
      }
    }
    return list
  }

  /// The bytes of `remotes.json` and the status of the descriptor they
  /// were read from; nil when there is none.
  private func readRemoteFile() throws(TroveError) -> (bytes: [UInt8], status: FileStatus)? {
    let path = remotesPath
    enum Found {
      case missing, notRegular
      case read([UInt8], FileStatus)
    }
    let found = try attempt("read", path) { () throws(SystemCallError) -> Found in
      let fd: FileDescriptor
      do throws(SystemCallError) {
        fd = try FileDescriptor.openRegularFile(RemoteList.fileName, in: rootDirectory)
      } catch  where error.errno == .noSuchFileOrDirectory {
        return .missing
      } catch  where error.errno == .notARegularFile {
        return .notRegular
      }
      defer { fd.close() }
      return .read(try fd.readAll(limit: 1 << 20), try fd.status())
    }
    switch found {
    case .missing: return nil
    case .notRegular:
      throw TroveError(
        .invalidConfig, "'\(path)' is not a regular file; remove it", path: path)
    case .read(let bytes, let status): return (bytes, status)
    }
  }

  /// Reads `remotes.json` under the root's lock, applies `change`, and
  /// replaces the file atomically (``replaceRootFile(_:with:)``, as
  /// `config.json` is rewritten); when `change` throws, nothing is written.
  ///
  /// The file written is this user's, and says which of its remotes are
  /// not: those of a file another user owned stay that user's choice
  /// (``RemoteSpec/chosenBy``: neither their auth-env nor `~/.netrc` is
  /// used for them), with one warning naming them.
  private func rewriteRemoteList(_ change: (inout RemoteList) throws(TroveError) -> Void)
    throws(TroveError)
  {
    _ = try? rootDirectory.lock()
    defer { rootDirectory.unlock() }
    var list = try readRemoteList()
    try change(&list)
    let carried = list.remotes.filter { !$0.isOwnConfiguration }
    if !carried.isEmpty {
      let one = carried.count == 1
      configuration.onWarning?(
        "\(Self.naming(carried)) in '\(remotesPath)' stay\(one ? "s" : "") another user's choice: neither \(one ? "its" : "their") auth-env nor ~/.netrc is used for \(one ? "it" : "them"); remove and add again what you want to keep"
      )
    }
    try replaceRootFile(RemoteList.fileName, with: list.encoded())
  }
}
