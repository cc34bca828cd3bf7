import Foundation
import Trove

let importCommand = CommandSpec(
  name: "import",
  abstract: "Add the objects and keys of an exported store to this one.",
  usage: "[--replace-keys] [--json] (<directory> | <file>.tar | -)",
  arguments: [
    ("directory", "A Trove store, as 'trove export' writes one."),
    ("file.tar", "An archive 'trove export' wrote ('-': standard input)."),
  ],
  options: [
    OptionSpec(
      names: ["--replace-keys"], valueName: nil,
      help: "Repoint keys this store has bound to other objects (default: keep them)."),
    jsonOption,
  ],
  discussion: """
    Copies every object of the store at DIRECTORY into this store, hashing each
    on the way in (the other store's names are never trusted), then binds every
    key bound there to one of them. An object whose bytes do not match its name
    stops the import (exit 65, naming it): those copied before it are complete
    and stay. Objects this store holds already are not copied again.

    An archive (a file that is not a folder, or '-') is read in order: each member
    must be objects/xx/HEX of an object its manifest lists, with the listed size,
    and hash to HEX before anything of it is stored. Paths outside the folder,
    links and special files are refused. The first bad or cut-short member stops
    the import (exit 65, naming the archive and the cause), storing nothing of it.

    Each object is written as a download is (max-object-size and the room the
    store makes apply before its first byte) and its keys are bound in the
    transaction that stores it. A key this store has bound to another object
    keeps that binding, with a warning per key, unless --replace-keys.
    """,
  store: .creates,
  run: { invocation in
    try invocation.requirePositionals(["directory"])
    let named = invocation.positionals[0]
    let source = named == "-" ? "<stdin>" : absolutePath(named)
    var isFolder: ObjCBool = false
    let exists = FileManager.default.fileExists(atPath: source, isDirectory: &isFolder)
    // Checked before this store is opened (and maybe created).
    guard exists || named == "-" else {
      throw TroveError(
        .storeMissing, "no store or archive at '\(source)': nothing to import", path: source)
    }
    let replacing = invocation.flag("--replace-keys")
    let report = try creatingStoreForGood(invocation) { (store) throws -> ExchangeReport in
      if named == "-" {
        return try store.importArchive(
          from: FileHandle.standardInput, name: source, replacingKeys: replacing)
      } else if exists && !isFolder.boolValue {
        return try store.importArchive(fromFile: source, replacingKeys: replacing)
      } else {
        return try store.importStore(at: source, replacingKeys: replacing)
      }
    }
    for key in report.keptKeys {
      Output.warning(
        "key '\(key)' is bound to another object in this store: kept (--replace-keys repoints it)")
    }
    printExchange(report, "imported", "from", source, json: invocation.flag("--json"))
    return ExitStatus.success
  })

/// Opens the store and runs `body` with it. A store this command had to
/// create is removed again, with every folder made for it, when `body`
/// fails before storing anything in it: a failed import leaves no new
/// empty store behind (a typo in `--store` does not grow one). Objects it
/// stored before failing are complete, and stay with their store.
private func creatingStoreForGood<T>(_ invocation: Invocation, _ body: (Store) throws -> T)
  throws -> T
{
  let root = try invocation.storeRoot
  // The first folder of the path that is missing: what creating makes.
  var made: String?
  var path = root
  while path != "/" && !FileManager.default.fileExists(atPath: path) {
    made = path
    path = (path as NSString).deletingLastPathComponent
  }
  // An empty folder becomes a store too: what is in it then is ours.
  let wasEmpty =
    made == nil && (try? FileManager.default.contentsOfDirectory(atPath: root))?.isEmpty == true
  let store = try invocation.openStore()
  do {
    return try body(store)
  } catch {
    if made != nil || wasEmpty, (try? store.entries().isEmpty) == true {
      if let made {
        try? FileManager.default.removeItem(atPath: made)
      } else {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [] {
          try? FileManager.default.removeItem(atPath: root + "/" + name)
        }
      }
    }
    throw error
  }
}
