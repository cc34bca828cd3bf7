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
    .target(
      name: "TroveCommandLine",
      dependencies: ["Trove"],
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
