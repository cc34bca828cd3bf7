/// This build of Trove: what `trove --version` prints and every HTTP
/// request it makes says it is.
public enum TroveVersion {
  /// The version, `MAJOR.MINOR.PATCH`.
  public static let current = "0.1.0"
  /// The `User-Agent` of Trove's HTTP requests: `trove/` and the version.
  public static let userAgent = "trove/" + current
}
