import Foundation
import Trove

/// Exit statuses, from sysexits.h where one fits.
enum ExitStatus {
  static let success: Int32 = 0
  static let failure: Int32 = 1
  static let usage: Int32 = 64  // EX_USAGE
  static let dataError: Int32 = 65  // EX_DATAERR
  static let noInput: Int32 = 66  // EX_NOINPUT
  static let unavailable: Int32 = 69  // EX_UNAVAILABLE
  static let cannotCreate: Int32 = 73  // EX_CANTCREAT
  static let ioError: Int32 = 74  // EX_IOERR
  static let tryAgain: Int32 = 75  // EX_TEMPFAIL
  static let permission: Int32 = 77  // EX_NOPERM
  /// Standard output closed under us (`trove get D - | head`): the status
  /// of a process SIGPIPE ended, as shells report it.
  static let brokenPipe: Int32 = 141
  static let config: Int32 = 78  // EX_CONFIG

  /// The status for a library error.
  static func of(_ error: TroveError) -> Int32 {
    switch error.code {
    case .invalidDigest, .invalidArgument: return usage
    case .notFound, .untrusted: return failure
    case .sourceMissing, .sourceNotFile, .storeMissing: return noInput
    case .destinationExists, .destinationDirectoryMissing: return cannotCreate
    case .permissionDenied, .readOnlyStore: return permission
    case .cloneUnsupported, .linkUnsupported, .storedCompressed: return unavailable
    case .corruptObject, .unsupportedFormat, .checksumMismatch, .indexDamaged: return dataError
    case .unavailable: return unavailable
    case .tooLarge: return dataError
    case .invalidConfig: return config
    case .busy, .lowOnSpace, .transferFailed: return tryAgain
    case .storeUnavailable:
      switch error.errno {
      case EACCES?, EPERM?, EROFS?: return permission
      default: return cannotCreate
      }
    default: return ioError
    }
  }
}
