// SPDX-License-Identifier: BSL-1.0
#include "HttpRequestParser.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <optional>
#include <utility>

// The parser works on the buffer as a whole: it finds each line end, checks
// the line, and returns at the first error or at the first missing byte. A
// limit is checked as soon as the bytes that break it have arrived, so a
// client cannot make the server buffer more than the limits allow.

namespace offload {
namespace {

using Kind = HttpParseResult::Kind;

HttpParseResult error(int status, std::string reason) {
  HttpParseResult result;
  result.kind = Kind::error;
  result.status = status;
  result.reason = std::move(reason);
  return result;
}

// RFC 9110 tchar.
bool isTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool isToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), isTokenChar); }

// VCHAR, obs-text, SP and HTAB: what a field value may contain.
bool isFieldValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return c == ' ' || c == '\t' || (u >= 0x21 && u != 0x7f);
}

// Visible ASCII: what a request target may contain.
bool isTargetChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x21 && u <= 0x7e;
}

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x >= 'A' && x <= 'Z' ? x - 'A' + 'a' : x) == (y >= 'A' && y <= 'Z' ? y - 'A' + 'a' : y);
         });
}

std::string_view trimWhitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// True if the comma-separated list `value` holds `token` (case-insensitive).
bool listContains(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const std::size_t comma = value.find(',');
    if (equalsIgnoreCase(trimWhitespace(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// A line of `bytes` starting at `from`: its content (without CR LF) and the
// offset after its LF. Empty if no LF yet.
struct Line {
  std::string_view text;
  std::size_t next = 0;
};

std::optional<Line> lineAt(std::string_view bytes, std::size_t from) {
  const std::size_t lf = bytes.find('\n', from);
  if (lf == std::string_view::npos) return std::nullopt;
  std::string_view text = bytes.substr(from, lf - from);
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  return Line{text, lf + 1};
}

// Parses "METHOD SP target SP HTTP/1.x" into `request`; an error result, or
// nullopt if the line is valid.
std::optional<HttpParseResult> parseRequestLine(std::string_view line, HttpRequest& request) {
  const std::size_t firstSpace = line.find(' ');
  if (firstSpace == std::string_view::npos) return error(400, "The request line has no spaces.");
  const std::size_t secondSpace = line.find(' ', firstSpace + 1);
  if (secondSpace == std::string_view::npos) return error(400, "The request line has no HTTP version.");
  const std::string_view method = line.substr(0, firstSpace);
  std::string_view target = line.substr(firstSpace + 1, secondSpace - firstSpace - 1);
  const std::string_view version = line.substr(secondSpace + 1);
  if (!isToken(method)) return error(400, "The request method is not a token.");
  if (target.empty() || !std::all_of(target.begin(), target.end(), isTargetChar)) {
    return error(400, "The request target is empty or contains spaces or control characters.");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return error(400, "The request line does not end with a valid HTTP version.");
  }
  if (version[5] != '1' || (version[7] != '0' && version[7] != '1')) {
    return error(505, "Only HTTP/1.0 and HTTP/1.1 are supported.");
  }
  request.method = std::string(method);
  request.target = std::string(target);
  request.versionMinor = version[7] - '0';

  std::string_view path = target;
  if (target == "*") {
    if (method != "OPTIONS") return error(400, "The target '*' is only valid with OPTIONS.");
  } else if (target.front() != '/') {
    // absolute-form: http://authority/path?query
    constexpr std::string_view kScheme = "http://";
    if (target.size() < kScheme.size() || !equalsIgnoreCase(target.substr(0, kScheme.size()), kScheme)) {
      return error(400, "The request target is neither a path nor an http:// URL.");
    }
    const std::size_t slash = target.find_first_of("/?", kScheme.size());
    // "http://" alone has no host either: find_first_of finds nothing there.
    if (std::min(slash, target.size()) == kScheme.size()) return error(400, "The request target's URL has no host.");
    path = slash == std::string_view::npos ? std::string_view("/") : target.substr(slash);
    if (path.front() == '?') {
      request.path.assign(1, '/');  // not `= "/"`: GCC 12 -O2 warns about it (-Wrestrict, a false positive)
      request.query = std::string(path.substr(1));
      return std::nullopt;
    }
  }
  const std::size_t question = path.find('?');
  request.path = std::string(path.substr(0, question));
  if (question != std::string_view::npos) request.query = std::string(path.substr(question + 1));
  return std::nullopt;
}

// Checks one header line and appends it; an error result, or nullopt.
std::optional<HttpParseResult> parseHeaderLine(std::string_view line, HttpRequest& request) {
  if (line.front() == ' ' || line.front() == '\t') return error(400, "Folded header lines are not accepted.");
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos) return error(400, "A header line has no colon.");
  const std::string_view name = line.substr(0, colon);
  if (!isToken(name)) {
    return error(400, "A header name is empty, or has whitespace or a character not allowed before its colon.");
  }
  const std::string_view value = trimWhitespace(line.substr(colon + 1));
  if (!std::all_of(value.begin(), value.end(), isFieldValueChar)) {
    return error(400, "A header value contains a control character.");
  }
  request.headers.push_back({std::string(name), std::string(value)});
  return std::nullopt;
}

// Applies Host, Connection, Content-Length and Transfer-Encoding; sets
// `bodySize`. An error result, or nullopt.
std::optional<HttpParseResult> checkHeaders(HttpRequest& request, const HttpLimits& limits, std::size_t& bodySize) {
  std::size_t hosts = 0;
  std::optional<std::size_t> contentLength;
  bool transferEncoding = false;
  bool close = false;
  bool keepAlive = false;
  for (const HttpHeader& header : request.headers) {
    if (equalsIgnoreCase(header.name, "host")) {
      ++hosts;
    } else if (equalsIgnoreCase(header.name, "connection")) {
      close = close || listContains(header.value, "close");
      keepAlive = keepAlive || listContains(header.value, "keep-alive");
    } else if (equalsIgnoreCase(header.name, "transfer-encoding")) {
      transferEncoding = true;
    } else if (equalsIgnoreCase(header.name, "content-length")) {
      const std::string& text = header.value;
      std::size_t length = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), length);
      if (text.empty() || end != text.data() + text.size() || ec == std::errc::invalid_argument) {
        return error(400, "Content-Length is not a decimal number.");
      }
      if (ec == std::errc::result_out_of_range) {
        return error(413, "Content-Length is larger than this server accepts.");
      }
      if (contentLength && *contentLength != length) return error(400, "Content-Length is given twice, differently.");
      contentLength = length;
    }
  }
  if (request.versionMinor == 1 && hosts == 0) return error(400, "An HTTP/1.1 request must have a Host header.");
  if (hosts > 1) return error(400, "The request has more than one Host header.");
  if (transferEncoding && contentLength) {
    return error(400, "The request has both Content-Length and Transfer-Encoding.");
  }
  if (transferEncoding) return error(501, "Transfer-Encoding (chunked request bodies) is not supported.");
  bodySize = contentLength.value_or(0);
  if (bodySize > limits.maxBodyBytes) {
    return error(413, "The request body is larger than " + std::to_string(limits.maxBodyBytes) + " bytes.");
  }
  request.keepAlive = request.versionMinor == 1 ? !close : (keepAlive && !close);
  return std::nullopt;
}

int hexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view name) const noexcept {
  for (const HttpHeader& field : headers) {
    if (equalsIgnoreCase(field.name, name)) return &field.value;
  }
  return nullptr;
}

HttpParseResult HttpRequestParser::parse(std::string_view bytes) const {
  // Up to two empty lines may precede a request (RFC 9112, 2.2).
  std::size_t start = 0;
  for (int i = 0; i < 2; ++i) {
    if (bytes.substr(start, 2) == "\r\n") {
      start += 2;
    } else if (bytes.substr(start, 1) == "\n") {
      start += 1;
    }
  }
  const std::optional<Line> requestLine = lineAt(bytes, start);
  if (!requestLine) {
    // A CR last may begin the CRLF, which the limit does not count: a line of
    // exactly maxRequestLine bytes whose CR and LF arrive apart still fits.
    std::size_t pending = bytes.size() - start;
    if (pending > 0 && bytes.back() == '\r') --pending;
    if (pending > limits_.maxRequestLine) {
      return error(414, "The request line is longer than " + std::to_string(limits_.maxRequestLine) + " bytes.");
    }
    return {};
  }
  if (requestLine->text.size() > limits_.maxRequestLine) {
    return error(414, "The request line is longer than " + std::to_string(limits_.maxRequestLine) + " bytes.");
  }
  if (requestLine->text.empty()) return error(400, "More than two empty lines precede the request line.");
  if (requestLine->text.find('\r') != std::string_view::npos) return error(400, "The request line contains a CR.");

  HttpRequest request;
  if (std::optional<HttpParseResult> failure = parseRequestLine(requestLine->text, request)) return *failure;

  const std::size_t headersStart = requestLine->next;
  std::size_t position = headersStart;
  while (true) {
    const std::optional<Line> line = lineAt(bytes, position);
    if (!line) {
      if (bytes.size() - headersStart > limits_.maxHeaderBytes) break;  // 431 below
      return {};
    }
    if (line->next - headersStart > limits_.maxHeaderBytes) break;
    position = line->next;
    if (line->text.empty()) {
      std::size_t bodySize = 0;
      if (std::optional<HttpParseResult> failure = checkHeaders(request, limits_, bodySize)) return *failure;
      if (bytes.size() - position < bodySize) return {};
      request.body = std::string(bytes.substr(position, bodySize));
      HttpParseResult result;
      result.kind = Kind::complete;
      result.request = std::move(request);
      result.consumed = position + bodySize;
      return result;
    }
    if (line->text.find('\r') != std::string_view::npos) return error(400, "A header line contains a CR.");
    if (request.headers.size() == limits_.maxHeaderCount) {
      return error(431, "The request has more than " + std::to_string(limits_.maxHeaderCount) + " header fields.");
    }
    if (std::optional<HttpParseResult> failure = parseHeaderLine(line->text, request)) return *failure;
  }
  return error(431, "The header section is longer than " + std::to_string(limits_.maxHeaderBytes) + " bytes.");
}

QueryParameter findQueryParameter(std::string_view query, std::string_view name) {
  QueryParameter result;
  while (true) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t equals = pair.find('=');
    if (pair.substr(0, equals) == name && !pair.empty()) {
      result.found = true;
      const std::string_view raw = equals == std::string_view::npos ? std::string_view() : pair.substr(equals + 1);
      for (std::size_t i = 0; i < raw.size(); ++i) {
        if (raw[i] == '+') {
          result.value += ' ';
        } else if (raw[i] == '%') {
          const int high = i + 1 < raw.size() ? hexValue(raw[i + 1]) : -1;
          const int low = i + 2 < raw.size() ? hexValue(raw[i + 2]) : -1;
          if (high < 0 || low < 0) {
            result.malformed = true;
            result.value.clear();
            return result;
          }
          result.value += static_cast<char>(high * 16 + low);
          i += 2;
        } else {
          result.value += raw[i];
        }
      }
      return result;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return result;
}

}  // namespace offload
