import Foundation
import Synchronization
@_spi(Serving) import Trove

/// What `GET /metrics` reports, in Prometheus's text format (version
/// 0.0.4): counts since the server started, and the store's entries,
/// bytes and budget read when scraped.
final class Metrics: Sendable {
  private struct Counts {
    /// Responses by route and status.
    var requests: [RouteStatus: Int64] = [:]
    /// Mirror answers by `X-Trove-Cache` value.
    var mirrored: [String: Int64] = ["hit": 0, "revalidated": 0, "miss": 0, "stale": 0]
    var bytesServed: Int64 = 0
    var bytesFromOrigins: Int64 = 0
    var originErrors: Int64 = 0
    var sweeps: Int64 = 0
    var sweptEntries: Int64 = 0
    var sweptBytes: Int64 = 0
    var tunnelBytesUp: Int64 = 0
    var tunnelBytesDown: Int64 = 0
  }
  private struct RouteStatus: Hashable {
    var route: String
    var status: Int
  }
  private let counts = Mutex(Counts())
  /// Mirror fetches running now.
  let activeTransfers = Atomic<Int>(0)
  /// `CONNECT` tunnels relaying now.
  let activeTunnels = Atomic<Int>(0)

  /// A request ended: `route` (``Route/metricName``), its status and the
  /// body bytes sent.
  func recordResponse(route: String, status: Int, bytes: Int64) {
    counts.withLock {
      $0.requests[RouteStatus(route: route, status: status), default: 0] += 1
      $0.bytesServed += bytes
    }
  }

  /// A mirror fetch ended: served as `cache` (nil when it failed), with
  /// `bytes` received from the origin; `originFailed` when the origin
  /// failed (a stale copy may have been served all the same).
  func recordMirror(cache: String?, bytes: Int64, originFailed: Bool) {
    counts.withLock {
      if let cache { $0.mirrored[cache, default: 0] += 1 }
      $0.bytesFromOrigins += bytes
      if originFailed { $0.originErrors += 1 }
    }
  }

  /// A `CONNECT` tunnel ended, having relayed `up` bytes to the origin
  /// and `down` to the client.
  func recordTunnel(up: Int64, down: Int64) {
    counts.withLock {
      $0.tunnelBytesUp += up
      $0.tunnelBytesDown += down
    }
  }

  /// A scheduled sweep ran, removing `entries` taking `bytes`.
  func recordSweep(entries: Int, bytes: Int64) {
    counts.withLock {
      $0.sweeps += 1
      $0.sweptEntries += Int64(entries)
      $0.sweptBytes += bytes
    }
  }

  /// The text of a scrape. O(routes × statuses) plus one
  /// ``Store/statistics()``.
  func exposition(store: Store) -> String {
    let c = counts.withLock { $0 }
    var out = ""
    func family(_ name: String, _ type: String, _ help: String) {
      out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }
    family("trove_http_requests_total", "counter", "HTTP responses by route and status.")
    for (key, value) in c.requests.sorted(by: {
      ($0.key.route, $0.key.status) < ($1.key.route, $1.key.status)
    }) {
      out += "trove_http_requests_total{route=\"\(key.route)\",status=\"\(key.status)\"} \(value)\n"
    }
    family(
      "trove_mirror_responses_total", "counter",
      "Mirror and proxy responses by X-Trove-Cache: hit, revalidated, miss, stale.")
    for (cache, value) in c.mirrored.sorted(by: { $0.key < $1.key }) {
      out += "trove_mirror_responses_total{cache=\"\(cache)\"} \(value)\n"
    }
    family("trove_http_response_bytes_total", "counter", "Body bytes of the responses sent.")
    out += "trove_http_response_bytes_total \(c.bytesServed)\n"
    family(
      "trove_origin_bytes_total", "counter",
      "Body bytes mirror and proxy fetches received from origins.")
    out += "trove_origin_bytes_total \(c.bytesFromOrigins)\n"
    family(
      "trove_origin_errors_total", "counter",
      "Mirror and proxy fetches that failed at the origin (unreachable, an error status, wrong bytes)."
    )
    out += "trove_origin_errors_total \(c.originErrors)\n"
    family(
      "trove_origin_transfers_active", "gauge", "Mirror and proxy fetches running now.")
    out += "trove_origin_transfers_active \(activeTransfers.load(ordering: .relaxed))\n"
    family(
      "trove_tunnel_bytes_total", "counter",
      "Bytes CONNECT tunnels relayed, by direction: up to origins, down to clients.")
    out += "trove_tunnel_bytes_total{direction=\"down\"} \(c.tunnelBytesDown)\n"
    out += "trove_tunnel_bytes_total{direction=\"up\"} \(c.tunnelBytesUp)\n"
    family("trove_tunnels_active", "gauge", "CONNECT tunnels relaying now.")
    out += "trove_tunnels_active \(activeTunnels.load(ordering: .relaxed))\n"
    family("trove_sweeps_total", "counter", "Sweeps the server ran on its schedule.")
    out += "trove_sweeps_total \(c.sweeps)\n"
    family(
      "trove_swept_entries_total", "counter",
      "Entries those sweeps removed (expired, or evicted for the budget).")
    out += "trove_swept_entries_total \(c.sweptEntries)\n"
    family("trove_swept_bytes_total", "counter", "Bytes (allocated) those sweeps removed.")
    out += "trove_swept_bytes_total \(c.sweptBytes)\n"
    if let statistics = try? store.statistics() {
      family("trove_store_entries", "gauge", "Objects the store holds.")
      out += "trove_store_entries \(statistics.entries)\n"
      family("trove_store_bytes", "gauge", "Bytes the store's objects take on disk (allocated).")
      out += "trove_store_bytes \(statistics.allocatedBytes)\n"
      family("trove_store_logical_bytes", "gauge", "The objects' lengths, added up.")
      out += "trove_store_logical_bytes \(statistics.logicalBytes)\n"
      if let budget = statistics.budget {
        family("trove_store_budget_bytes", "gauge", "The store's budget (allocated bytes).")
        out += "trove_store_budget_bytes \(budget)\n"
      }
      if let last = statistics.lastSweep {
        family(
          "trove_store_last_sweep_timestamp_seconds", "gauge",
          "When any process last swept the store or evicted for space (Unix time).")
        out += "trove_store_last_sweep_timestamp_seconds \(last.time / 1_000_000_000)\n"
      }
    }
    return out
  }
}
