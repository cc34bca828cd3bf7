import TroveCommandLine

#if canImport(Glibc)
  import Glibc
#endif

/// The `trove` command: a thin face over the Trove library
/// (``TroveCommand`` in the TroveCommandLine target holds all of it).
exit(TroveCommand.run())
