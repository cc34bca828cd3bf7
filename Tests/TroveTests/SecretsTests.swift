import Foundation
import Testing

@testable import Trove

#if canImport(Glibc)
  import Glibc
#endif

/// The paths of regular files under `root` whose bytes hold `needle`.
func files(under root: String, holding needle: String) -> [String] {
  let wanted = Data(needle.utf8)
  var found: [String] = []
  guard let walk = FileManager.default.enumerator(atPath: root) else { return [] }
  while let name = walk.nextObject() as? String {
    let path = root + "/" + name
    guard (try? fileStatus(path))?.isRegular == true,
      let data = try? Data(contentsOf: URL(fileURLWithPath: path))
    else { continue }
    if data.range(of: wanted) != nil { found.append(path) }
  }
  return found
}

/// Credentials reach the server the user named and nothing else: no key,
/// record, file, listing, error line or remote holds them, and a store's
/// files cannot pick which of the user's secrets go where.
@Suite(
  "secrets: credentials never stored, printed or sent where the user did not ask",
  .enabled(if: FaultServer.python != nil, FaultServer.missing))
struct SecretsTests {
  static let password = "S3cretPW"

  static func fetch(_ store: String, _ arguments: [String], environment: [String: String] = [:])
    throws -> CLI.Result
  {
    try CLI.run(["--store", store, "fetch"] + arguments, environment: environment)
  }

  /// `url` with `login@` after its scheme.
  static func with(_ login: String, _ url: String) -> String {
    url.replacingOccurrences(of: "http://", with: "http://\(login)@")
  }

  @Test(
    "a login in a fetch URL goes to its server; the key, index, log, listings and errors hold the URL without it"
  )
  func loginInFetchURL() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let bare = server.url("/headers/x")
    let fetched = try Self.fetch(store, ["--json", Self.with("alice:\(Self.password)", bare)])
    #expect(fetched.status == 0, "\(fetched.stderr)")
    let records = try JSONSerialization.jsonObject(with: Data(fetched.stdout)) as? [[String: Any]]
    #expect(records?.first?["url"] as? String == bare, "\(fetched.out)")
    let digest = try #require(records?.first?["digest"] as? String)
    // The server got the login (its answer is the request's header lines).
    let body = String(decoding: try trove(store, ["get", digest, "-"]).stdout, as: UTF8.self)
    let basic = Data("alice:\(Self.password)".utf8).base64EncodedString()
    #expect(body.contains("Authorization: Basic \(basic)"), "\(body)")
    let keys = try trove(store, ["keys"])
    #expect(keys.out.contains(bare) && !keys.out.contains(Self.password), "\(keys.out)")
    #expect(try scratch.store().binding(forKey: bare)?.digest.description == digest)

    let missing = Self.with("alice:\(Self.password)", server.url("/status/404"))
    let failed = try Self.fetch(store, [missing])
    #expect(failed.status == 1 && failed.errorLines.count == 1, "\(failed.stderr)")
    #expect(failed.stderr.contains("'\(server.url("/status/404"))'"), "\(failed.stderr)")
    let failedJSON = try Self.fetch(store, ["--json", missing])
    #expect(failedJSON.status == 1)
    #expect(!(failed.stderr + failedJSON.out + failedJSON.stderr).contains(Self.password))
    #expect(files(under: store, holding: Self.password).isEmpty)
  }

  @Test(
    "--auth-env and ~/.netrc give a fetch its credential: user:password as Basic, a token as Bearer"
  )
  func fetchCredentialSources() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    func sent(_ path: String, _ options: [String], _ environment: [String: String]) throws
      -> String
    {
      let run = try Self.fetch(
        store, ["-o", "-"] + options + [server.url(path)], environment: environment)
      #expect(run.status == 0, "\(run.stderr)")
      return run.out
    }
    let login = try sent(
      "/headers/a", ["--auth-env", "TROVE_FETCH_LOGIN"], ["TROVE_FETCH_LOGIN": "bob:pw2"])
    #expect(login.contains("Authorization: Basic \(Data("bob:pw2".utf8).base64EncodedString())"))
    let token = try sent("/headers/b", ["--auth-env", "MY_TOKEN"], ["MY_TOKEN": "tok3n"])
    #expect(token.contains("Authorization: Bearer tok3n"), "\(token)")
    let home = scratch["home"]
    try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false)
    try scratch.write("home/.netrc", Array("machine 127.0.0.1 login carol password pw4\n".utf8))
    #expect(chmod(home + "/.netrc", 0o600) == 0)
    let netrc = try sent("/headers/c", [], ["HOME": home])
    #expect(
      netrc.contains("Authorization: Basic \(Data("carol:pw4".utf8).base64EncodedString())"),
      "\(netrc)")
    let unset = try Self.fetch(
      store, ["--auth-env", "TROVE_NOT_SET_ANYWHERE", server.url("/headers/d")])
    #expect(unset.status == 78 && unset.errorLines.count == 1, "\(unset.stderr)")
    // The bodies echo the headers; the key and the index hold no credential.
    let keys = try trove(store, ["keys"])
    #expect(!keys.out.contains("tok3n") && !keys.out.contains("pw2"), "\(keys.out)")
  }

  @Test(
    "a key record holding a login is never pushed: a warning names the key without it",
    .enabled(if: Nginx.executable != nil, Nginx.missing))
  func recordWithLoginNotPushed() throws {
    let nginx = try Nginx(webDAV: true)
    let scratch = try Scratch()
    let store = scratch["store"]
    // Keys an older version made from fetch URLs with their login.
    let file = try scratch.write("in", Bytes.random(5_000, seed: 3))
    try trove(store, ["put", "--key", "http://alice:\(Self.password)@example.com/x", file])
    try trove(store, ["put", "--key", "plain-key", file])
    try trove(store, ["remote", "add", "shared", nginx.url("/shared"), "--write", "off"])
    let digest = XXH3Hasher.digest(try contents(file)).description
    let push = try CLI.run(["--store", store, "remote", "push", digest])
    #expect(push.status == 0, "\(push.stderr)")
    #expect(
      push.stderr.contains("'http://example.com/x' is not pushed")
        && !push.stderr.contains(Self.password), "\(push.stderr)")
    #expect(files(under: nginx.files.path, holding: Self.password).isEmpty)
    #expect(!files(under: nginx.files.path, holding: "plain-key").isEmpty)
  }

  @Test(
    "redaction cuts a password holding '@' whole; a URL's login ends at the authority's last '@'")
  func redaction() throws {
    #expect(
      RemoteSpec.redacted("https://alice:p@ss@cache.example/x")
        == "https://***@cache.example/x")
    #expect(
      RemoteSpec.redacted("https://alice:pw@cache.example/a@b")
        == "https://***@cache.example/a@b")
    #expect(RemoteSpec.redacted("https://cache.example/a@b") == "https://cache.example/a@b")
    let split = URLUserinfo.split("http://alice:p%40ss@h:8/x?y=@")
    #expect(split.url == "http://h:8/x?y=@" && split.login == "alice:p@ss")
    #expect(URLUserinfo.split("http://h/a@b").login == nil)
    let wide = URLUserinfo.split("https://bøb:pé@hôst.example/ü@x")
    #expect(wide.url == "https://hôst.example/ü@x" && wide.login == "bøb:pé")
    #expect(URLUserinfo.redacted("https://bøb:pé@hôst.example/") == "https://***@hôst.example/")
    // Through the CLI: no part of the password in the error.
    let scratch = try Scratch()
    let added = try CLI.run([
      "--store", scratch["store"], "remote", "add", "pw", "https://alice:p@ss@cache.example/x",
    ])
    #expect(added.status == 64, "\(added.stderr)")
    #expect(added.errorLines.first?.contains("'https://***@cache.example/x'") == true)
    #expect(!added.stderr.contains("ss@"), "\(added.stderr)")
  }

  @Test(
    "remote add lends the credential in the user's own file, never the store's: any variable, file 0600 in a 0700 folder; a remotes.json naming another URL and an auth-env sends nothing"
  )
  func credentialBindingsOutsideTheStore() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let config = scratch["config"]
    let environment = ["XDG_CONFIG_HOME": config, "GITHUB_TOKEN": "gh-secret"]
    func run(_ arguments: [String]) throws -> CLI.Result {
      try CLI.run(["--store", store] + arguments, environment: environment)
    }
    let added = try run([
      "remote", "add", "gh", server.url("/headers/gh"), "--auth-env", "GITHUB_TOKEN", "--write",
      "off",
    ])
    #expect(added.status == 0, "\(added.stderr)")
    let list = try String(contentsOfFile: store + "/remotes.json", encoding: .utf8)
    #expect(!list.contains("GITHUB_TOKEN") && !list.contains("auth-env"), "\(list)")
    let bindings = config + "/trove/credentials.json"
    let text = try String(contentsOfFile: bindings, encoding: .utf8)
    #expect(text.contains("GITHUB_TOKEN") && text.contains(server.url("/headers/gh")), "\(text)")
    #expect(try fileStatus(bindings).mode & 0o7777 == 0o600)
    #expect(try fileStatus(config + "/trove").mode & 0o7777 == 0o700)
    #expect(try run(["remote", "ls"]).out.contains("auth-env GITHUB_TOKEN"))
    _ = try run(["remote", "check", "gh"])
    #expect(server.headerLog().contains { $0.contains("Authorization: Bearer gh-secret") })

    // A file someone else wrote (an older version's, a restored cache's),
    // naming their URL with the variable.
    let other = scratch["other"]
    try trove(other, ["put", try scratch.write("in", [1, 2, 3])])
    let file = """
      {"format": 1, "remotes": [{"name": "gh", "url": "\(server.url("/headers/evil"))", "read-only": true, "auth-env": "GITHUB_TOKEN"}]}
      """
    try scratch.write("other/remotes.json", Array(file.utf8))
    let check = try CLI.run(
      ["--store", other, "remote", "check", "gh"], environment: environment)
    #expect(!check.stderr.contains("gh-secret"), "\(check.stderr)")
    let evil = server.headerLog().filter { $0.contains("/headers/evil") }
    #expect(!evil.isEmpty && !evil.joined().contains("gh-secret"), "\(evil)")
    #expect(
      try CLI.run(["--store", other, "remote", "ls"], environment: environment).out
        .contains("auth-env") == false)

    // Bindings others may write lend nothing, in one line naming the file.
    #expect(chmod(bindings, 0o666) == 0)
    let refused = try run(["remote", "check", "gh"])
    #expect(refused.status == 78 && refused.errorLines.count == 1, "\(refused.stderr)")
    #expect(refused.stderr.contains("'\(bindings)' is writable by users other than its owner"))
  }

  @Test(
    "remote login lends a remote someone else added the user's credential, logout takes it back; rm keeps it for the URL"
  )
  func loginAndLogout() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = scratch["store"]
    let file = """
      {"format": 1, "remotes": [{"name": "team", "url": "\(server.url("/headers/team"))", "read-only": true}]}
      """
    try trove(store, ["put", try scratch.write("in", [1, 2, 3])])
    try scratch.write("store/remotes.json", Array(file.utf8))
    let environment = ["XDG_CONFIG_HOME": scratch["config"], "TEAM_TOKEN": "t0ken"]
    func run(_ arguments: [String]) throws -> CLI.Result {
      try CLI.run(["--store", store] + arguments, environment: environment)
    }
    func sent() -> Int { server.headerLog().filter { $0.contains("Bearer t0ken") }.count }
    _ = try run(["remote", "check", "team"])
    #expect(sent() == 0, "\(server.headerLog())")
    let login = try run(["remote", "login", "team", "--auth-env", "TEAM_TOKEN"])
    #expect(login.status == 0 && login.out.contains("from TEAM_TOKEN"), "\(login.stderr)")
    _ = try run(["remote", "check", "team"])
    #expect(sent() > 0, "\(server.headerLog())")
    let json = try run(["remote", "ls", "--json"]).out
    #expect(json.contains("\"credentialsLent\" : true"), "\(json)")
    let logout = try run(["remote", "logout", "team"])
    #expect(logout.status == 0 && logout.out.contains("gets none"), "\(logout.stderr)")
    let before = sent()
    _ = try run(["remote", "check", "team"])
    #expect(sent() == before, "\(server.headerLog())")
    let bad = try run(["remote", "login", "team", "--auth-env", "NOT-A-NAME"])
    #expect(bad.status == 64 && bad.errorLines.count >= 1, "\(bad.stderr)")
    // A remote refusing a request sent without credentials: the line says how to lend one.
    let file401 = """
      {"format": 1, "remotes": [{"name": "locked", "url": "\(server.url("/status/401"))", "read-only": true}]}
      """
    try scratch.write("store/remotes.json", Array(file401.utf8))
    let locked = try run(["remote", "check", "locked"])
    #expect(locked.status == 69 && locked.errorLines.count == 1, "\(locked.stderr)")
    #expect(
      locked.stderr.contains("HTTP 401")
        && locked.stderr.contains("'trove remote login locked [--auth-env VAR]'"),
      "\(locked.stderr)")
    let missing = try run(["remote", "login", "nope"])
    #expect(missing.status == 1 && missing.stderr.contains("no remote 'nope'"), "\(missing.stderr)")
  }

  @Test(
    "a credential about to cross a network in clear (http:// or redis:// off this machine) is warned about first"
  )
  func credentialInClearWarned() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    // 192.0.2.1 (TEST-NET-1) is never this machine; nothing answers there.
    for (name, url) in [("web", "http://192.0.2.1:9/cache"), ("mem", "redis://192.0.2.1:9")] {
      try trove(
        store, ["remote", "add", name, url, "--auth-env", "TROVE_T", "--write", "off"])
      let check = try CLI.run(
        ["--store", store, "remote", "check", name], environment: ["TROVE_T": "t0ken"])
      #expect(check.status == 69, "\(check.stderr)")
      let scheme = url.prefix { $0 != ":" }
      #expect(
        check.errorLines.first?.hasPrefix(
          "trove: warning: remote '\(name)': its credential goes over plain \(scheme)://") == true,
        "\(check.stderr)")
      #expect(!check.stderr.contains("t0ken"))
    }
    let fetch = try Self.fetch(
      store,
      [
        "--auth-env", "TROVE_T", "--connect-timeout", "0.3", "--retries", "0",
        "http://192.0.2.1:9/x",
      ],
      environment: ["TROVE_T": "t0ken"])
    #expect(fetch.status != 0)
    #expect(
      fetch.errorLines.first?.hasPrefix(
        "trove: warning: fetch 'http://192.0.2.1:9/x': its credential goes over plain http://")
        == true,
      "\(fetch.stderr)")
    // Loopback and https:// cross no network in clear.
    #expect(HTTPOrigin("http://127.0.0.1:8/x")?.exposesCredentials == false)
    #expect(HTTPOrigin("http://localhost/x")?.exposesCredentials == false)
    #expect(HTTPOrigin("http://[::1]:8/x")?.exposesCredentials == false)
    #expect(HTTPOrigin("https://cache.example/x")?.exposesCredentials == false)
    #expect(HTTPOrigin("http://cache.example/x")?.exposesCredentials == true)
  }

  @Test("a FIFO in place of remotes.json is refused in one line, never waited on")
  func remotesFIFO() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    try trove(store, ["put", try scratch.write("in", [1, 2, 3])])
    #expect(mkfifo(store + "/remotes.json", 0o644) == 0)
    let ls = try CLI.run(["--store", store, "remote", "ls"])
    #expect(ls.status == 78 && ls.errorLines.count == 1, "\(ls.stderr)")
    #expect(ls.stderr.contains("not a regular file"), "\(ls.stderr)")
  }

  @Test("an empty 0755 folder adopted as a store becomes 0700, as its access says")
  func adoptedFolderMode() throws {
    let scratch = try Scratch()
    let store = scratch["store"]
    #expect(mkdir(store, 0o755) == 0 && chmod(store, 0o755) == 0)
    try trove(store, ["put", try scratch.write("in", [1, 2, 3])])
    #expect(try fileStatus(store).mode & 0o7777 == 0o700)
    #expect(try trove(store, ["config", "get", "access"]).out == "private\n")
  }
}

/// A group store's `remotes.json` is written by whichever member last
/// changed it: its credential bindings hold only for that member (or for
/// every member when root owns the file). Run as root, which starts `trove`
/// as the members with setpriv.
@Suite(
  "shared stores: one member's remotes.json cannot send another's credential", .serialized,
  .enabled(
    if: TestFilesystems.isRoot && TestFilesystems.setprivAvailable && FaultServer.python != nil,
    "needs root, setpriv and python3"))
struct SharedCredentialTests {
  @Test(
    "a member's credential goes only where that member lent it: alice's remote add lends bob nothing, his login lends his own"
  )
  func otherMembersBinding() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = try groupStore(scratch)
    func check(_ user: [String], _ secret: String) throws -> CLI.Result {
      try CLI.run(
        ["--store", store, "remote", "check", "team"],
        environment: ["TROVE_TEAM_TOKEN": secret], prefix: user)
    }
    let added = try CLI.run(
      [
        "--store", store, "remote", "add", "team", server.url("/headers/team"), "--auth-env",
        "TROVE_TEAM_TOKEN", "--write", "off",
      ], prefix: AccessTests.alice)
    #expect(added.status == 0, "\(added.stderr)")

    _ = try check(AccessTests.bob, "bob-secret")
    #expect(!server.headerLog().joined().contains("bob-secret"), "\(server.headerLog())")
    _ = try check(AccessTests.alice, "alice-secret")
    #expect(server.headerLog().contains { $0.contains("Authorization: Bearer alice-secret") })

    let login = try CLI.run(
      ["--store", store, "remote", "login", "team", "--auth-env", "TROVE_TEAM_TOKEN"],
      prefix: AccessTests.bob)
    #expect(login.status == 0, "\(login.stderr)")
    _ = try check(AccessTests.bob, "bob-secret")
    #expect(server.headerLog().contains { $0.contains("Authorization: Bearer bob-secret") })
  }

  /// A group store at `scratch["store"]` (root's, the team's, 2770).
  func groupStore(_ scratch: Scratch) throws -> String {
    #expect(chmod(scratch.path, 0o755) == 0)
    let store = scratch["store"]
    try FileManager.default.createDirectory(atPath: store, withIntermediateDirectories: false)
    #expect(chown(store, 0, AccessTests.team) == 0 && chmod(store, 0o2770) == 0)
    return store
  }

  /// Has alice put `text` (bytes bob chose) and bob rename her object
  /// over `name` in `store`: a regular file alice owns.
  func plantAlicesObject(_ text: String, as name: String, in store: String, _ scratch: Scratch)
    throws
  {
    let input = try scratch.write("given", Array(text.utf8))
    #expect(chmod(input, 0o644) == 0)
    let put = try CLI.run(["--store", store, "put", input], prefix: AccessTests.alice)
    #expect(put.status == 0, "\(put.stderr)")
    let object = store + "/objects/" + StoreLayout.objectPath(XXH3Hasher.digest(Array(text.utf8)))
    #expect(try Data(contentsOf: URL(fileURLWithPath: object)) == Data(text.utf8))
    let moved = try CLI.run(
      [],
      prefix: AccessTests.bob + [
        "/bin/sh", "-c", "mv -f \"$1\" \"$2\"", "sh", object, store + "/" + name,
      ])
    #expect(moved.status == 0, "\(moved.stderr)")
    var status = stat()
    #expect(stat(store + "/" + name, &status) == 0 && status.st_uid == 60001)
  }

  /// Has alice write `text` (bytes bob chose: a download, say) to a file
  /// of hers, mode 0644, in a folder the team shares, and bob rename it
  /// over `name` in `store`: as Trove writes root files, but not hers.
  func plantAlicesCopy(_ text: String, as name: String, in store: String, _ scratch: Scratch)
    throws
  {
    let shared = scratch["team"]
    try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: true)
    #expect(chown(shared, 0, AccessTests.team) == 0 && chmod(shared, 0o2770) == 0)
    let input = try scratch.write("download", Array(text.utf8))
    #expect(chmod(input, 0o644) == 0)
    let copied = try CLI.run(
      [],
      prefix: AccessTests.alice + [
        "/bin/sh", "-c", "umask 022; cat \"$1\" > \"$2\"", "sh", input, shared + "/copy",
      ])
    #expect(copied.status == 0, "\(copied.stderr)")
    let moved = try CLI.run(
      [],
      prefix: AccessTests.bob + [
        "/bin/sh", "-c", "mv -f \"$1\" \"$2\"", "sh", shared + "/copy", store + "/" + name,
      ])
    #expect(moved.status == 0, "\(moved.stderr)")
    var status = stat()
    #expect(stat(store + "/" + name, &status) == 0 && status.st_uid == 60001)
    #expect(status.st_mode & 0o7777 == 0o644)
  }

  @Test(
    "a file of alice's (0644) that bob renamed over remotes.json, or her object over config.json: her credential goes only to the URL she lent it, whatever the file's name for it; the signing-key is not used"
  )
  func objectRenamedOverRootFile() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = try groupStore(scratch)
    let added = try CLI.run(
      [
        "--store", store, "remote", "add", "team", server.url("/headers/team"), "--auth-env",
        "TROVE_TEAM_TOKEN", "--write", "off",
      ], prefix: AccessTests.alice)
    #expect(added.status == 0, "\(added.stderr)")
    try plantAlicesCopy(
      """
      {"format": 1, "remotes": [{"name": "team", "url": "\(server.url("/headers/evil"))", "read-only": true, "auth-env": "TROVE_TEAM_TOKEN"}]}
      """, as: "remotes.json", in: store, scratch)
    _ = try CLI.run(
      ["--store", store, "remote", "check", "team"],
      environment: ["TROVE_TEAM_TOKEN": "alice-secret"], prefix: AccessTests.alice)
    let evil = server.headerLog().filter { $0.contains("/headers/evil") }
    #expect(!evil.isEmpty && !evil.joined().contains("alice-secret"), "\(evil)")

    try plantAlicesObject(
      #"{"format": 1, "policy": {"signing-key": "/nonexistent/bob.key"}}"#, as: "config.json",
      in: store, scratch)
    // Root setting the access mode does not give it the mode of a file trove wrote.
    let access = try CLI.run(["--store", store, "config", "set", "access", "group"])
    #expect(access.status == 0, "\(access.stderr)")
    var status = stat()
    #expect(stat(store + "/config.json", &status) == 0 && status.st_mode & 0o7777 == 0o444)
    // Nor to a file of hers the group may write (references.log, say).
    #expect(chmod(store + "/config.json", 0o660) == 0)
    let again = try CLI.run(["--store", store, "config", "set", "access", "group"])
    #expect(again.status == 0, "\(again.stderr)")
    #expect(stat(store + "/config.json", &status) == 0 && status.st_mode & 0o7777 == 0o660)
    let doctor = try CLI.run(["--store", store, "doctor", scratch.path], prefix: AccessTests.alice)
    #expect(doctor.out.contains("warn  signing-key-owner"), "\(doctor.out)")
  }

  @Test(
    "bob's rm and add of alice's remote under its name, to his URL, gets none of her credential; root's rewrite neither"
  )
  func renamedRemoteGetsNoCredential() throws {
    let server = try FaultServer()
    let scratch = try Scratch()
    let store = try groupStore(scratch)
    func trove(_ user: [String], _ arguments: [String]) throws -> CLI.Result {
      try CLI.run(
        ["--store", store] + arguments, environment: ["TROVE_TOK": "alice-secret"], prefix: user)
    }
    let added = try trove(
      AccessTests.alice,
      [
        "remote", "add", "team", server.url("/headers/team"), "--auth-env", "TROVE_TOK",
        "--write", "off",
      ])
    #expect(added.status == 0, "\(added.stderr)")
    #expect(try trove(AccessTests.bob, ["remote", "rm", "team"]).status == 0)
    let swapped = try trove(
      AccessTests.bob,
      ["remote", "add", "team", server.url("/headers/evil"), "--write", "off"])
    #expect(swapped.status == 0, "\(swapped.stderr)")
    #expect(
      try trove([], ["remote", "add", "r", server.url("/headers/r"), "--write", "off"])
        .status == 0)
    _ = try trove(AccessTests.alice, ["remote", "check", "team"])
    let evil = server.headerLog().filter { $0.contains("/headers/evil") }
    #expect(!evil.isEmpty && !evil.joined().contains("alice-secret"), "\(evil)")
  }

  @Test(
    "alice's config set over bob's config.json drops his signing-key, in one warning line, unless her change sets one"
  )
  func rewriteDropsAnotherMembersChoices() throws {
    let scratch = try Scratch()
    let store = try groupStore(scratch)
    func trove(_ user: [String], _ arguments: [String], _ environment: [String: String] = [:])
      throws -> CLI.Result
    {
      try CLI.run(["--store", store] + arguments, environment: environment, prefix: user)
    }
    #expect(chmod(scratch.path, 0o777) == 0)
    let bobKey = scratch["bob.key"]
    let made = try CLI.run(["keygen", "bob", "--out", bobKey], prefix: AccessTests.bob)
    #expect(made.status == 0, "\(made.stderr)")
    #expect(try trove(AccessTests.bob, ["config", "set", "signing-key", bobKey]).status == 0)

    let set = try trove(AccessTests.alice, ["config", "set", "max-age", "30d"])
    #expect(set.status == 0, "\(set.stderr)")
    #expect(
      set.stderr.components(separatedBy: "\n").filter { $0.contains("signing-key dropped") }.count
        == 1, "\(set.stderr)")
    #expect(try trove(AccessTests.alice, ["config", "get", "signing-key"]).out == "none\n")

    // Her own choice, set by the very change, stays.
    let aliceKey = scratch["alice.key"]
    #expect(
      try CLI.run(["keygen", "alice", "--out", aliceKey], prefix: AccessTests.alice).status == 0)
    #expect(try trove(AccessTests.bob, ["config", "set", "max-age", "20d"]).status == 0)
    let own = try trove(AccessTests.alice, ["config", "set", "signing-key", aliceKey])
    #expect(own.status == 0 && !own.stderr.contains("dropped"), "\(own.stderr)")
    #expect(try trove(AccessTests.alice, ["config", "get", "signing-key"]).out == aliceKey + "\n")
  }
}
