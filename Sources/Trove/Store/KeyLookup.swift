/// How ``Store/digest(forKey:_:)`` looks a key up: whether the key is
/// being used, and whether a key the store lacks is read through its
/// remotes. Callers say which; nothing is decided by who is calling.
public struct KeyLookup: OptionSet, Sendable, Hashable {
  public let rawValue: Int
  public init(rawValue: Int) { self.rawValue = rawValue }

  /// The object is used through the key (read, copied out, served): the
  /// key and its digest are noted in the active records. A look that only
  /// shows or manages the key (listing, pinning, removing) leaves it out.
  public static let use = KeyLookup(rawValue: 1 << 0)
  /// A key the store does not have is read through its remotes' key
  /// records: the blob a record names is pulled (rehashed on the way in)
  /// and the key bound to it, as ``Store/pullKey(_:)`` does.
  public static let readThrough = KeyLookup(rawValue: 1 << 1)
}
