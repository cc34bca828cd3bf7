/// Where a file the store holds (a URL's earlier body) has the blocks a
/// zsync control file describes, shifted or not: zsync's search, one pass
/// over the file with the rolling checksum of a window of one block (or of
/// two consecutive blocks, when the control file asks for them to match
/// together), the strong hash computed only where the rolling ones match.
/// What it finds is a hint: the rebuilt file is checked whole.
enum ZsyncSearch {
  /// A window's rolling sums and strong hashes, as the blocks are indexed
  /// by: blocks with equal keys are equal (as far as the control file can
  /// tell), so one match finds them all.
  private struct StrongKey: Hashable {
    var rolling: UInt64
    /// The first block's strong hash (at most 16 bytes), then the second's.
    var first: (UInt64, UInt64)
    var second: (UInt64, UInt64)

    init(rolling: UInt64, first: some Collection<UInt8>, second: some Collection<UInt8>) {
      self.rolling = rolling
      self.first = Self.packed(first)
      self.second = Self.packed(second)
    }

    private static func packed(_ bytes: some Collection<UInt8>) -> (UInt64, UInt64) {
      var words: (UInt64, UInt64) = (0, 0)
      for (n, byte) in bytes.enumerated() {
        if n < 8 {
          words.0 |= UInt64(byte) << (8 * UInt64(n))
        } else {
          words.1 |= UInt64(byte) << (8 * UInt64(n - 8))
        }
      }
      return words
    }

    static func == (a: Self, b: Self) -> Bool {
      a.rolling == b.rolling && a.first == b.first && a.second == b.second
    }

    func hash(into hasher: inout Hasher) {
      hasher.combine(rolling)
      hasher.combine(first.0)
      hasher.combine(first.1)
      hasher.combine(second.0)
      hasher.combine(second.1)
    }
  }

  /// For each block of `control`, an offset of `seed` (`size` bytes long)
  /// whose bytes hash as the block does, or nil. The last block, when
  /// short, is never found: it is at most one block to download. The
  /// strong hashes computed are bounded (a few per block of the control
  /// file and of the seed): a control file made to collide everywhere
  /// ends the search early, with what it found so far.
  static func locate(_ control: ZsyncControl, in seed: FileDescriptor, size: Int64)
    throws(SystemCallError) -> [Int64?]
  {
    let block = control.blockSize
    let pair = control.sequenceMatches == 2
    let span = pair ? 2 * block : block
    var found = [Int64?](repeating: nil, count: control.blockCount)
    let whole = Int(control.length / Int64(block))
    let keyed = pair ? whole - 1 : whole
    guard keyed > 0, size >= Int64(span) else { return found }
    let mask = control.rollingMask
    func rollingKey(_ first: UInt32, _ second: UInt32) -> UInt64 {
      pair ? UInt64(first & mask) << 32 | UInt64(second & mask) : UInt64(first & mask)
    }
    // Blocks by their sums and hashes: the first of the blocks with a key,
    // the others chained from it. Once found, a key maps to -1: its bytes
    // are recognised again without walking the chain.
    var firstOf: [StrongKey: Int32] = [:]
    var sameAs = [Int32](repeating: -1, count: keyed)
    var rollingKeys = Set<UInt64>()
    for k in 0..<keyed {
      let rolling = rollingKey(control.rolling[k], pair ? control.rolling[k + 1] : 0)
      rollingKeys.insert(rolling)
      let key = StrongKey(
        rolling: rolling, first: control.strong(of: k),
        second: pair ? control.strong(of: k + 1) : [])
      if let head = firstOf[key] { sameAs[k] = head }
      firstOf[key] = Int32(k)
    }
    // A bit per rolling key, about 16 bits a key: most windows are turned
    // away by one load.
    let bits = min(26, max(12, Int.bitWidth - (rollingKeys.count * 16).leadingZeroBitCount))
    // Raw memory: an array's bounds check on every byte of the file shows.
    let tags = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: 1 << (bits - 6))
    defer { tags.deallocate() }
    tags.initialize(repeating: 0)
    func tag(_ key: UInt64) -> Int { Int((key &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - bits)) }
    for k in rollingKeys { tags[tag(k) >> 6] |= 1 << UInt64(tag(k) & 63) }
    var budget = 4 * (control.blockCount + Int(size / Int64(block))) + 1024

    let capacity = max(16 << 20, 4 * span)
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 4096)
    defer { buffer.deallocate() }
    // The file's bytes from `base` are in buffer[0..<filled]; the window
    // starts at `i`.
    var base: Int64 = 0
    var filled = 0
    var i = 0
    /// Moves the bytes from `i` to the front and reads more: false at the
    /// file's end.
    func refill() throws(SystemCallError) -> Bool {
      let kept = filled - i
      if kept > 0, i > 0 {
        UnsafeMutableRawBufferPointer(rebasing: buffer[0..<kept]).copyMemory(
          from: UnsafeRawBufferPointer(rebasing: buffer[i..<filled]))
      }
      base += Int64(i)
      filled = kept
      i = 0
      let n = try seed.read(
        into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled..<capacity]),
        at: base + Int64(filled))
      filled += n
      return n > 0
    }
    func sums(at start: Int) -> (BlockSums.RollingSum, BlockSums.RollingSum) {
      let first = BlockSums.RollingSum(
        UnsafeRawBufferPointer(rebasing: buffer[start..<(start + block)]))
      guard pair else { return (first, first) }
      return (
        first,
        BlockSums.RollingSum(
          UnsafeRawBufferPointer(rebasing: buffer[(start + block)..<(start + span)]))
      )
    }
    // The last strong hash computed, by the file offset of its block: after
    // a match of a pair, the next window's first block is the pair's second.
    var carried: (offset: Int64, hash: [UInt8])?
    func strong(at start: Int) -> [UInt8] {
      let offset = base + Int64(start)
      if let carried, carried.offset == offset { return carried.hash }
      budget -= 1
      let hash = Array(
        (EVPHasher.digest(
          control.strongAlgorithm,
          of: UnsafeRawBufferPointer(rebasing: buffer[start..<(start + block)])) ?? [])
          .prefix(control.strongBytes))
      carried = (offset, hash)
      return hash
    }
    // RollingSum keeps A in the low half; the control file, in the high one.
    func zsync(_ sum: BlockSums.RollingSum) -> UInt32 { sum.value << 16 | sum.value >> 16 }

    while filled < span { guard try refill() else { return found } }
    var left = control.blockCount
    var (first, second) = sums(at: 0)
    while left > 0, budget > 0 {
      let rolling = rollingKey(zsync(first), zsync(second))
      var matched = false
      if tags[tag(rolling) >> 6] & (1 << UInt64(tag(rolling) & 63)) != 0,
        rollingKeys.contains(rolling)
      {
        let here = strong(at: i)
        let next = pair ? strong(at: i + block) : []
        let key = StrongKey(rolling: rolling, first: here, second: next)
        if let head = firstOf[key] {
          matched = true
          var k = Int(head)
          while k >= 0 {
            for offset in pair ? [0, 1] : [0] where found[k + offset] == nil {
              found[k + offset] = base + Int64(i + offset * block)
              left -= 1
            }
            k = Int(sameAs[k])
          }
          if head >= 0 { firstOf[key] = -1 }
        }
      }
      if matched {
        // Past the matched block: the next window starts after it.
        i += block
        while i + span > filled { guard try refill() else { return found } }
        (first, second) = sums(at: i)
        continue
      }
      while i + span >= filled { guard try refill() else { return found } }
      first.roll(out: buffer[i], in: buffer[i + block])
      if pair { second.roll(out: buffer[i + block], in: buffer[i + span]) }
      i += 1
    }
    return found
  }
}
