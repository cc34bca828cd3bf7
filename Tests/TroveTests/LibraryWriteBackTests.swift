import Foundation
import Synchronization
import Testing

@testable import Trove

/// Write-back is the library's: a program that embeds Trove and puts or
/// fetches sends what it stores to the store's writable remotes as the
/// `trove` command does, with no `trove` process involved. Against real
/// nginx (WebDAV) on 127.0.0.1.
@Suite(
  "write-back from the library",
  .enabled(if: Nginx.executable != nil, Nginx.missing))
struct LibraryWriteBackTests {
  /// Waits up to 20 s for `path` to exist; whether it does.
  func appears(_ path: String) -> Bool {
    let deadline = Date().addingTimeInterval(20)
    while !FileManager.default.fileExists(atPath: path) && Date() < deadline { usleep(20_000) }
    return FileManager.default.fileExists(atPath: path)
  }

  @Test("sync: put(bytes:), put(file:) and a writer's commit have uploaded when they return")
  func syncWriteBack() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = try Store(StoreConfiguration(root: scratch["store"]))
    try store.addRemote(RemoteSpec(name: "shared", url: nginx.url("/lib"), write: .sync))
    let first = try store.put(bytes: Bytes.random(20_000, seed: 2001))
    #expect(
      FileManager.default.fileExists(
        atPath: RemoteWriteBackTests.blob(nginx, "lib", first.digest)))
    let file = try scratch.write("in.bin", Bytes.random(30_000, seed: 2002))
    let second = try store.put(file: file)
    #expect(
      FileManager.default.fileExists(
        atPath: RemoteWriteBackTests.blob(nginx, "lib", second.digest)))
    let writer = try store.makeWriter()
    try writer.write(Bytes.random(40_000, seed: 2003))
    let third = try writer.commit()
    #expect(
      FileManager.default.fileExists(
        atPath: RemoteWriteBackTests.blob(nginx, "lib", third.digest)))
  }

  @Test(
    "async without a hook: a thread of the process drains the queue; with writesBack off, nothing goes"
  )
  func asyncWriteBackInProcess() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = try Store(StoreConfiguration(root: scratch["store"]))
    try store.addRemote(RemoteSpec(name: "shared", url: nginx.url("/bg")))
    let put = try store.put(bytes: Bytes.random(50_000, seed: 2004))
    #expect(appears(RemoteWriteBackTests.blob(nginx, "bg", put.digest)))

    let quiet = try Store(StoreConfiguration(root: scratch["store"], writesBack: false))
    let kept = try quiet.put(bytes: Bytes.random(50_000, seed: 2005))
    usleep(300_000)
    #expect(
      !FileManager.default.fileExists(atPath: RemoteWriteBackTests.blob(nginx, "bg", kept.digest)))
    #expect(try quiet.uploadQueued().contains { $0.digest == kept.digest && $0.error == nil })
  }

  @Test("async with a hook: the embedding program starts the drain, once per call")
  func asyncWriteBackThroughTheHook() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let started = Mutex<[String]>([])
    let root = scratch["store"]
    let store = try Store(
      StoreConfiguration(
        root: root,
        startsBackgroundUpload: { root in
          started.withLock { $0.append(root) }
          return nil
        }))
    try store.addRemote(RemoteSpec(name: "shared", url: nginx.url("/hook")))
    let files = try (0..<3).map {
      try scratch.write("f\($0)", Bytes.random(9_000, seed: 2010 + UInt64($0)))
    }
    let results = try store.put(files: files)
    #expect(results.allSatisfy { (try? $0.get()) != nil })
    #expect(started.withLock { $0 } == [root], "one drain for one put of many files")
    // The hook started nothing: the objects wait in the queue.
    let digests = try results.map { try $0.get().digest }
    for digest in digests {
      #expect(
        !FileManager.default.fileExists(atPath: RemoteWriteBackTests.blob(nginx, "hook", digest)))
    }
    let pushed = try store.uploadQueued()
    #expect(Set(pushed.compactMap(\.digest)) == Set(digests))
  }

  @Test("the drain a put starts passes over a remote written back only on push (off)")
  func offRemotesWaitForAPush() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = try Store(StoreConfiguration(root: scratch["store"]))
    try store.addRemote(RemoteSpec(name: "on", url: nginx.url("/on")))
    try store.addRemote(RemoteSpec(name: "later", url: nginx.url("/later"), write: .off))
    let put = try store.put(bytes: Bytes.random(30_000, seed: 2020))
    #expect(appears(RemoteWriteBackTests.blob(nginx, "on", put.digest)))
    let deadline = Date().addingTimeInterval(5)
    while store.writeBack.isDraining && Date() < deadline { usleep(20_000) }
    #expect(
      !FileManager.default.fileExists(atPath: RemoteWriteBackTests.blob(nginx, "later", put.digest))
    )
    let pushed = try store.uploadQueued(to: "later")
    #expect(pushed.map(\.digest) == [put.digest])
  }
}
