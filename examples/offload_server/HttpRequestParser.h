// SPDX-License-Identifier: BSL-1.0
#pragma once

// An HTTP/1.1 request parser with a pure interface: the bytes received so far
// go in, and out comes "need more bytes", one complete request (and how many
// bytes it took), or a precise error with the status code to answer. It does
// no I/O and keeps no state between calls, so it can be unit-tested and fuzzed
// on its own.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace offload {

/// Size limits a request must respect; each has a status code of its own.
struct HttpLimits {
  /// The request line, without its CRLF. Longer: 414 URI Too Long. Default 8 KiB.
  std::size_t maxRequestLine = 8 * 1024;
  /// The header section after the request line, CRLFs included. Longer: 431
  /// Request Header Fields Too Large. Default 16 KiB.
  std::size_t maxHeaderBytes = 16 * 1024;
  /// Header fields. More: 431. Default 100.
  std::size_t maxHeaderCount = 100;
  /// The body (Content-Length). Larger: 413 Content Too Large. Default 64 KiB.
  std::size_t maxBodyBytes = 64 * 1024;
};

/// One header field, as received: the name keeps its case, the value has its
/// surrounding whitespace removed.
struct HttpHeader {
  std::string name;
  std::string value;
};

/// A complete, syntactically valid request.
struct HttpRequest {
  std::string method;    ///< a token, case-sensitive ("GET")
  std::string target;    ///< the request target as sent ("/work?n=10")
  std::string path;      ///< the target up to '?', not percent-decoded ("/work")
  std::string query;     ///< after '?', not decoded; empty if none ("n=10")
  int versionMinor = 1;  ///< 0 for HTTP/1.0, 1 for HTTP/1.1
  std::vector<HttpHeader> headers;
  std::string body;
  /// HTTP/1.1 without "Connection: close", or HTTP/1.0 with "Connection: keep-alive".
  bool keepAlive = true;

  /// The value of the first header named `name` (case-insensitive), or null.
  /// Never blocks, never throws.
  [[nodiscard]] const std::string* header(std::string_view name) const noexcept;
};

/// What parse() found in the bytes it was given.
struct HttpParseResult {
  enum class Kind {
    needMore,  ///< no error so far, but the request is not complete yet
    complete,  ///< `request` and `consumed` are set
    error,     ///< `status` and `reason` are set; the connection should be closed after the answer
  };
  Kind kind = Kind::needMore;
  HttpRequest request;
  /// complete: the bytes this request took (leading empty lines included);
  /// what follows belongs to the next request (pipelining).
  std::size_t consumed = 0;
  int status = 0;      ///< error: 400, 413, 414, 431, 501 or 505
  std::string reason;  ///< error: one sentence saying what was wrong
};

/// Parses one HTTP/1.x request from the start of a buffer.
///
/// Accepted: origin-form targets ("/path?query"), absolute-form targets
/// ("http://host/path", reduced to the path), "*" for OPTIONS; lines ended by
/// CRLF or a bare LF; up to two empty lines before the request line; a body
/// sized by Content-Length. Refused, with the status code that says why:
///
/// - 400: a malformed request line, header field or Content-Length; an
///   http:// target without a host; a missing or repeated Host in HTTP/1.1;
///   whitespace before a header colon; folded header lines; control
///   characters; both Content-Length and Transfer-Encoding.
/// - 413: a Content-Length above maxBodyBytes (reported as soon as the headers
///   are complete, before the body arrives).
/// - 414: a request line longer than maxRequestLine (reported as soon as more
///   bytes than that arrived without a line end; a CR last is not counted, as
///   it may begin the CRLF).
/// - 431: a header section longer than maxHeaderBytes, or more than
///   maxHeaderCount fields.
/// - 501: a Transfer-Encoding (chunked bodies are not supported).
/// - 505: an HTTP version other than 1.0 and 1.1.
///
/// The method is only checked to be a token: which methods a resource allows
/// is the router's business (405).
///
/// Thread safety: parse() is const and keeps no state; one parser may be
/// used from any number of threads.
class HttpRequestParser {
 public:
  explicit HttpRequestParser(HttpLimits limits = {}) noexcept : limits_(limits) {}

  /// Parses the request at the start of `bytes`. Never blocks; linear in the
  /// size of the header section (call it again with the longer buffer when
  /// more bytes arrive). Throws only std::bad_alloc.
  [[nodiscard]] HttpParseResult parse(std::string_view bytes) const;

  [[nodiscard]] const HttpLimits& limits() const noexcept { return limits_; }

 private:
  HttpLimits limits_;
};

/// The result of findQueryParameter().
struct QueryParameter {
  bool found = false;      ///< the parameter is present (its value may be empty)
  bool malformed = false;  ///< found, but its value has a bad %-escape
  std::string value;       ///< the decoded value ('+' is a space, %XX a byte)
};

/// Looks up the first parameter named `name` in a query string
/// ("a=1&n=20"); the name is compared undecoded. Never blocks; throws only
/// std::bad_alloc.
[[nodiscard]] QueryParameter findQueryParameter(std::string_view query, std::string_view name);

}  // namespace offload
