import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// Values echoed in messages and listings (arguments, paths, keys) never
/// split a line or reach the terminal raw: control characters and bytes
/// that are not UTF-8 are shown escaped (`\n`, `\t`, `\r`, `\xHH`).
@Suite("clean messages: escaped values, one line each")
struct MessageTests {
  /// An ESC sequence and a newline, as a hostile or mistyped argument holds them.
  static let hostile = "\u{1B}[31mred\nx"
  /// How messages show it.
  static let shown = "\\x1b[31mred\\nx"

  /// Whether `bytes` hold no control byte except the newlines ending lines.
  static func isClean(_ bytes: [UInt8]) -> Bool {
    !bytes.contains { ($0 < 0x20 && $0 != 0x0A) || $0 == 0x7F }
  }

  @Test(
    "escaping: controls as \\n, \\t, \\r or \\xHH per UTF-8 byte, invalid UTF-8 as \\xHH, the rest untouched",
    arguments: [
      ([0x61, 0x1B, 0x5B, 0x6D], "a\\x1b[m"),
      ([0x0A, 0x09, 0x0D, 0x00, 0x7F], "\\n\\t\\r\\x00\\x7f"),
      ([0xC2, 0x9B, 0x31], "\\xc2\\x9b1"),  // U+009B, the C1 CSI
      ([0xFF, 0x61], "\\xffa"),
      ([0xC0, 0x80], "\\xc0\\x80"),  // overlong NUL
      ([0xED, 0xA0, 0x80], "\\xed\\xa0\\x80"),  // a surrogate
      ([0xE2, 0x82], "\\xe2\\x82"),  // cut short
      ([0xE2, 0x82, 0xAC, 0xF0, 0x9F, 0x98, 0x80], "€😀"),
      ([0x5C, 0x6E], "\\n"),  // a backslash and an n stay as they are
    ] as [([UInt8], String)])
  func escaping(bytes: [UInt8], expected: String) {
    #expect(MessageText.escaped(bytes: bytes) == expected)
    if let text = String(validating: bytes, as: UTF8.self) {
      #expect(MessageText.escaped(text) == expected)
    }
    // Idempotent: every layer that prints may escape.
    #expect(MessageText.escaped(expected) == expected)
  }

  @Test("a TroveError's description is one line with its values escaped; message keeps them")
  func errorDescription() {
    let error = TroveError(.notFound, "no key '\(Self.hostile)'", value: Self.hostile)
    #expect(error.description == "no key '\(Self.shown)'")
    #expect(error.message.contains("\n"))
    #expect(MessageText.quoted(Self.hostile) == "'\(Self.shown)'")
  }

  @Test("an ESC and a newline in a key argument: one error line, escaped")
  func keyArgument() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "sweep"]).status == 0)  // the store exists
    for args in [
      ["get", Self.hostile, scratch["out"]], ["rm", Self.hostile], ["pin", Self.hostile],
    ] {
      let r = try CLI.run(["--store", store] + args)
      #expect(r.status == 1, "\(args[0])")
      #expect(r.stderr == "Error: no key '\(Self.shown)' in store '\(store)'\n", "\(args[0])")
      #expect(Self.isClean(Array(r.stderr.utf8)))
    }
  }

  @Test("an ESC and a newline in a digest argument: the error is one line, then the usage lines")
  func digestArgument() throws {
    let scratch = try Scratch()
    let r = try CLI.run(["--store", scratch["store"], "has", "xxh128:" + Self.hostile])
    #expect(r.status == 64)
    #expect(Self.isClean(Array(r.stderr.utf8)))
    #expect(
      r.errorLines == [
        "Error: invalid digest 'xxh128:\(Self.shown)': expected 32 hex digits after 'xxh128:', found 10",
        "Usage: trove [--store <dir>] has [-v] [--remote] <digest-or-key>",
        "  See 'trove has --help' for more information.",
      ])
    let checksum = try CLI.run([
      "--store", scratch["store"], "get", "sha256:\t" + Self.hostile, "x",
    ])
    #expect(checksum.status == 64)
    #expect(Self.isClean(Array(checksum.stderr.utf8)))
    #expect(
      checksum.errorLines.first?.hasPrefix("Error: invalid checksum 'sha256:\\t\(Self.shown)'")
        == true)
    #expect(checksum.errorLines.count == 3)
  }

  @Test("an ESC and a newline in a path: one error line; a stored one prints one escaped line")
  func pathArgument() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let missing = try CLI.run(["--store", store, "put", scratch["a" + Self.hostile]])
    #expect(missing.status == 66)
    #expect(
      missing.stderr
        == "Error: cannot read '\(scratch["a" + Self.shown])': No such file or directory (open, errno 2)\n"
    )
    #expect(Self.isClean(Array(missing.stderr.utf8)))

    let file = try scratch.write("b" + Self.hostile, [1, 2, 3])
    let digest = XXH3Hasher.digest([1, 2, 3])
    let put = try CLI.run(["--store", store, "put", file])
    #expect(put.status == 0)
    #expect(put.out == "\(digest)  \(scratch["b" + Self.shown])\n")
    #expect(Self.isClean(put.stdout))
    // JSON is exact.
    let json = try CLI.run(["--store", store, "put", "--json", file])
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]])
    #expect(records.first?["name"] as? String == file)
    #expect(Self.isClean(json.stdout))
  }

  @Test("trove keys lists a key holding a newline and an ESC on one escaped line; --json is exact")
  func keysListing() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", [4, 5, 6])
    let key = "line one\nline two\u{1B}[0m\u{9B}"
    #expect(try CLI.run(["--store", store, "put", "--key", key, file]).status == 0)
    let keys = try CLI.run(["--store", store, "keys"])
    #expect(keys.status == 0)
    #expect(
      keys.out
        == "\(XXH3Hasher.digest([4, 5, 6]))         3 B  line one\\nline two\\x1b[0m\\xc2\\x9b\n")
    #expect(Self.isClean(keys.stdout))
    let json = try CLI.run(["--store", store, "keys", "--json"])
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]])
    #expect(records.first?["key"] as? String == key)
    #expect(!json.stdout.contains(0x1B) && !json.out.unicodeScalars.contains("\u{9B}"))
    #expect(json.out.contains("\\u009b"))
  }

  @Test("a path that is not UTF-8 is refused, shown with its bytes; no other file is stored")
  func invalidUTF8() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(try CLI.run(["--store", store, "sweep"]).status == 0)  // the store exists
    // "\xff" decodes to U+FFFD: a file with that name must not be the one put.
    try scratch.write("\u{FFFD}", [7, 7, 7])
    let raw = Array((scratch.path + "/").utf8) + [0xFF]
    let fd = raw.withUnsafeBufferPointer { bytes in
      (bytes.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer {
        open($0.baseAddress!, O_WRONLY | O_CREAT | O_EXCL, 0o644)
      }
    }
    #expect(fd >= 0)
    _ = write(fd, [UInt8]([8, 8]), 2)
    close(fd)
    // Foundation passes arguments as strings: the shell makes the byte.
    let shell = Process()
    shell.executableURL = URL(fileURLWithPath: "/bin/sh")
    shell.arguments = [
      "-c", "exec \"$0\" --store \"$1\" put \"$2$(printf '\\377')\" 2>\"$3\"", CLI.executable,
      store, scratch.path + "/", scratch["err"],
    ]
    shell.standardOutput = FileHandle.nullDevice
    try shell.run()
    shell.waitUntilExit()
    #expect(shell.terminationStatus == 64)
    let stderr = try contents(scratch["err"])
    #expect(Self.isClean(stderr))
    let lines = String(decoding: stderr, as: UTF8.self).split(separator: "\n")
    #expect(
      lines.first
        == "Error: argument '\(scratch.path)/\\xff' is not valid UTF-8; trove takes names and values in UTF-8 only"
    )
    #expect(lines.dropFirst().first?.hasPrefix("Usage: trove [--store <dir>] put") == true)
    for content in [[7, 7, 7], [8, 8]] as [[UInt8]] {
      let has = try CLI.run(["--store", store, "has", XXH3Hasher.digest(content).description])
      #expect(has.status == 1)
    }
  }
  @Test("standard input is <stdin> in every message")
  func stdinName() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let put = try CLI.run(["--store", store, "put", "--expect-size", "9", "-"], stdin: [1, 2, 3])
    #expect(put.stderr == "Error: '<stdin>' is 3 bytes, expected 9 (--expect-size)\n")
    let list = try CLI.run(["--store", store, "get", "--from", "-"], stdin: Array("bad\n".utf8))
    #expect(list.status == 64 && list.stderr.hasPrefix("Error: <stdin>:1: "), "\(list.stderr)")
    let urls = try CLI.run(
      ["--store", store, "fetch", "-i", "-"], stdin: Array("http://x/ sha256:zz\n".utf8))
    #expect(urls.status == 64 && urls.stderr.hasPrefix("Error: <stdin>:1: "), "\(urls.stderr)")
    let archive = try CLI.run(["--store", store, "import", "-"], stdin: [1, 2, 3])
    #expect(archive.status == 65 && archive.stderr.contains("'<stdin>'"), "\(archive.stderr)")
    // And standard output, <output>.
    let full = try CLI.run(
      [], prefix: ["/bin/bash", "-c", "\"$0\" --store '\(store)' dir >/dev/full", CLI.executable])
    #expect(full.status == 74)
    #expect(full.stderr == "Error: cannot write '<output>': No space left on device\n")
  }

  @Test(
    "characters that reorder text (U+202E…) are escaped in printed keys and \\u-escaped in JSON"
  )
  func layoutCharactersEscaped() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let key = "invoice\u{202E}fdp.exe\u{2066}x\u{200F}"
    try put(scratch, "in", [1, 2, 3], key: key)
    let keys = try CLI.run(["--store", store, "keys"])
    #expect(keys.status == 0, "\(keys.stderr)")
    #expect(
      keys.out.contains("invoice\\xe2\\x80\\xaefdp.exe\\xe2\\x81\\xa6x\\xe2\\x80\\x8f"),
      "\(keys.out)")
    let json = try CLI.run(["--store", store, "keys", "--json"])
    #expect(json.out.contains("invoice\\u202efdp.exe\\u2066x\\u200f"), "\(json.out)")
    let records = try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]]
    #expect(records?.first?["key"] as? String == key)
    for text in [keys.out, json.out] {
      #expect(!text.unicodeScalars.contains { MessageText.isLayoutCharacter($0) })
    }
    let missing = try CLI.run(["--store", store, "get", "no\u{202E}such", "-"])
    #expect(missing.stderr.contains("no\\xe2\\x80\\xaesuch"), "\(missing.stderr)")
  }
}
