/// A named rule that sends fetches of one URL prefix somewhere else
/// (`trove config set rewrite.NAME 'PREFIX=REPLACEMENT'`), as Bazel's
/// `--downloader_config` rewrites do: a team points every fetch of a public
/// host at its own mirror or at `trove serve` without editing any list.
///
/// A rule applies to every URL a fetch would ask (the URL and its mirrors)
/// that starts with ``prefix``: the URL with that prefix replaced by
/// ``replacement`` is asked instead. Every rule that matches gives one URL,
/// in the order of the rules' names; a URL no rule matches is asked as it
/// is. The URL a rule replaced is not asked (Bazel's rewritten list replaces
/// the original too): a rule whose replacement is its own prefix keeps it
/// in the list, after the rules named before it.
public struct URLRewrite: NamedRule {
  public static var setting: CachePolicy.Key { .rewrite }
  public static var inPolicy: WritableKeyPath<CachePolicy, [URLRewrite]> { \.rewrites }

  /// The rule's name: letters, digits, `-` and `_`.
  public var name: String
  /// What a URL starts with for the rule to apply: an http:// or https://
  /// URL's beginning.
  public var prefix: String
  /// What replaces ``prefix``: an http:// or https:// URL's beginning.
  public var replacement: String

  /// Reads the rule `NAME` from its text `PREFIX=REPLACEMENT` (split at the
  /// first `=`).
  ///
  /// - Throws: `.invalidArgument` naming the rule (`rewrite.NAME`), its text
  ///   and what is wrong: a name that is not letters, digits, `-` and `_`;
  ///   no `=`; an empty prefix; a prefix or replacement that does not start
  ///   with `http://` or `https://`, that holds a login (`user:pw@`: the
  ///   file is no place for a credential, `~/.netrc` is), a space or a
  ///   control character.
  public init(name: String, rule text: String) throws(TroveError) {
    func refuse(_ why: String) -> TroveError {
      TroveError(
        .invalidArgument, "invalid rewrite.\(name) '\(text)': \(why)", value: text)
    }
    guard Self.isName(name) else {
      throw TroveError(
        .invalidArgument,
        "invalid rewrite rule name '\(name)': expected letters, digits, '-' and '_'", value: name)
    }
    guard let equals = text.firstIndex(of: "=") else {
      throw refuse("expected PREFIX=REPLACEMENT, with an '='")
    }
    let prefix = String(text[..<equals])
    let replacement = String(text[text.index(after: equals)...])
    guard !prefix.isEmpty else { throw refuse("its prefix (before the '=') is empty") }
    for (part, value) in [("prefix", prefix), ("replacement", replacement)] {
      let scheme = value.prefix { $0 != ":" }.lowercased()
      guard scheme == "http" || scheme == "https", value.contains("://") else {
        throw refuse("its \(part) '\(value)' does not start with http:// or https://")
      }
      guard !value.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value == 0x7F }) else {
        throw refuse("its \(part) holds a space or a control character")
      }
      // The authority is all of it when the prefix stops inside it.
      if URLUserinfo.range(in: value) != nil {
        throw TroveError(
          .invalidArgument,
          "invalid rewrite.\(name): its \(part) holds a login ('user:password@'), which config.json must not keep; put it in ~/.netrc",
          value: name)
      }
    }
    self.name = name
    self.prefix = prefix
    self.replacement = replacement
  }

  /// `PREFIX=REPLACEMENT`, as `trove config set rewrite.NAME` takes it.
  public var rule: String { prefix + "=" + replacement }

  /// Whether `name` may name a rule: letters, digits, `-` and `_`, at
  /// most 64 of them.
  static func isName(_ name: String) -> Bool {
    !name.isEmpty && name.utf8.count <= 64
      && name.unicodeScalars.allSatisfy {
        ("0"..."9").contains($0) || ("a"..."z").contains($0) || ("A"..."Z").contains($0)
          || $0 == "-" || $0 == "_"
      }
  }

  /// `url` with this rule applied, or nil when it does not start with the
  /// prefix.
  func apply(to url: String) -> String? {
    guard url.hasPrefix(prefix) else { return nil }
    return replacement + url.dropFirst(prefix.count)
  }
}
