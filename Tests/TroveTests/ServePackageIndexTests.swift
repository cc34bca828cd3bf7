import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The Python clients of the serve tests: `.build/test-venv`, which
/// `scripts/deps.sh test` makes with pip, uv and prometheus_client.
enum TestVenv {
  static let bin = repositoryRoot + "/.build/test-venv/bin/"
  static let pip = bin + "pip"
  static let uv = bin + "uv"
  static let python = bin + "python"
  static var hasPip: Bool { FileManager.default.isExecutableFile(atPath: pip) }
  static var hasUV: Bool { FileManager.default.isExecutableFile(atPath: uv) }
  static let missing = Comment(
    rawValue:
      "no .build/test-venv with pip: scripts/deps.sh test makes it (pip, uv, prometheus_client)")
}

/// A package index behind `trove serve`, as pip and uv use one: a PEP 503
/// index on one nginx (`--mirror pypi=…`) linking its wheels on a second
/// (`--mirror files=…`), as PyPI's pages link a second host.
@Suite(.enabled(if: Nginx.executable != nil && TestVenv.hasPip, TestVenv.missing))
struct ServePackageIndexTests {
  final class Setup {
    let scratch: Scratch
    let index: Nginx
    let files: Nginx
    let server: TroveServe
    /// Each wheel's file name and sha256, by project name.
    var wheels: [String: (file: String, sha256: String)] = [:]
    var store: String { scratch["store"] }
    var indexURL: String { server.url("m/pypi/simple/") }

    init() throws {
      scratch = try Scratch()
      index = try Nginx()
      files = try Nginx()
      let made = try Spawned(
        executable: "/usr/bin/python3",
        [
          repositoryRoot + "/Tests/Servers/make_index.py", index.files.path, files.files.path,
          files.url(""), "tinyone==1.0", "tinytwo==2.0",
        ], io: scratch["make-index"]
      ).wait()
      guard made.status == 0 else { throw TestFailure("make_index.py: \(made.stderr)") }
      for line in String(decoding: made.stdout, as: UTF8.self).split(separator: "\n") {
        let parts = line.split(separator: " ").map(String.init)
        wheels[String(parts[0].prefix { $0 != "-" })] = (parts[0], parts[1])
      }
      _ = try scratch.store()
      server = try TroveServe(
        store: scratch["store"],
        ["--mirror", "pypi=" + index.url(""), "--mirror", "files=" + files.url("")])
    }

    func wheelBytes(_ project: String) throws -> [UInt8] {
      try contents(files.files["packages/" + wheels[project]!.file])
    }

    /// `pip download --no-deps` of `project` into `folder`, from `index`
    /// (the mirror's by default), with `environment` (`http_proxy`).
    func pipDownload(
      _ project: String, into folder: String, index: String? = nil,
      environment: [String: String] = [:]
    ) throws -> Outcome {
      try Spawned(
        executable: TestVenv.pip,
        [
          "download", "--no-deps", "--no-cache-dir", "--disable-pip-version-check", "-d",
          scratch[folder], "--index-url", index ?? indexURL, project,
        ], io: scratch["pip-\(folder)"], environment: environment
      ).wait()
    }

    /// `uv pip install --no-deps --target` of `project` into `folder`.
    func uvInstall(_ project: String, into folder: String) throws -> Outcome {
      try Spawned(
        executable: TestVenv.uv,
        [
          "pip", "install", "--no-deps", "--no-cache", "--python", TestVenv.python, "--target",
          scratch[folder], "--index-url", indexURL, project,
        ], io: scratch["uv-\(folder)"]
      ).wait()
    }
  }

  @Test(
    "pip (and uv) get a package through /m/pypi/simple/ twice, the second time with both origins stopped; each wheel leaves its origin once; the page keeps its sha256 fragments"
  )
  func pipAndUVThroughTheMirror() throws {
    let setup = try Setup()
    let one = try #require(setup.wheels["tinyone"])
    let page = try curl([setup.indexURL + "tinyone/"])
    #expect(page.status == 200 && page.headers["content-type"] == "text/html")
    let text = String(decoding: page.body, as: UTF8.self)
    #expect(text.contains("href=\"/m/files/packages/\(one.file)#sha256=\(one.sha256)\""))
    #expect(!text.contains(setup.files.url("")))

    let first = try setup.pipDownload("tinyone", into: "pip1")
    #expect(first.status == 0, "\(first.stderr)")
    #expect(try contents(setup.scratch["pip1/" + one.file]) == setup.wheelBytes("tinyone"))
    let uvFirst = TestVenv.hasUV ? try setup.uvInstall("tinytwo", into: "uv1") : nil
    if let uvFirst { #expect(uvFirst.status == 0, "\(uvFirst.stderr)") }

    setup.index.stop()
    setup.files.stop()
    let second = try setup.pipDownload("tinyone", into: "pip2")
    #expect(second.status == 0, "\(second.stderr)")
    #expect(try contents(setup.scratch["pip2/" + one.file]) == setup.wheelBytes("tinyone"))
    if TestVenv.hasUV {
      let uvSecond = try setup.uvInstall("tinytwo", into: "uv2")
      #expect(uvSecond.status == 0, "\(uvSecond.stderr)")
      #expect(FileManager.default.fileExists(atPath: setup.scratch["uv2/tinytwo/__init__.py"]))
    }

    #expect(setup.files.requests("/packages/\(one.file)").count == 1)
    if TestVenv.hasUV {
      let two = try #require(setup.wheels["tinytwo"])
      #expect(setup.files.requests("/packages/\(two.file)").count == 1)
    }
    // The page again, from the store: its origin is gone.
    let stale = try curl([setup.indexURL + "tinyone/"])
    #expect(stale.status == 200 && stale.headers["x-trove-cache"] == "stale")
    #expect(stale.body == page.body)
  }

  @Test(
    "pip with http_proxy and the origins' own index URL: the page and the wheel go through the store (unrewritten), and the second download, both origins stopped, comes from it"
  )
  func pipThroughTheProxy() throws {
    let setup = try Setup()
    let one = try #require(setup.wheels["tinyone"])
    let index = setup.index.url("/simple/")
    let proxy = ["http_proxy": setup.server.url, "no_proxy": "", "NO_PROXY": ""]
    let first = try setup.pipDownload("tinyone", into: "pip1", index: index, environment: proxy)
    #expect(first.status == 0, "\(first.stderr)")
    #expect(try contents(setup.scratch["pip1/" + one.file]) == setup.wheelBytes("tinyone"))
    setup.index.stop()
    setup.files.stop()
    let second = try setup.pipDownload("tinyone", into: "pip2", index: index, environment: proxy)
    #expect(second.status == 0, "\(second.stderr)")
    #expect(try contents(setup.scratch["pip2/" + one.file]) == setup.wheelBytes("tinyone"))
    #expect(setup.files.requests("/packages/\(one.file)").count == 1)
    // The proxy's requests, as the access log names them: the page and the
    // wheel, twice each.
    let proxied = setup.server.accessLog().filter { $0.contains("\"GET http://") }
    #expect(proxied.count == 4, "\(proxied)")
  }

  @Test(
    "a wheel whose bytes are not the sha256 its page published is refused (502, pip fails) and not bound"
  )
  func publishedChecksumIsExpected() throws {
    let setup = try Setup()
    let one = try #require(setup.wheels["tinyone"])
    // Other bytes under the published name, after the page was written.
    try setup.files.files.write("packages/" + one.file, Bytes.random(900, seed: 81))
    let pip = try setup.pipDownload("tinyone", into: "pip")
    #expect(pip.status != 0)
    let direct = try curl([setup.server.url("m/files/packages/" + one.file)])
    #expect(direct.status == 502)
    #expect(String(decoding: direct.body, as: UTF8.self).contains(one.sha256))
    let keys = try trove(setup.store, ["keys"])
    #expect(!keys.out.contains(one.file))
  }

  @Test(
    "a PEP 691 JSON page gets its file URLs rewritten and hashes kept; a file whose sha256 the store holds is served with no request, whichever URL brought it"
  )
  func jsonPageAndStoredChecksum() throws {
    let setup = try Setup()
    let one = try #require(setup.wheels["tinyone"])
    // The same bytes, fetched from elsewhere with their sha256 expected.
    try setup.files.files.write("elsewhere.whl", setup.wheelBytes("tinyone"))
    try trove(
      setup.store, ["fetch", "--expect", "sha256:" + one.sha256, setup.files.url("/elsewhere.whl")])

    let page = try curl([setup.server.url("m/pypi/pep691/simple/tinyone/index.json")])
    #expect(page.status == 200)
    #expect(page.headers["content-type"] == "application/vnd.pypi.simple.v1+json")
    let json = try #require(
      try JSONSerialization.jsonObject(with: Data(page.body)) as? [String: Any])
    let file = try #require((json["files"] as? [[String: Any]])?.first)
    #expect(file["url"] as? String == "/m/files/packages/" + one.file)
    #expect((file["hashes"] as? [String: String])?["sha256"] == one.sha256)

    let wheel = try curl([setup.server.url("m/files/packages/" + one.file)])
    #expect(wheel.status == 200)
    #expect(try wheel.body == setup.wheelBytes("tinyone"))
    #expect(wheel.headers["x-trove-cache"] == "hit")
    #expect(setup.files.requests("/packages/" + one.file).isEmpty)
  }
}
