import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// A remote that goes away in the middle of a transfer: nginx
/// stopped mid-pull and mid-push. Local work goes on, nothing partial is
/// left anywhere, the queue keeps what did not go up, and once the server
/// is back (on its port) the push completes and the get reads through.
@Suite(
  "nginx stopped mid-transfer",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteOutageMidTransferTests {
  /// Lets `store`'s processes ask `remote` again at once (its breaker's
  /// interval over), as they would a minute later.
  static func expireBreaker(_ store: String, _ remote: String = "shared") throws {
    let opened = try Store(StoreConfiguration(root: store))
    try opened.index().write("test") { (tx) throws(TroveError) in
      try tx.setRemote(remote, ["retry-at": currentTimeNanoseconds() - 1])
    }
  }

  @Test(
    "stopped mid-pull: the get fails cleanly; mid-push: the object stays queued; back, both work")
  func stoppedMidTransfer() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let (a, b) = (scratch["a"], scratch["b"])
    #expect(try RemoteTests.remote(a, ["add", "shared", nginx.url("/out")]).status == 0)
    // B reads through /slow/ (1 MB/s): its pull is still going when nginx stops.
    #expect(try RemoteTests.remote(b, ["add", "shared", nginx.url("/slow/out")]).status == 0)

    // Mid-pull.
    let bytes = Bytes.random(2 << 20, seed: 3201)
    let digest = try RemoteTests.put(a, bytes, in: scratch)
    #expect(try RemoteTests.remote(a, ["push", digest.description]).status == 0)
    let out = scratch["out"]
    let get = try Spawned(["--store", b, "get", digest.description, out], io: scratch["get"])
    var pulling = false
    for _ in 0..<20_000 where get.process.isRunning {
      if !RemoteTests.leftovers(b).isEmpty {
        pulling = true
        break
      }
      usleep(500)
    }
    #expect(pulling, "the get never started its pull")
    nginx.stop()
    let got = try get.wait()
    #expect(got.status == 1, "\(got.stderr)")
    let said = got.stderr
    #expect(said.contains("trove: warning: remote 'shared': "), "\(said)")
    #expect(got.errorLines.filter { $0.hasPrefix("trove: warning:") }.count == 1, "\(said)")
    #expect(!FileManager.default.fileExists(atPath: out))
    #expect(try RemoteTests.digests(b) == [])
    #expect(RemoteTests.leftovers(b) == [])

    // Mid-push: A stops when nginx has part of the body, nginx goes, A goes on.
    try nginx.start()
    let second = Bytes.random(48 << 20, seed: 3202)
    let secondDigest = try RemoteTests.put(a, second, in: scratch)
    let blob = nginx.files["out/" + remoteBlobPath(secondDigest)]
    var caught = false
    let push = try Spawned(["--store", a, "remote", "push"], io: scratch["push"])
    while push.process.isRunning {
      let spooled =
        (try? FileManager.default.contentsOfDirectory(atPath: nginx.state["client-body"])) ?? []
      if !spooled.isEmpty {
        Glibc.kill(push.pid, SIGSTOP)
        caught = push.process.isRunning
        break
      }
      usleep(200)
    }
    if caught {
      nginx.stop()
      Glibc.kill(push.pid, SIGCONT)
      let pushed = try push.wait()
      let said = pushed.stderr
      #expect([69, 75].contains(pushed.status), "\(pushed.status): \(said)")
      #expect(said.split(separator: "\n").count == 1, "\(said)")
      #expect(!FileManager.default.fileExists(atPath: blob))
      let queued = try #require(try RemoteReadThroughTests.status(a)["shared"])
      #expect(queued["queuedObjects"] as? Int == 1, "\(queued)")
      // Local work goes on while the remote is away.
      #expect(try CLI.run(["--store", a, "get", secondDigest.description, "-"]).stdout == second)
      try nginx.start()
    } else {
      _ = try push.wait()
    }

    // Back on its port: the queue drains, and B reads both through.
    try Self.expireBreaker(a)
    let drained = try RemoteTests.remote(a, ["push"])
    #expect(drained.status == 0, "\(drained.stderr)")
    #expect(try XXH3Hasher.digest(ofFile: blob) == secondDigest)
    try Self.expireBreaker(b)
    #expect(try CLI.run(["--store", b, "get", digest.description, out]).status == 0)
    #expect(try XXH3Hasher.digest(ofFile: out) == digest)
    #expect(try CLI.run(["--store", b, "verify"]).status == 0)
    #expect(caught, "the push finished before nginx could be stopped under it")
  }
}
