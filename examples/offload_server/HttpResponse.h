// SPDX-License-Identifier: BSL-1.0
#pragma once

// An HTTP/1.1 response and its wire form.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "HttpRequestParser.h"

namespace offload {

/// A response to send: status, body and extra header fields.
/// Content-Length, Content-Type, Connection and Date-free framing are added by
/// serialize().
struct HttpResponse {
  int status = 200;
  std::string contentType = "text/plain; charset=utf-8";
  std::string body;
  std::vector<HttpHeader> headers;  ///< extra fields, e.g. Retry-After, Allow
  /// Close the connection after this response (errors that leave the stream
  /// unparseable, shutdown).
  bool close = false;

  /// A text/plain response whose body is `text` and a newline.
  static HttpResponse text(int status, std::string text) {
    HttpResponse response;
    response.status = status;
    response.body = std::move(text) + "\n";
    return response;
  }
};

/// "OK", "Not Found", ... for the codes this server sends; "Unknown" otherwise.
/// Never blocks, never throws.
std::string_view reasonPhrase(int status) noexcept;

/// The bytes of `response`: status line, the fields, Content-Length and
/// `Connection: close` or `keep-alive` (as `keepAlive` says), then the body
/// unless `headOnly` (a HEAD request). Never blocks; throws only
/// std::bad_alloc.
std::string serialize(const HttpResponse& response, bool keepAlive, bool headOnly);

}  // namespace offload
