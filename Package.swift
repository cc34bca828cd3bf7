// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "Trove",
  products: [
    .library(name: "Trove", targets: ["Trove"]),
    .executable(name: "trove", targets: ["TroveCLI"]),
    .executable(name: "trove-bench", targets: ["TroveBenchmarks"]),
  ],
  targets: [
    // C shims: module maps and static-inline wrappers only.
    .systemLibrary(
      name: "CXXHash", pkgConfig: "libxxhash", providers: [.apt(["libxxhash-dev"])]),
    .systemLibrary(
      name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(
      name: "CZstd", pkgConfig: "libzstd", providers: [.apt(["libzstd-dev"])]),
    // Headers only (libcurl4-openssl-dev): no pkgConfig, which would link
    // libcurl; Trove loads it with dlopen on the first transfer.
    .systemLibrary(name: "CCurl"),
    .systemLibrary(
      name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
    .systemLibrary(name: "CLinux"),
    // Headers only (libmicrohttpd-dev), like CCurl: `trove serve` loads
    // libmicrohttpd with dlopen when it starts.
    .systemLibrary(name: "CMicroHTTPD"),

    .target(
      name: "Trove",
      dependencies: ["CXXHash", "CSQLite", "CZstd", "CCurl", "CCrypto", "CLinux"],
      swiftSettings: [
        .swiftLanguageMode(.v6),
        // The fault seam (TROVE_INJECT_FAULT) exists only in debug builds,
        // which the tests use: a release binary has no environment-driven
        // failure path.
        .define("TROVE_FAULTS", .when(configuration: .debug)),
      ]),
    // The command's parsing, rules and commands, as a library the tests
    // import; the executable is its entry point alone.
    // `trove serve`: HTTP over libmicrohttpd, a target of its own so that
    // the library never links a server.
    .target(
      name: "TroveServer",
      dependencies: ["Trove", "CMicroHTTPD", "CCrypto"],
      swiftSettings: [.swiftLanguageMode(.v6)]),
    .target(
      name: "TroveCommandLine",
      dependencies: ["Trove", "TroveServer"],
      swiftSettings: [.swiftLanguageMode(.v6)]),
    .executableTarget(
      name: "TroveCLI",
      dependencies: ["TroveCommandLine"],
      swiftSettings: [.swiftLanguageMode(.v6)]),
    .executableTarget(
      name: "TroveBenchmarks",
      dependencies: ["Trove", "CXXHash"],
      path: "Benchmarks/TroveBenchmarks",
      swiftSettings: [.swiftLanguageMode(.v6)]),
    .testTarget(
      name: "TroveTests",
      dependencies: ["Trove", "TroveCLI", "TroveCommandLine"],
      swiftSettings: [.swiftLanguageMode(.v6)]),
  ]
)
