import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// A private signing key as `trove keygen` writes it: a short text file,
/// owner-only (0600), that names the key and holds its Ed25519 seed.
///
/// ```
/// trove-signing-key 1
/// name ci
/// public ed25519:BASE64
/// private ed25519:BASE64
/// ```
///
/// A store's configuration holds the file's path, never the key: the file
/// is read when a push signs, and refused unless this user owns it and no
/// one else may read or write it.
public struct SigningKey: Sendable {
  /// The name given at `keygen`: shown beside signatures, never trusted.
  public let name: String
  /// The key readers trust (`remote add --trust`).
  public var publicKey: PublicSigningKey { key.publicKey }
  let key: Ed25519.PrivateKey

  /// The first line of the file.
  static let header = "trove-signing-key 1"
  /// The longest file read.
  static let sizeLimit = 4096

  /// Makes a new key named `name` and writes it to `path` (0600, never
  /// replacing a file), synced.
  ///
  /// - Throws: `.invalidArgument` for a name that is not 1 to 64 letters,
  ///   digits, `.`, `_` or `-`; `.destinationExists` when `path` exists;
  ///   `.ioError` or `.permissionDenied` when it cannot be written (nothing
  ///   is left behind).
  public static func generate(name: String, writingTo path: String) throws(TroveError)
    -> SigningKey
  {
    try checkName(name)
    guard let key = Ed25519.PrivateKey.generate() else {
      throw TroveError(.ioError, "OpenSSL could not generate an Ed25519 key", value: name)
    }
    let signing = SigningKey(name: name, key: key)
    let file: FileDescriptor
    do throws(SystemCallError) {
      file = try FileDescriptor.open(
        path, [.writeOnly, .create, .exclusive, .noFollow], permissions: 0o600)
    } catch  where error.errno == Errno(rawValue: EEXIST) {
      throw TroveError(
        .destinationExists, "'\(path)' exists: a signing key is never overwritten", path: path)
    } catch {
      throw TroveError.system(error, "create", path: path)
    }
    do throws(SystemCallError) {
      defer { file.close() }
      try file.writeAll(Array(signing.fileText.utf8))
      try file.sync()
    } catch {
      try? FileDescriptor(rawValue: AT_FDCWD).removeFile(path)
      throw TroveError.system(error, "write", path: path)
    }
    return signing
  }

  /// Reads the key file at `path`.
  ///
  /// - Throws: `.invalidConfig` naming the file: missing, not a regular
  ///   file, owned by another user, readable or writable by others
  ///   (`chmod 600` it), or not a key file.
  public static func load(_ path: String) throws(TroveError) -> SigningKey {
    func bad(_ why: String) -> TroveError {
      TroveError(.invalidConfig, "signing key '\(path)' \(why)", path: path)
    }
    let status: FileStatus
    let bytes: [UInt8]
    do throws(SystemCallError) {
      // Never blocked on a FIFO put in the key's place.
      let file = try FileDescriptor.open(path, [.readOnly, .noFollow, .nonBlocking])
      defer { file.close() }
      status = try file.status()
      bytes = status.isRegular ? try file.readAll(limit: sizeLimit + 1) : []
    } catch {
      throw TroveError.system(error, "read signing key", path: path, code: .invalidConfig)
    }
    guard status.isRegular else { throw bad("is not a regular file") }
    guard status.owner == Sys.realUserID else {
      throw bad("belongs to user \(status.owner), not to this user (\(Sys.realUserID))")
    }
    guard status.mode & 0o077 == 0 else {
      throw bad(
        "may be read or written by others (mode \(String(status.mode & 0o777, radix: 8))): chmod 600 it"
      )
    }
    guard bytes.count <= sizeLimit else { throw bad("is not a Trove signing key (too long)") }
    let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map(String.init)
    var fields: [String: String] = [:]
    for line in lines.dropFirst() {
      guard let space = line.firstIndex(of: " ") else { continue }
      fields[String(line[..<space])] = String(line[line.index(after: space)...])
    }
    guard lines.first == header, let name = fields["name"], let privateText = fields["private"],
      privateText.hasPrefix("ed25519:"),
      let seed = Data(base64Encoded: String(privateText.dropFirst("ed25519:".count))),
      let key = Ed25519.PrivateKey(seed: Array(seed))
    else { throw bad("is not a Trove signing key (as 'trove keygen' writes)") }
    guard (try? checkName(name)) != nil else {
      throw bad("names its key '\(name)', not a key name")
    }
    if let publicText = fields["public"], publicText != key.publicKey.description {
      throw bad("holds a public key that is not its private key's")
    }
    return SigningKey(name: name, key: key)
  }

  /// Throws unless `name` can name a key.
  static func checkName(_ name: String) throws(TroveError) {
    let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
    guard (1...64).contains(name.count), name.allSatisfy(allowed.contains) else {
      throw TroveError(
        .invalidArgument,
        "invalid key name '\(name)': expected 1 to 64 letters, digits, '.', '_' or '-'",
        value: name)
    }
  }

  private var fileText: String {
    let seed = "ed25519:" + Data(key.seed).base64EncodedString()
    return "\(Self.header)\nname \(name)\npublic \(publicKey)\nprivate \(seed)\n"
  }

  /// `text`'s signature, as a remote entry carries it.
  func signature(of text: SignedText) -> RemoteSignature {
    RemoteSignature(
      key: publicKey, name: name, signature: Data(key.sign(text.bytes)).base64EncodedString())
  }
}
