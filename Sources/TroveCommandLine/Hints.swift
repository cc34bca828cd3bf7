import Trove

/// What the command tells a user to do about a failure: each library
/// ``TroveError/Remedy`` in the command's own words, naming its commands
/// and options. The library's messages say what failed and why; these say
/// what to type.
enum Hints {
  /// The text that follows an error's one line for `remedy`.
  static func suffix(_ remedy: TroveError.Remedy) -> String {
    switch remedy {
    case .repairStore: return "; run 'trove verify --repair'"
    case .rebuildIndex: return "; run 'trove reindex'"
    case .rebuildIndexWhereWritable: return ": run 'trove reindex' where the store is writable"
    case .openWritable:
      return
        "; open the store once with write access (e.g. remount its volume read-write and run 'trove stats')"
    case .chooseStore: return "; give --store DIR or set TROVE_STORE"
    case .credentialVariable:
      return
        "; put the credential in an environment variable and name it with --auth-env (over HTTP, ~/.netrc serves too)"
    case .repairSettings(let key?):
      return "; repair it with 'trove config set \(key.rawValue) VALUE' or 'trove config reset'"
    case .repairSettings(nil):
      return
        "; repair it with 'trove config reset' or 'trove config set KEY VALUE' (either writes the defaults for the other settings)"
    case .raiseMaximumObjectSize: return "; raise it with 'trove config set max-object-size SIZE'"
    case .checkExpectedSize: return " (--expect-size)"
    case .removeRemoteFirst(let name):
      return "; remove it first with 'trove remote rm \(MessageText.escaped(name))'"
    case .lendCredentials(let name):
      return
        "; it was sent none of your credentials: if it takes one, lend it with 'trove remote login \(MessageText.escaped(name)) [--auth-env VAR]'"
    case .remoteStatus: return " (see 'trove remote status')"
    case .listRemotes: return " (see 'trove remote ls')"
    case .allowNetwork: return " and --offline forbids fetching it"
    case .sameFilesystem(let path):
      return "; put the store on the same filesystem as \(MessageText.quoted(path)) (--store DIR)"
    case .anotherLinkMode: return "; get --mode clone or copy works"
    case .freeSpace:
      return
        "; free space on the store's volume, set a budget ('trove config set budget SIZE'), or lower min-free"
    case .removeAndStoreAgain: return "; remove it and store it again"
    case .storeAgain: return ": store the bytes again"
    }
  }

  /// The advice `trove doctor` gives under a check that warns, naming
  /// the commands to run; the library's own advice when the check has no
  /// remedy.
  static func advice(_ check: StoreDiagnosis.Check, in diagnosis: StoreDiagnosis) -> String? {
    guard let remedy = check.remedy else { return check.advice }
    switch (check.name, remedy) {
    case (_, .openWritable):
      return
        "gets, listings and verify work; to store, pin or sweep, open it where it is writable (remount it read-write, or use another --store)"
    case ("clone", .sameFilesystem(let path)):
      return
        "put the store on the same \(diagnosis.destinationFilesystem) as '\(path)' to get clones (trove --store <a folder on it>); until then gets copy"
    case (_, .sameFilesystem(let path)):
      return
        "hard links need one filesystem: put the store on the same filesystem as '\(path)' for get --mode hardlink"
    case (_, .anotherLinkMode):
      return "hard links need write access to both folders; get --mode clone or copy works"
    case (_, .freeSpace):
      return
        "the volume is below min-free: sweeps evict to free space; free space on it, set a budget ('trove config set budget SIZE'), or lower min-free"
    case (_, .rebuildIndex): return "run 'trove reindex'"
    default: return check.advice.map { $0 + suffix(remedy) }
    }
  }

  /// A check's finding as `trove doctor` says it: a check that hard links
  /// work names the mode that uses them.
  static func detail(_ check: StoreDiagnosis.Check) -> String {
    check.name == "hardlink" && check.status == .ok
      ? check.detail + " (get --mode hardlink)" : check.detail
  }

  /// `diagnosis` with the command's wording in its checks (``advice(_:in:)``,
  /// ``detail(_:)``), as printed and as JSON.
  static func worded(_ diagnosis: StoreDiagnosis) -> StoreDiagnosis {
    var worded = diagnosis
    worded.checks = diagnosis.checks.map { check in
      var check = check
      check.advice = advice(check, in: diagnosis)
      check.detail = detail(check)
      return check
    }
    return worded
  }
}

extension TroveError {
  /// The error's one line followed by what to type to fix it, as the
  /// command prints it.
  var withHint: String {
    description + (remedy.map(Hints.suffix) ?? "")
  }
}
