import Foundation

/// One remote this user lends their credentials to: the value of an
/// environment variable, `~/.netrc`'s login for its host, or the AWS
/// credentials, as its kind takes them. Kept in this user's own
/// ``CredentialBindings`` file, never in a store: whoever can write a
/// store's `remotes.json` (any member of a group store, or whoever made a
/// cache folder restored from elsewhere) chooses its URLs, never where this
/// user's secrets go.
public struct CredentialBinding: Sendable, Hashable, Codable {
  /// The remote's URL, as the store's `remotes.json` names it.
  public var url: String
  /// S3: the endpoint the remote names (``RemoteSpec/endpointURL``); nil
  /// when it names none (the AWS configuration's, which is this user's).
  @Nullable public var endpoint: String?
  /// The environment variable holding the credential (`user:password`, a
  /// bearer token over HTTP, a password over Redis); nil for the ones the
  /// remote's kind finds itself (`~/.netrc`, the AWS credentials).
  @Nullable public var authEnvironment: String?

  /// A binding of `spec`'s URL and endpoint to `authEnvironment`.
  public init(for spec: RemoteSpec, authEnvironment: String? = nil) {
    url = Self.normalized(spec.url)
    endpoint = spec.endpointURL.map(Self.normalized)
    self.authEnvironment = authEnvironment
  }

  enum CodingKeys: String, CodingKey {
    case url, endpoint
    case authEnvironment = "auth-env"
  }

  /// Whether it lends credentials to `spec`: the same URL and endpoint
  /// (a trailing `/` aside), whatever the remote is called.
  func matches(_ spec: RemoteSpec) -> Bool {
    url == Self.normalized(spec.url) && endpoint == spec.endpointURL.map(Self.normalized)
  }

  private static func normalized(_ url: String) -> String {
    var url = url
    while url.hasSuffix("/") { url.removeLast() }
    return url
  }
}

/// The file of this user's ``CredentialBinding``s:
/// `credentials.json` in `$XDG_CONFIG_HOME/trove` (an absolute
/// `XDG_CONFIG_HOME`), else in `$HOME/.config/trove`.
///
/// Only a file this user owns, in a folder this user owns, that no one
/// else may write, is read, as `ssh` reads its configuration: anyone who
/// could rename another file over it could send this user's secrets where
/// they like. It is written whole, atomically, mode 0600, under a lock on
/// its folder, so that two `remote add`s at once lose neither binding.
public struct CredentialBindings: Sendable, Hashable {
  /// The folder the file is in.
  public var folder: String
  /// The file's path.
  public var path: String { folder + "/" + Self.fileName }

  static let fileName = "credentials.json"
  /// The format this build writes and the newest it reads.
  static let currentFormat = 1

  /// The bindings in `folder`.
  public init(folder: String) { self.folder = folder }

  /// The bindings of this user as `environment` places them; nil when
  /// neither `XDG_CONFIG_HOME` (absolute) nor `HOME` is set.
  public static func standard(
    environment: [String: String] = EnvironmentVariables.named(["XDG_CONFIG_HOME", "HOME"])
  ) -> CredentialBindings? {
    if let config = environment["XDG_CONFIG_HOME"], config.hasPrefix("/") {
      return CredentialBindings(folder: StoreConfiguration.joined(config, "trove"))
    }
    if let home = environment["HOME"], !home.isEmpty {
      return CredentialBindings(folder: StoreConfiguration.joined(home, ".config/trove"))
    }
    return nil
  }

  private struct File: Codable {
    var format: Int
    var bindings: [CredentialBinding]
  }

  /// The bindings; none when the file (or its folder) does not exist.
  ///
  /// - Throws: `.invalidConfig` naming the file or folder when another
  ///   user owns it or may write it, it is not a regular file, or it is not
  ///   a bindings file; `.unsupportedFormat` for a newer format.
  public func load() throws(TroveError) -> [CredentialBinding] {
    guard let folderFD = try openFolder(creating: false) else { return [] }
    defer { folderFD.close() }
    return try read(in: folderFD)
  }

  /// Reads the file in the open folder `folderFD`.
  private func read(in folderFD: FileDescriptor) throws(TroveError) -> [CredentialBinding] {
    let path = path
    let found = try attempt("read", path) { () throws(SystemCallError) -> ([UInt8], FileStatus)? in
      let fd: FileDescriptor
      do throws(SystemCallError) {
        fd = try FileDescriptor.openRegularFile(Self.fileName, in: folderFD)
      } catch  where error.errno == .noSuchFileOrDirectory {
        return nil
      }
      defer { fd.close() }
      return (try fd.readAll(limit: (1 << 20) + 1), try fd.status())
    }
    guard let (bytes, status) = found else { return [] }
    guard bytes.count <= 1 << 20 else {
      throw TroveError(
        .invalidConfig, "'\(path)' is larger than 1 MiB: not a credentials file trove wrote",
        path: path)
    }
    if let refusal = Self.refusal(status) {
      throw TroveError(
        .invalidConfig,
        "'\(path)' \(refusal): no credential is lent to any remote until it is this user's alone (chmod go-w, or remove it and log in again)",
        path: path)
    }
    guard let file = try? JSONDecoder().decode(File.self, from: Data(bytes)) else {
      throw TroveError(
        .invalidConfig,
        "'\(path)' is not a credentials file (expected {\"format\": 1, \"bindings\": [...]}); fix or remove it",
        path: path)
    }
    guard file.format <= Self.currentFormat else {
      throw TroveError(
        .unsupportedFormat,
        "'\(path)' has format \(file.format); this trove reads format \(Self.currentFormat)",
        path: path)
    }
    for binding in file.bindings {
      if let variable = binding.authEnvironment, !RemoteSpec.isVariableName(variable) {
        throw TroveError(
          .invalidConfig, "'\(path)': '\(variable)' is not an environment variable's name",
          path: path)
      }
    }
    return file.bindings
  }

  /// Reads the bindings under the folder's lock, applies `change`, and
  /// replaces the file (mode 0600) when the bindings changed; makes the
  /// folder (mode 0700) when missing.
  ///
  /// - Throws: what ``load()`` throws, or `.ioError`/`.permissionDenied`
  ///   naming the path that could not be made or written.
  public func update(_ change: (inout [CredentialBinding]) -> Void) throws(TroveError) {
    guard let folderFD = try openFolder(creating: true) else { return }
    defer { folderFD.close() }
    // Two writers at once would each drop the other's binding.
    try attempt("lock", folder) { () throws(SystemCallError) in _ = try folderFD.lock() }
    defer { folderFD.unlock() }
    let before = try read(in: folderFD)
    var bindings = before
    change(&bindings)
    guard bindings != before else { return }
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
    let bytes =
      Array(
        (try? encoder.encode(File(format: Self.currentFormat, bindings: bindings))) ?? Data())
      + [0x0A]
    let temp = ".\(Self.fileName).\(StoreLayout.temporaryName("tmp"))"
    try attempt("write", path) { () throws(SystemCallError) in
      let fd = try FileDescriptor.open(
        temp, in: folderFD, [.writeOnly, .create, .exclusive, .noFollow], permissions: 0o600)
      defer { fd.close() }
      do throws(SystemCallError) {
        try fd.setPermissions(0o600)
        try fd.writeAll(bytes)
        try fd.sync()
        try folderFD.rename(temp, to: Self.fileName, in: folderFD)
        try folderFD.sync()
      } catch {
        try? folderFD.removeFile(temp)
        throw error
      }
    }
  }

  /// The folder, open; nil when it does not exist and `creating` is
  /// false. Made (each missing folder 0700) when `creating`.
  ///
  /// - Throws: `.invalidConfig` when another user owns it or may write
  ///   it; the failed call naming the path otherwise.
  private func openFolder(creating: Bool) throws(TroveError) -> FileDescriptor? {
    let folder = folder
    let opened = try attempt("open", folder) { () throws(SystemCallError) -> FileDescriptor? in
      do throws(SystemCallError) {
        return try FileDescriptor.open(folder, [.directory])
      } catch  where error.errno == .noSuchFileOrDirectory && !creating {
        return nil
      } catch  where error.errno == .noSuchFileOrDirectory {
        // Folders on the way may be traversable only (0711): opened as paths.
        var current = try FileDescriptor.open(
          folder.hasPrefix("/") ? "/" : ".", [.directory, .pathOnly])
        let parts = folder.split(separator: "/").map(String.init)
        for (i, part) in parts.enumerated() {
          let next: FileDescriptor
          do throws(SystemCallError) {
            do throws(SystemCallError) {
              try current.makeDirectory(part, permissions: 0o700)
            } catch  where error.errno == .fileExists {}
            next = try FileDescriptor.open(
              part, in: current, i == parts.count - 1 ? [.directory] : [.directory, .pathOnly])
          } catch {
            current.close()
            throw error
          }
          current.close()
          current = next
        }
        return current
      }
    }
    guard let opened else { return nil }
    let status: FileStatus
    do throws(TroveError) {
      status = try attempt("inspect", folder) { () throws(SystemCallError) in try opened.status() }
    } catch {
      opened.close()
      throw error
    }
    if let refusal = Self.refusal(status) {
      opened.close()
      throw TroveError(
        .invalidConfig,
        "'\(folder)' \(refusal): no credential is lent to any remote from a folder others can change (chmod go-w)",
        path: folder)
    }
    return opened
  }

  /// Why a file or folder of bindings is not this user's alone: another
  /// user owns it, or others may write it. Nil when it is theirs.
  static func refusal(_ status: FileStatus) -> String? {
    if status.owner != Sys.effectiveUserID {
      return "is owned by uid \(status.owner), not by this user (uid \(Sys.effectiveUserID))"
    }
    let mode = status.mode & 0o7777
    if mode & 0o022 != 0 {
      return "is writable by users other than its owner (mode \(String(mode, radix: 8)))"
    }
    return nil
  }
}
