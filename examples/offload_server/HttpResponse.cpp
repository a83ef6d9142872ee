// SPDX-License-Identifier: BSL-1.0
#include "HttpResponse.h"

#include <fmt/format.h>

namespace offload {

std::string_view reasonPhrase(int status) noexcept {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

std::string serialize(const HttpResponse& response, bool keepAlive, bool headOnly) {
  std::string out = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\n", response.status,
                                reasonPhrase(response.status), response.contentType, response.body.size());
  for (const HttpHeader& header : response.headers)
    fmt::format_to(std::back_inserter(out), "{}: {}\r\n", header.name, header.value);
  out += keepAlive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  if (!headOnly) out += response.body;
  return out;
}

}  // namespace offload
