/// An optional property that JSON always shows: `null` when absent.
///
/// Swift's synthesized `Encodable` leaves a nil optional out (it calls
/// `encodeIfPresent`); Trove's JSON — every `--json` output of the CLI,
/// `remotes.json` — promises every key, with `null` for an absent value.
/// Wrap each optional property of a type encoded for it:
/// `@Nullable public var etag: String?`. Decoding takes a missing key, as
/// `null`, for nil.
@propertyWrapper
public struct Nullable<Value> {
  public var wrappedValue: Value?

  /// Wraps `wrappedValue`; a memberwise initializer of a type with a
  /// `@Nullable` property takes a `Value?` for it.
  public init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }
}

extension Nullable: Encodable where Value: Encodable {
  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    if let wrappedValue {
      try container.encode(wrappedValue)
    } else {
      try container.encodeNil()
    }
  }
}

extension Nullable: Decodable where Value: Decodable {
  public init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    wrappedValue = container.decodeNil() ? nil : try container.decode(Value.self)
  }
}

extension Nullable: Sendable where Value: Sendable {}
extension Nullable: Equatable where Value: Equatable {}
extension Nullable: Hashable where Value: Hashable {}

extension KeyedDecodingContainer {
  /// A ``Nullable`` property's value: nil when the key is missing, as for
  /// a plain optional (synthesized decoding calls this).
  public func decode<Value: Decodable>(
    _ type: Nullable<Value>.Type, forKey key: Key
  ) throws -> Nullable<Value> {
    Nullable(wrappedValue: try decodeIfPresent(Value.self, forKey: key))
  }
}
