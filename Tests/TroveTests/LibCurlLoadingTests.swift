import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// libcurl is loaded with dlopen on the first transfer, not linked: the
/// binary does not depend on it, commands without HTTP run where it cannot
/// be loaded, and those with HTTP fail there with one line saying why.
@Suite struct LibCurlLoadingTests {
  /// `unshare` and `mount` make a private mount namespace where libcurl's
  /// file is an empty one (root only).
  static let canHideLibrary =
    TestFilesystems.isRoot && FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare")
  static let cannotHide = Comment(
    rawValue: "hiding libcurl needs root and /usr/bin/unshare (a private mount namespace)")

  @Test("the trove binary does not depend on libcurl (ldd lists no libcurl)")
  func notLinked() throws {
    let out = NSTemporaryDirectory() + "trove-ldd-" + UUID().uuidString
    defer { try? FileManager.default.removeItem(atPath: out) }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/sh")
    process.arguments = ["-c", "/usr/bin/ldd \"$0\" > \"$1\"", CLI.executable, out]
    try process.run()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    let listing = String(decoding: try contents(out), as: UTF8.self)
    #expect(listing.contains("libc.so"), "\(listing)")
    #expect(!listing.contains("libcurl"), "\(listing)")
  }

  /// A command prefix that runs the command in a mount namespace of its
  /// own where libcurl's file is empty: the bind mount ends with the process.
  static func withoutLibCurl(_ scratch: Scratch) throws -> [String] {
    let library = try #require(
      ["/usr/lib/x86_64-linux-gnu/libcurl.so.4", "/lib/x86_64-linux-gnu/libcurl.so.4"].first {
        FileManager.default.fileExists(atPath: $0)
      }, "no libcurl.so.4 to hide")
    let real = URL(fileURLWithPath: library).resolvingSymlinksInPath().path
    let empty = try scratch.write("empty.so", [])
    return [
      "/usr/bin/unshare", "--mount", "--", "/bin/sh", "-c",
      "mount --bind \"\(empty)\" \"\(real)\" && exec \"$0\" \"$@\"",
    ]
  }

  @Test(
    "with libcurl unloadable, put/has/get work and fetch fails with one line naming libcurl.so.4",
    .enabled(if: canHideLibrary, cannotHide))
  func missingLibrary() throws {
    let scratch = try Scratch()
    let hidden = try Self.withoutLibCurl(scratch)
    let input = try scratch.write("input", Bytes.pattern(4096))
    let put = try CLI.run(["--store", scratch["store"], "put", input], prefix: hidden)
    #expect(put.status == 0, "\(put.stderr)")
    let digest = try #require(put.out.split(separator: " ").first.map(String.init))
    let has = try CLI.run(["--store", scratch["store"], "has", digest], prefix: hidden)
    #expect(has.status == 0, "\(has.stderr)")
    let get = try CLI.run(
      ["--store", scratch["store"], "get", digest, scratch["out"]], prefix: hidden)
    #expect(get.status == 0, "\(get.stderr)")
    #expect(try contents(scratch["out"]) == Bytes.pattern(4096))

    let url = "http://127.0.0.1:\(deadPort())/a"
    let fetch = try CLI.run(["--store", scratch["store"], "fetch", url], prefix: hidden)
    #expect(fetch.status == 69, "\(fetch.stderr)")
    #expect(fetch.errorLines.count == 1, "\(fetch.stderr)")
    #expect(
      fetch.stderr.contains("cannot load libcurl (libcurl.so.4): ")
        && fetch.stderr.contains("; install libcurl4"), "\(fetch.stderr)")
    #expect(scratch.temporaries("store").isEmpty)

    // A WebDAV remote needs libcurl too: one line each, exit 69; adding and
    // listing it do not.
    let remote = "http://127.0.0.1:\(deadPort())/cache"
    let add = try CLI.run(
      ["--store", scratch["store"], "remote", "add", "dav", remote], prefix: hidden)
    #expect(add.status == 0, "\(add.stderr)")
    #expect(
      try CLI.run(["--store", scratch["store"], "remote", "ls"], prefix: hidden).status == 0)
    for command in [["remote", "push", "--remote", "dav", digest], ["remote", "check", "dav"]] {
      let run = try CLI.run(["--store", scratch["store"]] + command, prefix: hidden)
      #expect(run.status == 69, "\(command): \(run.stderr)")
      #expect(
        run.errorLines.count == 1 && run.stderr.contains("cannot load libcurl (libcurl.so.4): "),
        "\(command): \(run.stderr)")
    }

    // Outside the namespace the same fetch reaches libcurl: a refused
    // connection, not a missing library.
    let plain = try CLI.run(["--store", scratch["store"], "fetch", "--retries", "0", url])
    #expect(plain.status != 0)
    #expect(!plain.stderr.contains("cannot load libcurl"), "\(plain.stderr)")
  }

  @Test(
    "with libcurl unloadable, a fetch the cache answers (fresh, or --offline) succeeds: no request, no libcurl",
    .enabled(if: canHideLibrary && Nginx.executable != nil, cannotHide))
  func cacheAnswersWithoutLibrary() throws {
    let scratch = try Scratch()
    let hidden = try Self.withoutLibCurl(scratch)
    let nginx = try Nginx()
    try nginx.files.write("a", Bytes.pattern(5000))
    for path in ["/fresh/a", "/a"] {
      try trove(scratch["store"], ["fetch", "-q", nginx.url(path)])
    }
    let fresh = try CLI.run(
      ["--store", scratch["store"], "fetch", "-o", scratch["fresh"], nginx.url("/fresh/a")],
      prefix: hidden)
    #expect(fresh.status == 0, "\(fresh.stderr)")
    #expect(try contents(scratch["fresh"]) == Bytes.pattern(5000))
    let offline = try CLI.run(
      [
        "--store", scratch["store"], "fetch", "--offline", "-o", scratch["offline"],
        nginx.url("/a"),
      ],
      prefix: hidden)
    #expect(offline.status == 0, "\(offline.stderr)")
    // Not fresh: the server must be asked, which needs libcurl.
    let stale = try CLI.run(
      ["--store", scratch["store"], "fetch", nginx.url("/a")], prefix: hidden)
    #expect(stale.status == 69 && stale.stderr.contains("cannot load libcurl"), "\(stale.stderr)")
    #expect(nginx.requests("/fresh/a").count == 1)
  }
}
