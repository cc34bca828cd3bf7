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
  run: { invocation in
    try invocation.requirePositionals(["directory"])
    let named = invocation.positionals[0]
    let source = named == "-" ? "<standard input>" : absolutePath(named)
    var isFolder: ObjCBool = false
    let exists = FileManager.default.fileExists(atPath: source, isDirectory: &isFolder)
    // Checked before this store is opened (and maybe created).
    guard exists || named == "-" else {
      throw TroveError(
        .storeMissing, "no store or archive at '\(source)': nothing to import", path: source)
    }
    let store = try invocation.openStore()
    let replacing = invocation.flag("--replace-keys")
    let report: ExchangeReport
    if named == "-" {
      report = try store.importArchive(
        from: FileHandle.standardInput, name: source, replacingKeys: replacing)
    } else if exists && !isFolder.boolValue {
      report = try store.importArchive(fromFile: source, replacingKeys: replacing)
    } else {
      report = try store.importStore(at: source, replacingKeys: replacing)
    }
    for key in report.keptKeys {
      Output.warning(
        "key '\(key)' is bound to another object in this store: kept (--replace-keys repoints it)")
    }
    printExchange(report, "imported", "from", source, json: invocation.flag("--json"))
    return ExitStatus.success
  })
