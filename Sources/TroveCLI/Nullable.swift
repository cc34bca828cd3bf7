/// An optional JSON field that is always present: `null` when absent.
///
/// Swift's synthesized `Encodable` leaves a nil optional out (it calls
/// `encodeIfPresent`); Trove's JSON promises every key, with `null` for an
/// absent value (Docs/CLI.md). Wrap each optional field of a record that
/// `--json` prints: `@Nullable var etag: String?`.
// swift-format-ignore: UseSynthesizedInitializer
@propertyWrapper
struct Nullable<Value: Encodable>: Encodable {
  var wrappedValue: Value?

  // Explicit, so that a record's memberwise initializer takes `Value?`.
  init(wrappedValue: Value?) { self.wrappedValue = wrappedValue }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    if let wrappedValue {
      try container.encode(wrappedValue)
    } else {
      try container.encodeNil()
    }
  }
}
