import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// A mirror miss is sent while it downloads: the first client's bytes
/// come from the part file as it grows, other clients of the URL read
/// along, and no client ever gets a short or wrong body as a whole one.
@Suite(.enabled(if: Nginx.executable != nil, Nginx.missing))
struct ServeReadAlongTests {
  /// `curl -s -o FILE URL` running in the background.
  final class Download {
    let io: Scratch
    let process: Spawned
    var file: String { io["body"] }

    init(_ url: String) throws {
      io = try Scratch()
      process = try Spawned(
        executable: "/usr/bin/curl", ["-s", "-o", io["body"], "-w", "%{http_code}", url],
        io: io["curl"])
    }

    /// Bytes received so far.
    var received: Int64 { (try? fileStatus(file).size) ?? 0 }

    /// curl's exit status and the body it wrote.
    func finish() throws -> (status: Int32, body: [UInt8]) {
      let outcome = try process.wait()
      return (outcome.status, (try? contents(file)) ?? [])
    }
  }

  @Test(
    "the first bytes reach the client before the origin's transfer ends; a client joining mid-transfer reads along; one GET at the origin, both bodies whole and right"
  )
  func readAlong() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx(webDAV: true)
    // Past the size fetch keeps in a private temp file: a part file; at
    // 1 MB/s (/slow/) for about 6 s.
    let bytes = Bytes.random(6 << 20, seed: 91)
    try nginx.files.write("big.bin", bytes)
    let server = try TroveServe(store: scratch["store"], ["--mirror", "up=" + nginx.url("")])
    let url = server.url("m/up/slow/big.bin")
    let first = try Download(url)
    _ = poll(times: 1000, while: { first.received == 0 }, { first.received > 0 ? true : nil })
    #expect(first.received > 0)
    // nginx logs a request when it has sent it all.
    #expect(nginx.requests("/slow/big.bin").isEmpty)
    let second = try Download(url)
    let one = try first.finish()
    let two = try second.finish()
    #expect(one.status == 0 && one.body == bytes)
    #expect(two.status == 0 && two.body == bytes)
    #expect(nginx.requests("/slow/big.bin").count == 1)
    // Stored as any fetch stores it: the next one is served from the store.
    let again = try curl([server.url("m/up/slow/big.bin")])
    #expect(again.body == bytes && again.headers["x-trove-cache"] == "revalidated")
  }

  @Test(
    "the origin drops mid-body while two clients read along: each gets the whole right body or an error, never a short or wrong body as a whole one",
    arguments: ["drop", "etagchange"])
  func originDrops(mode: String) throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let origin = try FaultServer()
    let size = 8 << 20
    let server = try TroveServe(
      store: scratch["store"], ["--mirror", "up=" + origin.url("")])
    let url = server.url("m/up/\(mode)/size=\(size)/k")
    let clients = try (0..<2).map { _ in try Download(url) }
    let results = try clients.map { try $0.finish() }
    // Once the transfer is over, the store holds the origin's body or nothing.
    let stored = try curl([url])
    // What the origin's final body is: v2 when its ETag changed.
    let final = try origin.body("k", size: size, version: mode == "etagchange" ? 2 : 1)
    for result in results {
      if mode == "drop" {
        // The store's fetch resumes where the origin stopped: the readers
        // go on reading the same part file.
        #expect(result.status == 0 && result.body == final, "curl \(result.status)")
      } else {
        // The body changed under the resume: what was read cannot hash to
        // the new body, so the last byte is never sent (curl 18).
        #expect(result.status != 0 || result.body == final, "curl \(result.status)")
        #expect(result.body.count < size || result.body == final)
      }
    }
    #expect(stored.status != 200 || stored.body == final)
  }
}

extension ServeReadAlongTests {
  @Test(
    "SIGTERM while a client reads along: the server ends after its grace period and exits 0; the client gets an error, not a short body as a whole one"
  )
  func stopWhileReadingAlong() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx(webDAV: true)
    let bytes = Bytes.random(8 << 20, seed: 92)
    try nginx.files.write("big.bin", bytes)
    let server = try TroveServe(
      store: scratch["store"], ["--mirror", "up=" + nginx.url(""), "--grace-period", "1s"])
    let client = try Download(server.url("m/up/slow/big.bin"))
    _ = poll(times: 1000, while: { client.received == 0 }, { client.received > 0 ? true : nil })
    #expect(client.received > 0)
    let stopped = try server.stop()
    #expect(stopped.status == 0, "\(stopped.stderr)")
    let result = try client.finish()
    #expect(result.status != 0 && result.body.count < bytes.count)
  }
}

extension ServeReadAlongTests {
  @Test(
    "a read-along client gets its last byte once the body is verified, before the store's commit: the server held at its publishing step, curl ends with the whole body"
  )
  func endsBeforeTheCommit() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx(webDAV: true)
    // Past the size fetch keeps in a private temp file: a part file.
    let bytes = Bytes.random(6 << 20, seed: 92)
    try nginx.files.write("big.bin", bytes)
    let pause = scratch["pause"]
    try FileManager.default.createDirectory(atPath: pause, withIntermediateDirectories: true)
    let server = try TroveServe(
      store: scratch["store"], ["--mirror", "up=" + nginx.url("")],
      environment: ["TROVE_TEST_PAUSE": pause])
    let client = try Download(server.url("m/up/big.bin"))
    let held = poll(times: 1000) {
      FileManager.default.fileExists(atPath: pause + "/publish") ? true : nil
    }
    #expect(held == true, "the fetch never reached its commit")
    // Held inside the commit: the client ends, with every byte.
    let ended = poll(times: 1000) { client.process.process.isRunning ? nil : true }
    #expect(ended == true, "curl waited for the commit")
    let object = objectFilePath(scratch["store"], XXH3Hasher.digest(bytes))
    #expect(!FileManager.default.fileExists(atPath: object), "stored before the pause ended")
    _ = FileManager.default.createFile(atPath: pause + "/publish.go", contents: nil)
    _ = FileManager.default.createFile(atPath: pause + "/rename.go", contents: nil)
    let early = try client.finish()
    #expect(early.status == 0 && early.body == bytes)
    let stored = poll(times: 500) { FileManager.default.fileExists(atPath: object) ? true : nil }
    #expect(stored == true, "the body was not stored after the commit went on")
  }

  @Test(
    "a package index page too long for a private temp file is still answered rewritten, as text/html: never read along as it arrives"
  )
  func aLongIndexPageIsRewritten() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let index = try Nginx(webDAV: true)
    let files = try Nginx(webDAV: true)
    // Over 4 MiB: the fetch writes it to a part file as it arrives.
    var page = "<html><body>\n"
    for i in 0..<60_000 {
      page += "<a href=\"\(files.url("/packages/p\(i).whl"))\">p\(i).whl</a><br>\n"
    }
    page += "</body></html>\n"
    #expect(page.utf8.count > 4 << 20)
    try FileManager.default.createDirectory(
      atPath: index.files["simple/p"], withIntermediateDirectories: true)
    try index.files.write("simple/p/index.html", Array(page.utf8))
    let server = try TroveServe(
      store: scratch["store"],
      ["--mirror", "pypi=" + index.url(""), "--mirror", "files=" + files.url("")])
    let answer = try curl([server.url("m/pypi/simple/p/")])
    #expect(answer.status == 200)
    #expect(answer.headers["content-type"]?.hasPrefix("text/html") == true, "\(answer.headers)")
    let text = String(decoding: answer.body, as: UTF8.self)
    #expect(text.contains("href=\"/m/files/packages/p59999.whl\""))
    #expect(!text.contains(files.url("")))
  }

  @Test("a client that disconnects mid-download leaves the fetch running: the store holds the body")
  func clientLeaves() throws {
    let scratch = try Scratch()
    _ = try scratch.store()
    let nginx = try Nginx(webDAV: true)
    let bytes = Bytes.random(5 << 20, seed: 93)
    try nginx.files.write("big.bin", bytes)
    let server = try TroveServe(store: scratch["store"], ["--mirror", "up=" + nginx.url("")])
    let client = try Download(server.url("m/up/slow/big.bin"))
    _ = poll(times: 1000, while: { client.received == 0 }, { client.received > 0 ? true : nil })
    client.process.kill()
    _ = try client.finish()
    // The fetch goes on to bind the URL once the body is stored.
    let key = nginx.url("/slow/big.bin")
    let done = poll(times: 1000) {
      (try? CLI.run(["--store", scratch["store"], "keys"]))?.out.contains(key) == true ? true : nil
    }
    #expect(done == true)
    #expect(nginx.requests("/slow/big.bin").count == 1)
    nginx.stop()
    let served = try curl([server.url("m/up/slow/big.bin")])
    #expect(served.status == 200 && served.body == bytes)
    #expect(served.headers["x-trove-cache"] == "stale")
  }
}
