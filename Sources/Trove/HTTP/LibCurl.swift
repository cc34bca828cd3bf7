import CCurl
import Foundation

/// libcurl, loaded with `dlopen` the first time a transfer needs it: the
/// one place that loads it and resolves its functions. The binary does not
/// link libcurl, so a command without HTTP (`put`, `get`, `has`…) neither
/// maps the 28 libraries it brings in (Debian 12) nor needs it installed;
/// a fetch or a remote command without it fails with one line saying what
/// to install.
///
/// Loading, resolving and `curl_global_init` happen once, thread-safely (a
/// lazily initialised static), and the library is never unloaded.
/// `curl_easy_setopt`, `curl_easy_getinfo` and `curl_multi_setopt` are
/// variadic: they stay untyped pointers, called only through the CCurl
/// shim's wrappers (`trove_curl_set_long(curl.easySetopt, handle, …)`).
struct LibCurl: @unchecked Sendable {
  /// The shared object loaded: Debian's libcurl4 (OpenSSL) soname.
  static let soname = "libcurl.so.4"

  typealias Easy = UnsafeMutableRawPointer
  typealias Multi = UnsafeMutableRawPointer
  typealias List = UnsafeMutablePointer<curl_slist>

  let easyInit: @convention(c) () -> Easy?
  let easyCleanup: @convention(c) (Easy?) -> Void
  let easyReset: @convention(c) (Easy?) -> Void
  let easyPerform: @convention(c) (Easy?) -> CURLcode
  let easyPause: @convention(c) (Easy?, Int32) -> CURLcode
  let easyStrerror: @convention(c) (CURLcode) -> UnsafePointer<CChar>?
  /// `curl_easy_setopt`, for the shim's `trove_curl_set_*` wrappers.
  let easySetopt: UnsafeMutableRawPointer
  /// `curl_easy_getinfo`, for the shim's `trove_curl_get_*` wrappers.
  let easyGetinfo: UnsafeMutableRawPointer
  let slistAppend: @convention(c) (List?, UnsafePointer<CChar>?) -> List?
  let slistFreeAll: @convention(c) (List?) -> Void
  let multiInit: @convention(c) () -> Multi?
  let multiCleanup: @convention(c) (Multi?) -> CURLMcode
  let multiAddHandle: @convention(c) (Multi?, Easy?) -> CURLMcode
  let multiRemoveHandle: @convention(c) (Multi?, Easy?) -> CURLMcode
  let multiPerform: @convention(c) (Multi?, UnsafeMutablePointer<Int32>?) -> CURLMcode
  let multiInfoRead:
    @convention(c) (Multi?, UnsafeMutablePointer<Int32>?) -> UnsafeMutablePointer<CURLMsg>?
  let multiPoll:
    @convention(c) (
      Multi?, UnsafeMutablePointer<curl_waitfd>?, UInt32, Int32, UnsafeMutablePointer<Int32>?
    ) -> CURLMcode
  let multiWakeup: @convention(c) (Multi?) -> CURLMcode
  /// `curl_multi_setopt`, for the shim's `trove_curl_multi_set_long`.
  let multiSetopt: UnsafeMutableRawPointer
  let versionInfo: @convention(c) (CURLversion) -> UnsafeMutablePointer<curl_version_info_data>?

  /// libcurl, loaded and set up on the first call; the same answer after.
  static func loaded() throws(TroveError) -> LibCurl {
    try shared.get()
  }

  private static let shared: Result<LibCurl, TroveError> = Result { () throws(TroveError) in
    try LibCurl(loading: soname)
  }

  private init(loading name: String) throws(TroveError) {
    guard let library = dlopen(name, RTLD_NOW | RTLD_LOCAL) else {
      throw TroveError(
        .unavailable, "cannot load libcurl (\(name)): \(Self.lastError()); install libcurl4")
    }
    func symbol<T>(_ symbol: String, as type: T.Type) throws(TroveError) -> T {
      guard let address = dlsym(library, symbol) else {
        throw TroveError(
          .unavailable,
          "cannot load libcurl (\(name)): \(Self.lastError()); install libcurl4")
      }
      return unsafeBitCast(address, to: type)
    }
    easyInit = try symbol("curl_easy_init", as: type(of: easyInit))
    easyCleanup = try symbol("curl_easy_cleanup", as: type(of: easyCleanup))
    easyReset = try symbol("curl_easy_reset", as: type(of: easyReset))
    easyPerform = try symbol("curl_easy_perform", as: type(of: easyPerform))
    easyPause = try symbol("curl_easy_pause", as: type(of: easyPause))
    easyStrerror = try symbol("curl_easy_strerror", as: type(of: easyStrerror))
    easySetopt = try symbol("curl_easy_setopt", as: UnsafeMutableRawPointer.self)
    easyGetinfo = try symbol("curl_easy_getinfo", as: UnsafeMutableRawPointer.self)
    slistAppend = try symbol("curl_slist_append", as: type(of: slistAppend))
    slistFreeAll = try symbol("curl_slist_free_all", as: type(of: slistFreeAll))
    multiInit = try symbol("curl_multi_init", as: type(of: multiInit))
    multiCleanup = try symbol("curl_multi_cleanup", as: type(of: multiCleanup))
    multiAddHandle = try symbol("curl_multi_add_handle", as: type(of: multiAddHandle))
    multiRemoveHandle = try symbol("curl_multi_remove_handle", as: type(of: multiRemoveHandle))
    multiPerform = try symbol("curl_multi_perform", as: type(of: multiPerform))
    multiInfoRead = try symbol("curl_multi_info_read", as: type(of: multiInfoRead))
    multiPoll = try symbol("curl_multi_poll", as: type(of: multiPoll))
    multiWakeup = try symbol("curl_multi_wakeup", as: type(of: multiWakeup))
    multiSetopt = try symbol("curl_multi_setopt", as: UnsafeMutableRawPointer.self)
    versionInfo = try symbol("curl_version_info", as: type(of: versionInfo))
    let globalInit = try symbol(
      "curl_global_init", as: (@convention(c) (Int) -> CURLcode).self)
    let code = globalInit(3)  // CURL_GLOBAL_ALL
    guard code == CURLE_OK else {
      throw TroveError(
        .ioError, "cannot start libcurl (\(name)): curl_global_init: \(message(code))")
    }
  }

  /// `dlerror`'s message, or a stand-in when it has none.
  private static func lastError() -> String {
    dlerror().map { String(cString: $0) } ?? "unknown dlopen error"
  }

  /// libcurl's message for `code`.
  func message(_ code: CURLcode) -> String {
    easyStrerror(code).map { String(cString: $0) } ?? "libcurl error \(code.rawValue)"
  }
}
