import Foundation
import Trove

/// The trace `TROVE_DEBUG=FILE` asks for: each decision of the store at
/// its seams appended to FILE, one line each (``TraceLog``); nil when the
/// variable is not set or empty. A file that cannot be opened is a warning
/// and the command goes on untraced. Opened once per process.
let debugTrace: (@Sendable (TraceEvent) -> Void)? = {
  guard let path = EnvironmentVariables.lookUp("TROVE_DEBUG"), !path.isEmpty else {
    return nil
  }
  do throws(TroveError) {
    return try TraceLog.appending(to: path)
  } catch {
    Output.warning("TROVE_DEBUG: \(error.message); nothing is traced")
    return nil
  }
}()
