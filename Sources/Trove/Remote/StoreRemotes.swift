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
  /// `remotes.json` and its owner when it is not as this user or root
  /// writes it (see `rootFileRefusal`): whoever made it chose the URLs
  /// and the `--trust` keys this store reads with (never where this
  /// user's credentials go: ``CredentialBindings``); nil otherwise.
  public func remotesChosenByAnother() -> String? {
    guard let read = try? readRemoteFile(), let reason = Self.rootFileRefusal(read.status) else {
      return nil
    }
    return
      "'\(remotesPath)' \(reason): its remotes and their trusted keys are another user's choice"
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

  /// Adds `spec` after the remotes already configured, and lends it this
  /// user's credentials (``lendCredentials(toRemote:authEnvironment:)``): its
  /// ``RemoteSpec/authEnvironment`` when it names one, else whatever this
  /// user already lends its URL, else `~/.netrc`'s and the AWS
  /// credentials. Nothing is sent to the remote
  /// (`checkRemote(named:cleaningUploadsOlderThan:)` does that).
  ///
  /// - Throws: `.invalidArgument` when the spec is invalid (see
  ///   ``RemoteSpec/validated()``) or its name is taken; what
  ///   ``lendCredentials(toRemote:authEnvironment:)`` throws when it names a
  ///   variable. Nothing is written to the store then.
  public func addRemote(_ spec: RemoteSpec) throws(TroveError) {
    let spec = try spec.validated()
    if try readRemoteList(lending: false).remotes.contains(where: { $0.name == spec.name }) {
      throw nameTaken(spec.name)
    }
    do throws(TroveError) {
      try lendCredentials(to: spec, authEnvironment: spec.authEnvironment, replacing: false)
    } catch  where spec.authEnvironment == nil {
      configuration.onWarning?(
        "remote '\(spec.name)': no credential of yours (~/.netrc, AWS) is lent to it: \(error.message)"
      )
    }
    try rewriteRemoteList { (list) throws(TroveError) in
      if list.remotes.contains(where: { $0.name == spec.name }) { throw nameTaken(spec.name) }
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

  private func nameTaken(_ name: String) -> TroveError {
    TroveError(
      .invalidArgument, "remote '\(name)' already exists in store '\(root)'",
      value: name, remedy: .removeRemoteFirst(name: name))
  }

  /// Lends this user's credentials to the remote named `name` (its URL and
  /// endpoint, in whichever store): the value of `authEnvironment` when
  /// given, else `~/.netrc`'s login for its host over HTTP and the AWS
  /// credentials for S3. Written to this user's bindings
  /// (``StoreConfiguration/credentialBindings``), never to the store.
  ///
  /// - Throws: `.notFound` when there is no such remote; `.invalidArgument`
  ///   for a variable name that is not one; `.invalidConfig` when this
  ///   process has nowhere to keep bindings (no `HOME`) or their file is
  ///   not this user's alone; the failed call naming the path otherwise.
  /// - Returns: the remote as it was read and lent to (its URL may have
  ///   changed since, if another user rewrote `remotes.json`).
  @discardableResult
  public func lendCredentials(toRemote name: String, authEnvironment: String? = nil)
    throws(TroveError) -> RemoteSpec
  {
    let spec = try remote(named: name)
    try lendCredentials(to: spec, authEnvironment: authEnvironment, replacing: true)
    return spec
  }

  /// Lends `spec`'s URL this user's credentials; an existing binding of it
  /// is kept unless `replacing`, or `authEnvironment` names a variable.
  private func lendCredentials(
    to spec: RemoteSpec, authEnvironment: String?, replacing: Bool
  ) throws(TroveError) {
    if let variable = authEnvironment, !RemoteSpec.isVariableName(variable) {
      throw TroveError(
        .invalidArgument,
        "invalid auth-env '\(variable)' for remote '\(spec.name)': expected an environment variable's name, such as CACHE_TOKEN",
        value: variable)
    }
    let bindings = try credentialBindings()
    try bindings.update { list in
      let replaces = replacing || authEnvironment != nil
      if !replaces, list.contains(where: { $0.matches(spec) }) { return }
      list.removeAll { $0.matches(spec) }
      list.append(CredentialBinding(for: spec, authEnvironment: authEnvironment))
    }
  }

  /// Stops lending this user's credentials to the remote named `name`:
  /// removes their binding of its URL (which other stores naming the same
  /// URL share). Returns false when there was none.
  ///
  /// - Throws: as ``lendCredentials(toRemote:authEnvironment:)``.
  @discardableResult
  public func withdrawCredentials(fromRemote name: String) throws(TroveError) -> (
    spec: RemoteSpec, removed: Bool
  ) {
    let spec = try remote(named: name)
    var removed = false
    try credentialBindings().update { list in
      let before = list.count
      list.removeAll { $0.matches(spec) }
      removed = list.count != before
    }
    return (spec, removed)
  }

  /// This user's bindings, or the error saying there is no place for them.
  private func credentialBindings() throws(TroveError) -> CredentialBindings {
    guard let bindings = configuration.credentialBindings else {
      throw TroveError(
        .invalidConfig,
        "no place for your credential bindings: neither HOME nor XDG_CONFIG_HOME is set",
        value: "HOME")
    }
    return bindings
  }

  /// Removes the remote named `name` from the configuration (nothing on
  /// the remote changes), and its status (``remoteStatus()``). Returns
  /// false when there was none. The credentials this user lends its URL
  /// stay lent (``withdrawCredentials(fromRemote:)`` takes them back).
  @discardableResult
  public func removeRemote(named name: String) throws(TroveError) -> Bool {
    // Nothing to remove writes nothing: a rewrite makes the file this
    // user's.
    guard try readRemoteList(lending: false).remotes.contains(where: { $0.name == name }) else {
      return false
    }
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

  /// Reads `remotes.json` (never blocked on: a FIFO or device in its
  /// place is refused) and, with `lending`, marks the remotes this user
  /// lends credentials to, with the variable they lend
  /// (``RemoteSpec/lendsCredentials``): only this user's own bindings
  /// decide that, whoever wrote the file.
  private func readRemoteList(lending: Bool = true) throws(TroveError) -> RemoteList {
    guard let read = try readRemoteFile() else { return RemoteList() }
    var list = try RemoteList.decode(read.bytes, path: remotesPath)
    let bindings =
      lending && !list.remotes.isEmpty ? try configuration.credentialBindings?.load() ?? [] : []
    for i in list.remotes.indices {
      let binding = bindings.first { $0.matches(list.remotes[i]) }
      list.remotes[i].lendsCredentials = binding != nil
      list.remotes[i].authEnvironment = binding?.authEnvironment
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
  private func rewriteRemoteList(_ change: (inout RemoteList) throws(TroveError) -> Void)
    throws(TroveError)
  {
    _ = try? rootDirectory.lock()
    defer { rootDirectory.unlock() }
    var list = try readRemoteList(lending: false)
    try change(&list)
    try replaceRootFile(RemoteList.fileName, with: list.encoded())
  }
}
