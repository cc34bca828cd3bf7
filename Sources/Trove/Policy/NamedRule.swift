/// An entry of a setting made of named entries, each set on its own
/// (`trove config set KEY.NAME VALUE`): the rewrite rules (``URLRewrite``)
/// and the mirrors `trove serve` serves (``MirrorRule``). `config.json`
/// holds such a setting as an object, `{"NAME": "VALUE", …}`; its
/// environment variable as `NAME=VALUE` entries separated by spaces.
public protocol NamedRule: Sendable, Hashable {
  /// The setting the entries make up.
  static var setting: CachePolicy.Key { get }
  /// Where a policy keeps them, in name order.
  static var inPolicy: WritableKeyPath<CachePolicy, [Self]> { get }
  /// The entry's name, the `NAME` of `KEY.NAME`.
  var name: String { get }
  /// Its value as `config set KEY.NAME` takes it.
  var rule: String { get }
  /// Reads the entry `name` from its value.
  ///
  /// - Throws: `.invalidArgument` naming the entry (`KEY.NAME`), the value
  ///   and what is wrong.
  init(name: String, rule: String) throws(TroveError)
}

extension NamedRule {
  /// The entries in the text the setting takes as a whole (its environment
  /// variable): `none`, or `NAME=VALUE` entries separated by spaces. Sorted
  /// by name. O(n log n).
  static func parseList(_ text: String) throws(TroveError) -> [Self] {
    if text.lowercased() == "none" { return [] }
    let key = setting.rawValue
    var rules: [String: Self] = [:]
    for entry in text.split(whereSeparator: { $0 == " " || $0 == "\n" || $0 == "\t" }) {
      guard let equals = entry.firstIndex(of: "=") else {
        throw TroveError(
          .invalidArgument, "invalid \(key) entry '\(entry)': expected NAME=\(valueForm)",
          value: String(entry))
      }
      let name = String(entry[..<equals])
      let rule = try Self(name: name, rule: String(entry[entry.index(after: equals)...]))
      guard rules[name] == nil else {
        throw TroveError(
          .invalidArgument, "invalid \(key) list: '\(name)' is given twice", value: name)
      }
      rules[name] = rule
    }
    return rules.values.sorted { $0.name < $1.name }
  }

  /// `rules` as ``parseList(_:)`` reads them; `none` when there are none.
  static func listText(_ rules: [Self]) -> String {
    rules.isEmpty ? "none" : rules.map { $0.name + "=" + $0.rule }.joined(separator: " ")
  }

  /// The entries of the setting's object in `config.json`, in name order.
  /// - Throws: `.invalidArgument` naming the first entry that is not one.
  static func read(_ object: [String: JSONValue]) throws(TroveError) -> [Self] {
    var rules: [Self] = []
    for (name, value) in object.sorted(by: { $0.key < $1.key }) {
      guard case .string(let text) = value else {
        throw TroveError(
          .invalidArgument,
          "invalid \(setting.rawValue).\(name) \(value.text): expected a string",
          value: value.text)
      }
      rules.append(try Self(name: name, rule: text))
    }
    return rules
  }

  /// The entries of the setting's value in `config.json` that can be used,
  /// when the value as a whole cannot: what setting or removing one entry
  /// keeps.
  static func usable(_ value: JSONValue?) -> [Self] {
    guard case .object(let object)? = value else { return [] }
    return object.sorted { $0.key < $1.key }.compactMap { entry -> Self? in
      guard case .string(let text) = entry.value else { return nil }
      return try? Self(name: entry.key, rule: text)
    }
  }

  /// The setting's value as `config.json` holds it: `{"NAME": "VALUE", …}`,
  /// or `null` for none.
  static func json(_ rules: [Self]) -> JSONValue {
    rules.isEmpty
      ? .null : .object(Dictionary(uniqueKeysWithValues: rules.map { ($0.name, .string($0.rule)) }))
  }

  /// How one entry's value is written, for error messages.
  private static var valueForm: String {
    setting == .rewrite ? "PREFIX=REPLACEMENT" : "UPSTREAM"
  }
}
