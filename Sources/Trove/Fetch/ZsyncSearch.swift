/// Where a file the store holds (a URL's earlier body) has the blocks a
/// zsync control file describes, shifted or not: zsync's search, one pass
/// over the file with the rolling checksum of a window of one block (or of
/// two consecutive blocks, when the control file asks for them to match
/// together), the strong hash computed only where the rolling ones match.
/// What it finds is a hint: the rebuilt file is checked whole.
enum ZsyncSearch {
  /// For each block of `control`, an offset of `seed` (`size` bytes long)
  /// whose bytes hash as the block does, or nil. The last block, when
  /// short, is never found: it is at most one block to download.
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
    func key(_ first: UInt32, _ second: UInt32) -> UInt64 {
      pair ? UInt64(first & mask) << 32 | UInt64(second & mask) : UInt64(first & mask)
    }
    var byKey: [UInt64: [Int]] = [:]
    for k in 0..<keyed {
      byKey[key(control.rolling[k], pair ? control.rolling[k + 1] : 0), default: []].append(k)
    }
    // A bit per key, about 16 bits a block: most windows are turned away
    // by one load.
    let bits = min(26, max(12, Int.bitWidth - (keyed * 16).leadingZeroBitCount))
    var tags = [UInt64](repeating: 0, count: 1 << (bits - 6))
    func tag(_ key: UInt64) -> Int { Int((key &* 0x9E37_79B9_7F4A_7C15) >> UInt64(64 - bits)) }
    for k in byKey.keys { tags[tag(k) >> 6] |= 1 << UInt64(tag(k) & 63) }

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
    func strong(at start: Int) -> [UInt8] {
      EVPHasher.digest(
        control.strongAlgorithm,
        of: UnsafeRawBufferPointer(rebasing: buffer[start..<(start + block)])) ?? []
    }
    // RollingSum keeps A in the low half; the control file, in the high one.
    func zsync(_ sum: BlockSums.RollingSum) -> UInt32 { sum.value << 16 | sum.value >> 16 }

    while filled < span { guard try refill() else { return found } }
    var left = control.blockCount
    var (first, second) = sums(at: 0)
    while left > 0 {
      let k = key(zsync(first), zsync(second))
      var matched = false
      if tags[tag(k) >> 6] & (1 << UInt64(tag(k) & 63)) != 0, let candidates = byKey[k] {
        var here: [UInt8]?
        var next: [UInt8]?
        for candidate in candidates
        where found[candidate] == nil || (pair && found[candidate + 1] == nil) {
          here = here ?? strong(at: i)
          guard here!.prefix(control.strongBytes).elementsEqual(control.strong(of: candidate))
          else { continue }
          if pair {
            next = next ?? strong(at: i + block)
            guard
              next!.prefix(control.strongBytes).elementsEqual(control.strong(of: candidate + 1))
            else { continue }
          }
          for (offset, hit) in (pair ? [0, 1] : [0]).map({ ($0 * block, candidate + $0) })
          where found[hit] == nil {
            found[hit] = base + Int64(i + offset)
            left -= 1
          }
          matched = true
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
