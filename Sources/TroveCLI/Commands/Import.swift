import Foundation
import Trove

let importCommand = CommandSpec(
  name: "import",
  abstract: "Add the objects and keys of an exported store to this one.",
  usage: "[--json] <directory>",
  arguments: [("directory", "A Trove store, as 'trove export' writes one.")],
  options: [jsonOption],
  discussion: """
    Copies every object of the store at DIRECTORY into this store, hashing each
    on the way in (the other store's names are never trusted), then binds every
    key bound there to one of them. An object whose bytes do not match its name
    stops the import (exit 65, naming it): those copied before it are complete
    and stay. Objects this store holds already are not copied again.
    """,
  run: { invocation in
    try invocation.requirePositionals(["directory"])
    let source = absolutePath(invocation.positionals[0])
    let report = try invocation.openStore().importStore(at: source)
    printExchange(report, "imported", "from", source, json: invocation.flag("--json"))
    return ExitStatus.success
  })
