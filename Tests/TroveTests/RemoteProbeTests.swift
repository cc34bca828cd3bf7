import Foundation
import Testing

@testable import Trove

/// A command that names a remote asks it even while its circuit breaker
/// is open (a probe): against real nginx stopped and started again on its
/// port, as a remote restarts. The breaker keeps incidental work fast; it
/// never refuses what a user typed.
@Suite(
  "explicit remote commands probe an open breaker",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct RemoteProbeTests {
  /// `state` and `consecutiveFailures` of `remote status --json` for `shared`.
  static func breaker(_ store: String) throws -> (String?, Int?) {
    let shared = try #require(try RemoteReadThroughTests.status(store)["shared"])
    return (shared["state"] as? String, shared["consecutiveFailures"] as? Int)
  }

  @Test("remote back: push --all and push DIGEST go up at once; check and pull close the breaker")
  func probesOpenBreaker() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    let added = try RemoteTests.remote(
      store, ["add", "shared", nginx.url("/probe"), "--write", "off"])
    #expect(added.status == 0, "\(added.stderr)")
    let first = try RemoteTests.put(store, Bytes.random(20_000, seed: 4501), in: scratch)

    // Down: the push fails with the real error and opens the breaker.
    nginx.stop()
    let down = try RemoteTests.remote(store, ["push", "--all"])
    #expect(down.status == 69 && down.out == "", "\(down.stderr)")
    #expect(!down.stderr.contains("not asked"), "\(down.stderr)")
    #expect(try Self.breaker(store) == ("unavailable", 1))
    // Still down: asked again all the same, and the breaker stays open.
    let still = try RemoteTests.remote(store, ["push", "--all"])
    #expect(still.status == 69 && !still.stderr.contains("not asked"), "\(still.stderr)")
    #expect(try Self.breaker(store).0 == "unavailable")

    // Back: the queue goes up at once, and the breaker is closed.
    try nginx.start()
    let back = try RemoteTests.remote(store, ["push", "--all"])
    #expect(back.status == 0, "\(back.stderr)")
    #expect(back.out == "\(first)  uploaded to 'shared'\n")
    #expect(try Self.breaker(store) == ("available", 0))

    // A push of named digests, a check and a pull close it too.
    let second = try RemoteTests.put(store, Bytes.random(20_000, seed: 4502), in: scratch)
    for (i, command) in [
      ["push", second.description], ["check", "shared"], ["pull", first.description],
    ].enumerated() {
      // A pull asks only for what the store lacks.
      if i == 2 { #expect(try CLI.run(["--store", store, "rm", first.description]).status == 0) }
      nginx.stop()
      #expect(try RemoteTests.remote(store, command).status == 69, "\(command)")
      #expect(try Self.breaker(store).0 == "unavailable", "\(command)")
      try nginx.start()
      let run = try RemoteTests.remote(store, command)
      #expect(run.status == 0, "\(command): \(run.stderr)")
      #expect(try Self.breaker(store) == ("available", 0), "\(command)")
    }
    #expect(try CLI.run(["--store", store, "has", first.description]).status == 0)
  }

  @Test("the background push of a put (--if-idle) still skips a remote whose breaker is open")
  func backgroundPushSkips() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(
      try RemoteTests.remote(store, ["add", "shared", nginx.url("/bg"), "--write", "off"]).status
        == 0)
    _ = try RemoteTests.put(store, Bytes.random(5_000, seed: 4601), in: scratch)
    nginx.stop()
    #expect(try RemoteTests.remote(store, ["push"]).status == 69)
    try nginx.start()
    // Named: without --remote, --if-idle (the drain a put starts) passes over
    // an 'off' remote altogether.
    let background = try RemoteTests.remote(store, ["push", "--if-idle", "--remote", "shared"])
    #expect(background.status == 69, "\(background.stderr)")
    #expect(background.stderr.contains("remote 'shared' not asked: it failed lately"))
    #expect(try Self.breaker(store).0 == "unavailable")
  }
}
