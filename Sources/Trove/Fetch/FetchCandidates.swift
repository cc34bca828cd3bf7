/// The URLs one fetch may ask, in order, and what their failures add up
/// to: the key's own URL, then its mirrors, each replaced by what the
/// store's rewrite rules make of it.
extension Fetcher {
  /// One URL to ask for the body, with what may go with it.
  struct Candidate: Equatable {
    /// Without a login.
    var url: String
    /// `user:password` for this URL's origin: its own login, else the
    /// key's when it has the key's origin.
    var login: String?
    /// The user's header lines, when it has the key's origin.
    var headers: [String]
    /// Whether `~/.netrc` may give its origin a login.
    var usesNetrc = true
    /// The URL's origin, parsed once.
    var origin: HTTPOrigin?

    /// The URLs to ask for `asked` (the key's URL and its mirrors, each
    /// without its login and with it apart): every rule of `rewrites` that
    /// matches a URL gives one in its place, in the rules' order; a URL no
    /// rule matches is asked as it is; none is asked twice. A login or the
    /// user's headers go only to the origin they were given for: a
    /// rewritten URL on another host gets none (`~/.netrc` may have its
    /// own). Without `ownRewrites` (the rules come from a `config.json`
    /// others could have put there), a rewritten URL gets no credential at
    /// all, `~/.netrc`'s neither: whoever chose the rule would choose where
    /// the user's credential goes, and what it fetches into the store.
    /// Without `netrc`, no URL gets `~/.netrc`'s login. O(URLs × rules).
    static func list(
      _ asked: [(url: String, login: String?)], key: String, keyLogin: String?,
      keyHeaders: [String], rewrites: [URLRewrite], ownRewrites: Bool = true, netrc: Bool = true
    ) -> [Candidate] {
      let keyOrigin = HTTPOrigin(key)
      var listed: [Candidate] = []
      for (given, login) in asked {
        let rewritten = rewrites.compactMap { $0.apply(to: given) }
        for url in rewritten.isEmpty ? [given] : rewritten
        where !listed.contains(where: { $0.url == url }) {
          // Most lists are the key alone: its origin is parsed once.
          let origin = url == key ? keyOrigin : HTTPOrigin(url)
          let isKeyOrigin = origin != nil && origin == keyOrigin
          let givenOrigin = given == url ? origin : HTTPOrigin(given)
          let own = origin != nil && origin == givenOrigin ? login : nil
          guard ownRewrites || url == given else {
            listed.append(
              Candidate(url: url, login: nil, headers: [], usesNetrc: false, origin: origin))
            continue
          }
          listed.append(
            Candidate(
              url: url, login: own ?? (isKeyOrigin ? keyLogin : nil),
              headers: isKeyOrigin ? keyHeaders : [], usesNetrc: netrc, origin: origin))
        }
      }
      return listed
    }
  }

  /// Whether the next URL is asked after `error`: the URL could not be
  /// reached or used (libcurl found it malformed, too), said it has no
  /// such file, failed for now, or sent bytes that were refused. A failure
  /// of the store's own (no space, a write error, a cancelled task) would
  /// fail with any URL.
  static func movesOn(_ error: TroveError) -> Bool {
    [.notFound, .unavailable, .transferFailed, .checksumMismatch, .tooLarge, .invalidArgument]
      .contains(error.code)
  }

  /// The error of a fetch of `url` whose URLs all failed, each with one of
  /// `failures` (in order; at least one): that one alone, or one naming
  /// each, whose code says what trying again could do: `.transferFailed`
  /// when one may pass, else a refused body's, else `.notFound` when
  /// every URL said so, else `.unavailable`.
  static func failure(_ url: String, _ failures: [TroveError]) -> TroveError {
    if failures.count == 1 { return failures[0] }
    let codes = failures.map(\.code)
    let code: TroveError.Code =
      if codes.contains(.transferFailed) {
        .transferFailed
      } else if codes.contains(.checksumMismatch) {
        .checksumMismatch
      } else if codes.contains(.tooLarge) {
        .tooLarge
      } else if codes.allSatisfy({ $0 == .notFound }) {
        .notFound
      } else {
        .unavailable
      }
    return TroveError(
      code,
      "cannot fetch '\(url)' from any of its \(failures.count) URLs: "
        + failures.map(\.message).joined(separator: "; "), value: url)
  }
}
