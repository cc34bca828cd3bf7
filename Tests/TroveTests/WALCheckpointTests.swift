import Foundation
import Testing

@testable import Trove

/// When the index's WAL is checkpointed: not at every command's end, only
/// by the last connection to close a WAL of ``Index/walCloseLimit`` or more
/// — a reader's close too, whoever grew it.
@Suite("the index's WAL: left with frames by a command, checkpointed once large")
struct WALCheckpointTests {
  @Test(
    "a command leaves its frames in the WAL; a reader closing a WAL of 256 KiB or more empties it")
  func closeCheckpointsOnlyLargeWAL() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let input = try scratch.write("in", Bytes.random(5000, seed: 3101))
    #expect(try CLI.run(["--store", store, "put", input]).status == 0)
    let left = try fileStatus(store + "/index.sqlite-wal").size
    #expect(left > 0 && left < Index.walCloseLimit, "\(left) bytes")
    // Another writer grows the WAL past the limit and dies before any checkpoint.
    let python = try #require(FaultServer.python, FaultServer.missing)
    let script = """
      import os, sqlite3, sys
      c = sqlite3.connect(sys.argv[1])
      c.execute("PRAGMA wal_autocheckpoint=0")
      c.execute("CREATE TABLE IF NOT EXISTS test_filler(b BLOB)")
      c.execute("INSERT INTO test_filler VALUES (zeroblob(400000))")
      c.commit()
      os._exit(0)
      """
    let grow = try CLI.run([], prefix: [python, "-c", script, store + "/index.sqlite"])
    #expect(grow.status == 0, "\(grow.stderr)")
    #expect(try fileStatus(store + "/index.sqlite-wal").size >= Index.walCloseLimit)
    let ls = try CLI.run(["--store", store, "ls"])
    #expect(ls.status == 0, "\(ls.stderr)")
    #expect(try fileStatus(store + "/index.sqlite-wal").size == 0, "checkpointed and emptied")
    #expect(try CLI.run(["--store", store, "verify"]).status == 0)
  }
}
