import Foundation
import Testing

@testable import Trove

/// `trove get` of many objects in one process:
/// `get D1 D2 … -C DIR` and `get --from FILE`; every name resolved and
/// every destination checked before anything is written.
@Suite("get many")
struct GetManyTests {
  /// A store holding three small objects: one under a URL key, one under
  /// a plain key, one under none. Returns the store and their digests.
  func filledStore(_ scratch: Scratch) throws -> (String, [BlobDigest]) {
    let store = scratch["store"]
    var digests: [BlobDigest] = []
    for (i, key) in ["https://example.org/dist/tool-1.2.tar.gz?sig=abc#top", "models/base", nil]
      .enumerated()
    {
      let file = try scratch.write("in\(i)", Array("object \(i)\n".utf8))
      let put = try CLI.run(
        ["--store", store, "put"] + (key.map { ["--key", $0] } ?? []) + [file])
      #expect(put.status == 0, "\(put.stderr)")
      digests.append(XXH3Hasher.digest(try contents(file)))
    }
    try FileManager.default.createDirectory(
      atPath: scratch["out"], withIntermediateDirectories: false)
    return (store, digests)
  }

  @Test("-C names each file after its key's last path component, else the digest's hex")
  func intoDirectory() throws {
    let scratch = try Scratch()
    let (store, digests) = try filledStore(scratch)
    let run = try CLI.run([
      "--store", store, "get", "-q", "-C", scratch["out"],
      "https://example.org/dist/tool-1.2.tar.gz?sig=abc#top", "models/base",
      digests[2].description,
    ])
    #expect(run.status == 0 && run.stderr.isEmpty && run.out.isEmpty, "\(run.stderr)")
    #expect(scratch.list("out") == ["base", digests[2].hex, "tool-1.2.tar.gz"].sorted())
    #expect(try contents(scratch["out/tool-1.2.tar.gz"]) == Array("object 0\n".utf8))
    #expect(try contents(scratch["out/base"]) == Array("object 1\n".utf8))
    #expect(try contents(scratch["out/\(digests[2].hex)"]) == Array("object 2\n".utf8))
  }

  @Test("a key with no usable last component (a bare host, '..') is named by its digest")
  func unusableKeyNames() throws {
    let scratch = try Scratch()
    let (store, digests) = try filledStore(scratch)
    let keys = [
      ("https://example.org/", digests[2].hex), ("a/..", digests[1].hex),
      ("http://h/a/b.whl?x=/y", "b.whl"), ("pkg-1.0", "pkg-1.0"),
    ]
    for (key, name) in keys {
      let input = key == "a/.." ? scratch["in1"] : scratch["in2"]
      #expect(try CLI.run(["--store", store, "put", "--key", key, input]).status == 0)
      let run = try CLI.run(["--store", store, "get", "-q", "-C", scratch["out"], key])
      #expect(run.status == 0, "\(key): \(run.stderr)")
      #expect(FileManager.default.fileExists(atPath: scratch["out/\(name)"]), "\(key)")
    }
    #expect(scratch.list("out").count == 4)
  }

  @Test("--from reads 'DIGEST-OR-KEY DESTINATION' lines, skipping blank lines and comments")
  func fromList() throws {
    let scratch = try Scratch()
    let (store, digests) = try filledStore(scratch)
    let list = """
      # inputs of the benchmark

        \(digests[0])   \(scratch["out/first file"])\t
      models/base \(scratch["out/second"])\r
      \t# indented comment
      \(digests[2]) \(scratch["out/third"])
      """
    let listPath = try scratch.write("list", Array(list.utf8))
    let run = try CLI.run(["--store", store, "get", "-q", "--from", listPath])
    #expect(run.status == 0 && run.stderr.isEmpty, "\(run.stderr)")
    #expect(scratch.list("out") == ["first file", "second", "third"])
    #expect(try contents(scratch["out/second"]) == Array("object 1\n".utf8))
    // The same list from standard input.
    let again = try CLI.run(
      ["--store", store, "get", "-q", "--force", "--from", "-"], stdin: Array(list.utf8))
    #expect(again.status == 0 && again.stderr.isEmpty, "\(again.stderr)")
    #expect(scratch.list("out") == ["first file", "second", "third"])
  }

  @Test("a malformed line is a usage error naming FILE:LINE, and nothing is written")
  func malformedLine() throws {
    let scratch = try Scratch()
    let (store, digests) = try filledStore(scratch)
    for (bad, message) in [
      ("models/base", "expected 'DIGEST-OR-KEY DESTINATION'"),
      ("xxh128:zz \(scratch["out/b"])", "xxh128:zz"),
      ("sha256:abc \(scratch["out/b"])", "sha256:abc"),
      ("models/base -", "'-' (standard output) cannot be one of many destinations"),
    ] {
      let list = try scratch.write(
        "list", Array("\(digests[0]) \(scratch["out/a"])\n\n\(bad)\n".utf8))
      let run = try CLI.run(["--store", store, "get", "--from", list])
      #expect(run.status == 64, "\(bad): \(run.stderr)")
      #expect(run.errorLines.first?.hasPrefix("Error: \(list):3: ") ?? false, "\(run.stderr)")
      #expect(run.stderr.contains(message), "\(run.stderr)")
      #expect(scratch.list("out").isEmpty)
    }
    let empty = try scratch.write("empty", Array("# nothing\n\n".utf8))
    let run = try CLI.run(["--store", store, "get", "--from", empty])
    #expect(run.status == 64 && run.stderr.contains("names no object"), "\(run.stderr)")
    let missing = try CLI.run(["--store", store, "get", "--from", scratch["nope"]])
    #expect(missing.status == 66 && missing.stderr.contains(scratch["nope"]), "\(missing.stderr)")
  }

  @Test("an unknown key or digest fails (exit 1, as a single get) before anything is written")
  func unknownReference() throws {
    let scratch = try Scratch()
    let (store, digests) = try filledStore(scratch)
    let absent = XXH3Hasher.digest(Array("not stored".utf8))
    let single = try CLI.run(["--store", store, "get", absent.description, scratch["single"]])
    for reference in ["https://example.org/unknown", absent.description] {
      let run = try CLI.run([
        "--store", store, "get", "-C", scratch["out"], digests[0].description, reference,
      ])
      #expect(run.status == single.status && run.status == 1, "\(run.stderr)")
      #expect(run.errorLines.count == 1 && run.stderr.contains(reference), "\(run.stderr)")
      #expect(scratch.list("out").isEmpty)
    }
  }

  @Test("an existing destination is refused (73) before anything is written, unless --force")
  func existingDestination() throws {
    let scratch = try Scratch()
    let (store, digests) = try filledStore(scratch)
    try scratch.write("out/base", Array("mine\n".utf8))
    let arguments = [
      "--store", store, "get", "-q", "-C", scratch["out"], digests[0].description, "models/base",
    ]
    let run = try CLI.run(arguments)
    #expect(run.status == 73, "\(run.stderr)")
    #expect(run.errorLines == ["Error: cannot write '\(scratch["out/base"])': it already exists"])
    #expect(scratch.list("out") == ["base"])
    #expect(try contents(scratch["out/base"]) == Array("mine\n".utf8))
    let forced = try CLI.run(arguments + ["--force"])
    #expect(forced.status == 0, "\(forced.stderr)")
    #expect(try contents(scratch["out/base"]) == Array("object 1\n".utf8))
    #expect(scratch.list("out").count == 2)
    // One destination named twice is refused before anything is written.
    let twice = try CLI.run([
      "--store", store, "get", "--force", "-C", scratch["out"], "models/base", "models/base",
    ])
    #expect(twice.status == 64 && twice.stderr.contains("named more than once"), "\(twice.stderr)")
    // Also when spelled differently: `out/x`, `out/./x` and a link to `out`
    // name one file.
    try FileManager.default.createSymbolicLink(
      atPath: scratch["link"], withDestinationPath: scratch["out"])
    let list = try scratch.write(
      "list",
      Array(
        "models/base \(scratch["out/x"])\n\(digests[2]) \(scratch["out"])/./x\n\(digests[1]) \(scratch["link"])/x\n"
          .utf8))
    let spelled = try CLI.run(["--store", store, "get", "--force", "--from", list])
    #expect(
      spelled.status == 64 && spelled.stderr.contains("named more than once"), "\(spelled.stderr)")
    #expect(!FileManager.default.fileExists(atPath: scratch["out/x"]))
  }

  @Test("--json prints an array of get's records; without -C or --from get is as before")
  func json() throws {
    let scratch = try Scratch()
    let (store, digests) = try filledStore(scratch)
    let run = try CLI.run([
      "--store", store, "get", "-q", "--json", "--mode", "copy", "-C", scratch["out"],
      "models/base", digests[2].description,
    ])
    #expect(run.status == 0, "\(run.stderr)")
    let records = try #require(
      try JSONSerialization.jsonObject(with: Data(run.stdout)) as? [[String: Any]])
    #expect(records.count == 2)
    #expect(
      records.map { $0["destination"] as? String } == [
        scratch["out/base"], scratch["out/\(digests[2].hex)"],
      ])
    #expect(
      records.map { $0["digest"] as? String } == [digests[1].description, digests[2].description])
    #expect(records.allSatisfy { $0["method"] as? String == "copy" && $0["size"] as? Int == 9 })
    #expect(
      records.allSatisfy {
        Set(["destination", "digest", "method", "size"]).isSubset(of: $0.keys)
      })
    // A single get keeps its shape: one object, not an array.
    let single = try CLI.run([
      "--store", store, "get", "--json", "--mode", "copy", "models/base", scratch["one"],
    ])
    #expect(single.status == 0)
    #expect(try JSONSerialization.jsonObject(with: Data(single.stdout)) is [String: Any])
    let three = try CLI.run(["--store", store, "get", "models/base", scratch["a"], scratch["b"]])
    #expect(three.status == 64 && three.stderr.contains("Unexpected argument"), "\(three.stderr)")
  }
  @Test("a failure of one of many gets names its destination; get --from a missing list says why")
  func getManyNamesDestination() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = try scratch.write("f", Bytes.random(5000, seed: 4))
    let digest = XXH3Hasher.digest(try contents(file))
    #expect(try CLI.run(["--store", store, "put", file]).status == 0)
    try FileManager.default.createDirectory(
      atPath: scratch["out"], withIntermediateDirectories: true)
    // The object cannot be read: the message names the file not made.
    let run = try CLI.run(
      ["--store", store, "get", "--mode", "copy", digest.description, "-C", scratch["out"]],
      environment: ["TROVE_INJECT_FAULT": "read:5:2"])
    #expect(run.status == 74, "\(run.stderr)")
    #expect(
      run.errorLines.count == 1
        && run.stderr.hasPrefix("Error: cannot write '\(scratch["out"])/\(digest.hex)': "),
      "\(run.stderr)")
    let missing = try CLI.run(["--store", store, "get", "--from", scratch["nofile"]])
    #expect(missing.status == 66, "\(missing.stderr)")
    #expect(
      missing.stderr == "Error: cannot read '\(scratch["nofile"])': No such file or directory\n")
    let folder = try CLI.run(["--store", store, "get", "--from", scratch["out"]])
    #expect(folder.status == 66 && folder.stderr.contains("Is a directory"), "\(folder.stderr)")
  }

}
