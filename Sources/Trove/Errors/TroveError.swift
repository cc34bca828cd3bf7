/// An error from Trove: what went wrong, on which path or value, and the
/// system call that failed with its errno.
///
/// `description` is one line, fit for a command-line tool:
/// `cannot read '/tmp/x': Permission denied (open, errno 13)`. ``message``
/// holds the values as given; `description` escapes their control
/// characters. The message says what failed and why; what would fix it is
/// ``remedy``, for the program to put in its own words.
public struct TroveError: Error, Sendable, CustomStringConvertible, Equatable {
  /// What kind of failure this is; stable for programs to switch on.
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// A short stable name, e.g. `"not-found"`.
    public let rawValue: String
    /// Wraps a code name.
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The text is not a digest.
    public static let invalidDigest = Code(rawValue: "invalid-digest")
    /// An argument or setting is out of range or malformed.
    public static let invalidArgument = Code(rawValue: "invalid-argument")
    /// The store holds no object with this digest.
    public static let notFound = Code(rawValue: "not-found")
    /// A remote's record or object is not signed by a key the store
    /// trusts for that remote: read as a miss, never used.
    public static let untrusted = Code(rawValue: "untrusted")
    /// The input file does not exist.
    public static let sourceMissing = Code(rawValue: "source-missing")
    /// The input is not a regular file (a directory, a device).
    public static let sourceNotFile = Code(rawValue: "source-not-file")
    /// The destination exists and replacing was not asked for.
    public static let destinationExists = Code(rawValue: "destination-exists")
    /// The destination's folder does not exist.
    public static let destinationDirectoryMissing = Code(rawValue: "destination-folder-missing")
    /// The operating system refused access.
    public static let permissionDenied = Code(rawValue: "permission-denied")
    /// The filesystem or quota is full.
    public static let noSpace = Code(rawValue: "no-space")
    /// A clone was required and is impossible between these filesystems.
    public static let cloneUnsupported = Code(rawValue: "clone-unsupported")
    /// A hard link was required and is impossible (another filesystem).
    public static let linkUnsupported = Code(rawValue: "link-unsupported")
    /// A stored object's bytes do not match its digest.
    public static let corruptObject = Code(rawValue: "corrupt-object")
    /// The store cannot be opened or created.
    public static let storeUnavailable = Code(rawValue: "store-unavailable")
    /// There is no store at the path, and it was opened without creating
    /// one (``StoreConfiguration/createIfMissing`` false).
    public static let storeMissing = Code(rawValue: "store-missing")
    /// The store was written by a newer Trove.
    public static let unsupportedFormat = Code(rawValue: "unsupported-format")
    /// The index database failed.
    public static let indexFailure = Code(rawValue: "index-failure")
    /// The index database is damaged (not a database, a damaged page, a
    /// symbolic link). Opening the store sets a damaged index aside and
    /// rebuilds it; a verify with repair (`verify(repair: true)`) does for
    /// damage found later.
    public static let indexDamaged = Code(rawValue: "index-damaged")
    /// Reading or writing failed.
    public static let ioError = Code(rawValue: "io-error")
    /// Another process is sweeping the store.
    public static let busy = Code(rawValue: "busy")
    /// The object is stored compressed: there is no file to clone, link
    /// or read in place.
    public static let storedCompressed = Code(rawValue: "stored-compressed")
    /// An opportunistic put was skipped: the volume is low on free space.
    public static let lowOnSpace = Code(rawValue: "low-on-space")
    /// Bytes do not match what their publisher said (`--expect`,
    /// `--expect-size`): nothing was stored.
    public static let checksumMismatch = Code(rawValue: "checksum-mismatch")
    /// An input is larger than the store's `max-object-size` allows:
    /// nothing was stored.
    public static let tooLarge = Code(rawValue: "too-large")
    /// The store's `config.json` holds a setting that cannot be used (or is
    /// not readable): what depends on the policy is refused until it is
    /// repaired (`trove config set`, `trove config reset`).
    public static let invalidConfig = Code(rawValue: "invalid-config")
    /// A download failed in a way that may pass (a dropped connection, a
    /// stall, a body cut short, HTTP 408, 429 or 5xx), after its retries.
    public static let transferFailed = Code(rawValue: "transfer-failed")
    /// A server cannot be used (no such host, connection refused, a TLS
    /// failure, too many redirects, an HTTP status that is not a miss).
    public static let unavailable = Code(rawValue: "unavailable")
    /// The task that asked for the work was cancelled before it was done
    /// (the `async` calls): nothing was stored or written.
    public static let cancelled = Code(rawValue: "cancelled")
    /// The store is read-only (its volume is mounted read-only, or its
    /// folder or index is not writable by this user): what must write to
    /// it is refused; reads work.
    public static let readOnlyStore = Code(rawValue: "read-only-store")
    /// Internal: an index transaction must be committed durably; it is run
    /// again so. Never reaches a caller.
    static let retryDurably = Code(rawValue: "retry-durably")
  }

  /// What kind of failure this is.
  public let code: Code
  /// The one-line message, without the system call part.
  public let message: String
  /// The path involved, if any.
  public let path: String?
  /// The value involved (a digest text, a setting), if any.
  public let value: String?
  /// The system call that failed and its errno, if one did.
  let cause: SystemCallError?
  /// What would fix it, when something other than trying again would.
  public let remedy: Remedy?

  /// The `errno` of the system call that failed, when one did (`EACCES`,
  /// `ENOSPC`, `EPIPE`, …).
  public var errno: Int32? { cause?.errno.rawValue }

  /// The system call that failed, when one did (`open`, `FICLONE`, …).
  public var failedCall: String? { cause?.call }

  /// Makes an error (for code that reports its own failures in Trove's
  /// terms, as the `trove` command does).
  public init(
    _ code: Code, _ message: String, path: String? = nil, value: String? = nil,
    remedy: Remedy? = nil
  ) {
    self.init(code, message, path: path, value: value, cause: nil, remedy: remedy)
  }

  /// Makes an error a system call's failure caused.
  init(
    _ code: Code, _ message: String, path: String? = nil, value: String? = nil,
    cause: SystemCallError?, remedy: Remedy? = nil
  ) {
    self.code = code
    self.message = message
    self.path = path
    self.value = value
    self.cause = cause
    self.remedy = remedy
  }

  /// One line: the message, then the failing call and errno when known,
  /// with control characters escaped (``MessageText/escaped(_:)``), so a
  /// value echoed in it never splits the line or reaches a terminal raw.
  public var description: String {
    guard let cause else { return MessageText.escaped(message) }
    return MessageText.escaped(
      "\(message): \(cause.errno) (\(cause.call), errno \(cause.errno.rawValue))")
  }

  /// An error for a failed system call on `path`, with the code chosen from
  /// the errno (ENOSPC → `.noSpace`, EACCES → `.permissionDenied`, …)
  /// unless `code` is given.
  static func system(
    _ error: SystemCallError, _ action: String, path: String, code: Code? = nil
  ) -> TroveError {
    let chosen: Code
    if let code {
      chosen = code
    } else {
      switch error.errno {
      case .noSpace, .diskQuotaExceeded: chosen = .noSpace
      case .permissionDenied, .notPermitted, .readOnlyFileSystem: chosen = .permissionDenied
      default: chosen = .ioError
      }
    }
    if error.errno == .noKey {
      // fscrypt: the folder is encrypted and its key is not loaded.
      return TroveError(
        code ?? .storeUnavailable,
        "cannot \(action) '\(path)': the store is on a locked encrypted directory (unlock it, e.g. 'fscrypt unlock')",
        path: path, cause: error)
    }
    if error.errno == .notARegularFile && error.call == "open" {
      // A FIFO, socket or device planted under a store file's name.
      return TroveError(
        code ?? .ioError,
        "cannot \(action) '\(path)': it is not a regular file (a FIFO, a socket or a device); remove it",
        path: path)
    }
    return TroveError(chosen, "cannot \(action) '\(path)'", path: path, cause: error)
  }
}

/// Runs a mechanism step, turning its ``SystemCallError`` into a
/// ``TroveError`` that says what was being done to which path.
@inline(__always)
func attempt<T>(
  _ action: String, _ path: String, code: TroveError.Code? = nil,
  _ body: () throws(SystemCallError) -> T
) throws(TroveError) -> T {
  do throws(SystemCallError) {
    return try body()
  } catch {
    throw TroveError.system(error, action, path: path, code: code)
  }
}
