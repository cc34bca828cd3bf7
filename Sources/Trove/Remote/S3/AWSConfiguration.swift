import Foundation

/// What the AWS tools would use for an S3 remote: credentials, region and
/// endpoint, from the environment and the shared files (`~/.aws/credentials`,
/// `~/.aws/config`), as the AWS CLI and SDKs find them. Nothing of it is
/// ever written into the store.
struct AWSConfiguration {
  /// Nil for anonymous requests (a public bucket).
  var credentials: Credentials?
  var region: String
  var service: S3Service
  var pathStyle: Bool
  /// Certificates to verify the endpoint's with instead of the system's
  /// (`AWS_CA_BUNDLE`, else the profile's `ca_bundle`), as the AWS tools
  /// take them: for a private endpoint with a certificate of its own.
  var caBundle: String?

  struct Credentials {
    var accessKeyID: String
    var secretAccessKey: String
    var sessionToken: String?
    /// Where they came from, for messages (`AWS_ACCESS_KEY_ID`, a
    /// profile in a file): never the secret.
    var source: String
  }

  /// Resolves `spec`'s configuration: the remote's own `endpoint`,
  /// `region` and `path-style` first, then `AWS_ENDPOINT_URL_S3`,
  /// `AWS_ENDPOINT_URL`, `AWS_REGION`, `AWS_DEFAULT_REGION`, then the
  /// profile (`AWS_PROFILE`, else `default`) in the shared files; keys from
  /// `AWS_ACCESS_KEY_ID` and `AWS_SECRET_ACCESS_KEY` (with
  /// `AWS_SESSION_TOKEN`), else the profile's.
  ///
  /// - Throws: `.invalidConfig` naming the variable, profile or file: a
  ///   named profile that no file holds, a key ID without its secret, a
  ///   region or endpoint that cannot be used.
  static func resolve(
    _ spec: RemoteSpec, environment: [String: String] = ProcessInfo.processInfo.environment
  ) throws(TroveError) -> AWSConfiguration {
    func env(_ name: String) -> String? {
      guard let value = environment[name], !value.isEmpty else { return nil }
      return value
    }
    let home =
      env("HOME") ?? (try? Sys.homeDirectory(ofUser: Sys.effectiveUserID)).flatMap { $0 } ?? "/"
    let credentialsFile = env("AWS_SHARED_CREDENTIALS_FILE") ?? home + "/.aws/credentials"
    let configFile = env("AWS_CONFIG_FILE") ?? home + "/.aws/config"
    let profileName = env("AWS_PROFILE") ?? env("AWS_DEFAULT_PROFILE")
    let profile = profileName ?? "default"
    let fromCredentials = try INIFile.section(profile, in: credentialsFile)
    let fromConfig = try INIFile.section(
      profile == "default" ? "default" : "profile " + profile, in: configFile)
    if let profileName, fromCredentials == nil, fromConfig == nil {
      throw TroveError(
        .invalidConfig,
        "AWS_PROFILE names the profile '\(ServerText.excerpt(profileName))', which neither '\(credentialsFile)' nor '\(configFile)' holds",
        value: profileName)
    }

    var credentials: Credentials?
    if let id = env("AWS_ACCESS_KEY_ID") {
      guard let secret = env("AWS_SECRET_ACCESS_KEY") else {
        throw TroveError(
          .invalidConfig, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not",
          value: "AWS_SECRET_ACCESS_KEY")
      }
      credentials = Credentials(
        accessKeyID: id, secretAccessKey: secret, sessionToken: env("AWS_SESSION_TOKEN"),
        source: "AWS_ACCESS_KEY_ID")
    } else {
      for (section, file) in [(fromCredentials, credentialsFile), (fromConfig, configFile)] {
        guard let section, let id = section["aws_access_key_id"] else { continue }
        guard let secret = section["aws_secret_access_key"] else {
          throw TroveError(
            .invalidConfig,
            "profile '\(profile)' in '\(file)' has aws_access_key_id but no aws_secret_access_key",
            path: file)
        }
        credentials = Credentials(
          accessKeyID: id, secretAccessKey: secret, sessionToken: section["aws_session_token"],
          source: "profile '\(profile)' in '\(file)'")
        break
      }
    }
    if let credentials {
      // A key pasted with a newline or a space in it would be sent as a
      // broken header, or let a header be forged.
      for part in [credentials.accessKeyID, credentials.secretAccessKey]
        + (credentials.sessionToken.map { [$0] } ?? [])
      where part.unicodeScalars.contains(where: { $0.value <= 0x20 || $0.value >= 0x7F }) {
        throw TroveError(
          .invalidConfig,
          "the AWS credentials from \(credentials.source) hold a space or a control character",
          value: credentials.source)
      }
    }

    let region =
      spec.region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION")
      ?? fromConfig?["region"] ?? "us-east-1"
    guard RemoteSpec.isRegionName(region) else {
      throw TroveError(
        .invalidConfig,
        "invalid region '\(ServerText.excerpt(region))' for remote '\(spec.name)': expected letters, digits and '-'",
        value: region)
    }
    let service: S3Service
    if let text = spec.endpointURL ?? env("AWS_ENDPOINT_URL_S3") ?? env("AWS_ENDPOINT_URL")
      ?? fromConfig?["endpoint_url"]
    {
      do throws(TroveError) {
        service = try RemoteSpec.s3Service(text, remote: spec.name)
      } catch {
        throw TroveError(.invalidConfig, error.message, value: error.value)
      }
    } else {
      service = .aws(region: region)
    }
    // Only HTTPS uses it, as with the AWS CLI. An empty AWS_CA_BUNDLE is
    // taken as unset (botocore would stop there and use no file).
    var caBundle: String?
    if service.scheme == "https", let path = env("AWS_CA_BUNDLE") ?? fromConfig?["ca_bundle"] {
      let source =
        env("AWS_CA_BUNDLE") != nil
        ? "AWS_CA_BUNDLE" : "ca_bundle of profile '\(profile)' in '\(configFile)'"
      // libcurl's own error for it would name neither the setting nor the file.
      do throws(SystemCallError) {
        let fd = try FileDescriptor.open(path, [.readOnly, .nonBlocking])
        defer { fd.close() }
        guard try fd.status().isRegular else { throw SystemCallError("open", .notARegularFile) }
      } catch {
        throw TroveError(
          .invalidConfig,
          "\(source) names '\(ServerText.excerpt(path))', which is not a readable file of certificates",
          path: path, cause: error)
      }
      caBundle = path
    }
    return AWSConfiguration(
      credentials: credentials, region: region, service: service,
      pathStyle: spec.pathStyle ?? service.prefersPathStyle, caBundle: caBundle)
  }
}

/// The INI files the AWS tools share: `[section]` headers and `key = value`
/// lines; `#` and `;` start comments; an indented line continues a nested
/// setting, which is skipped.
enum INIFile {
  /// The settings of `name`'s section in the file at `path`; nil when
  /// there is no such file or section.
  ///
  /// - Throws: `.invalidConfig` naming the file when it cannot be read
  ///   (but does exist) or is larger than 1 MiB.
  static func section(_ name: String, in path: String) throws(TroveError) -> [String: String]? {
    let bytes: [UInt8]
    do throws(SystemCallError) {
      // The user's own file, wherever a link puts it; never a FIFO waited on.
      let fd = try FileDescriptor.open(path, [.readOnly, .nonBlocking])
      defer { fd.close() }
      guard try fd.status().isRegular else { throw SystemCallError("open", .notARegularFile) }
      bytes = try fd.readAll(limit: 1 << 20)
    } catch  where error.errno == .noSuchFileOrDirectory || error.errno == .notDirectory {
      return nil
    } catch {
      throw TroveError.system(error, "read", path: path, code: .invalidConfig)
    }
    var current: String?
    var found: [String: String]?
    for raw in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
      let line = raw.trimmingCharacters(in: .whitespaces)
      if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
      if line.hasPrefix("[") && line.hasSuffix("]") {
        current = line.dropFirst().dropLast().trimmingCharacters(in: .whitespaces)
        if current == name, found == nil { found = [:] }
        continue
      }
      guard current == name, raw.first != " ", raw.first != "\t",
        let equals = line.firstIndex(of: "=")
      else { continue }
      let key = line[..<equals].trimmingCharacters(in: .whitespaces).lowercased()
      let value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
      if !value.isEmpty { found?[key] = value }
    }
    return found
  }
}
