import Foundation

/// The guest side of the VM's memory economy, which can dominate what a
/// benchmark that writes hundreds of MiB measures.
///
/// These VMs report free guest pages to the host (virtio-balloon free page
/// reporting); the host takes their backing away, and the next process that
/// writes into such a page waits while the host backs it again, in the
/// kernel's copy into the page cache (Docs/Benchmarks.md, "Measuring on
/// this VM"). `scripts/bench.sh` holds free pages back from
/// reporting for the run; `warm(_:)` then makes sure the free pages the
/// next command will write into are backed.
enum HostMemory {
  static let minimumFreeTimeFile = "/sys/module/page_reporting/parameters/min_free_ms"

  /// What this kernel does with free pages, for the report.
  static var reporting: String {
    guard
      let text = try? String(contentsOfFile: minimumFreeTimeFile, encoding: .utf8)
        .trimmingCharacters(in: .whitespacesAndNewlines)
    else { return "no free page reporting knob (\(minimumFreeTimeFile))" }
    return "free page reporting after \(text) ms"
  }

  /// Writes every page of `bytes` of fresh anonymous memory and frees it:
  /// the host backs those pages now, and — when reporting waits — they stay
  /// backed and free for the page cache of the command that runs next.
  static func warm(_ bytes: Int) {
    guard bytes > 0 else { return }
    let memory = mmap(nil, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
    guard let memory, memory != MAP_FAILED else { return }
    let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    var offset = 0
    while offset < bytes {
      memory.storeBytes(of: UInt8(1), toByteOffset: offset, as: UInt8.self)
      offset += page
    }
    munmap(memory, bytes)
  }
}
