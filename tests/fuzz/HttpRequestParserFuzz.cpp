// SPDX-License-Identifier: BSL-1.0
// Fuzzes offload::HttpRequestParser (examples/offload_server/HttpRequestParser.h).
//
// The input is the byte stream a client sends on one connection. It is fed to
// the parser the way HttpConnection does (parse the buffer; on complete, drop
// `consumed` bytes and parse again; on error, stop; on needMore, wait for more
// bytes), once whole and several times split into chunks at points derived
// from the input, under three sets of limits: the defaults, small ones derived
// from the input, and limits that the stream's first request fits exactly.
// Properties checked, any violation printed to stderr and then abort():
//
// - every feed of the same bytes under the same limits ends the same way: the
//   same requests (every field, and `consumed`), then the same error (status
//   and reason) or the same number of bytes left waiting for more;
// - a complete request keeps the contract of HttpRequest and HttpLimits: the
//   method is a token, the target visible ASCII, path and query split the
//   target as documented (origin form, absolute form, '*' for OPTIONS), header
//   names are tokens and values trimmed and free of control characters,
//   HTTP/1.1 has exactly one Host, Content-Length equals the body's size,
//   there is no Transfer-Encoding, keepAlive follows version and Connection,
//   header() finds the first field of a name in any case, and the request
//   line, header section, header count and body are within the limits;
// - a complete request is the same when the bytes after it are cut off, and
//   one byte short it needs more; written back in its shortest form (bare LF,
//   "name:value") it parses to the same request;
// - the request the limits fit exactly completes under them, and each limit
//   one lower gives that limit's status (414, 431, 431, 413);
// - limits no larger than the defaults change how a stream ends only by a
//   413, 414 or 431: the requests before it are the same;
// - needMore never holds more bytes than the limits allow (two empty lines,
//   request line, CRLF, header section, body), an error has one of the
//   documented statuses and a reason;
// - findQueryParameter() finds each parameter of a query and decodes it.

#include "HttpRequestParser.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

using offload::findQueryParameter;
using offload::HttpHeader;
using offload::HttpLimits;
using offload::HttpParseResult;
using offload::HttpRequest;
using offload::HttpRequestParser;
using offload::QueryParameter;
using Kind = HttpParseResult::Kind;

/// Byte-at-a-time feeds are quadratic: only for inputs up to this size.
constexpr std::size_t kByteFeedMaxSize = 300;

// ---- the run being checked, printed when a property fails --------------------

struct Run {
  const char* feed = "";
  HttpLimits limits;
  const std::vector<std::size_t>* splits = nullptr;
};

[[noreturn]] void fail(const Run& run, const char* property, const std::string& detail = {}) {
  std::fprintf(stderr,
               "HttpRequestParserFuzz: property violated: %s\n"
               "  feed: %s; limits: maxRequestLine=%zu maxHeaderBytes=%zu maxHeaderCount=%zu maxBodyBytes=%zu\n",
               property, run.feed, run.limits.maxRequestLine, run.limits.maxHeaderBytes, run.limits.maxHeaderCount,
               run.limits.maxBodyBytes);
  if (run.splits != nullptr && !run.splits->empty()) {
    std::fprintf(stderr, "  chunks end at:");
    for (std::size_t split : *run.splits)
      std::fprintf(stderr, " %zu", split);
    std::fprintf(stderr, "\n");
  }
  if (!detail.empty()) std::fprintf(stderr, "%s\n", detail.c_str());
  std::abort();
}

void check(bool ok, const Run& run, const char* property) {
  if (!ok) fail(run, property);
}

// ---- independent restatements of the grammar the header documents -------------

bool isTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool isToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), isTokenChar); }

bool isVisibleAscii(char c) { return c > ' ' && c < 0x7f; }

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) { return lower(x) == lower(y); });
}

std::string upperCase(std::string_view s) {
  std::string result(s);
  for (char& c : result)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return result;
}

int hexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

bool listHas(std::string_view list, std::string_view token) {
  std::size_t from = 0;
  while (from <= list.size()) {
    const std::size_t comma = std::min(list.find(',', from), list.size());
    if (equalsIgnoreCase(trim(list.substr(from, comma - from)), token)) return true;
    from = comma + 1;
  }
  return false;
}

std::string requestLineOf(const HttpRequest& request) {
  return request.method + ' ' + request.target + " HTTP/1." + static_cast<char>('0' + request.versionMinor);
}

/// The shortest bytes that carry `request`: bare LF line ends, "name:value".
std::string shortestForm(const HttpRequest& request) {
  std::string bytes = requestLineOf(request) + '\n';
  for (const HttpHeader& header : request.headers)
    bytes += header.name + ':' + header.value + '\n';
  return bytes + '\n' + request.body;
}

std::string describe(const HttpRequest& request) {
  std::string text = "    " + requestLineOf(request) + (request.keepAlive ? " (keep-alive)" : " (close)") + '\n';
  for (const HttpHeader& header : request.headers)
    text += "    [" + header.name + "] [" + header.value + "]\n";
  return text + "    body of " + std::to_string(request.body.size()) + " bytes; path [" + request.path + "] query [" +
         request.query + "]\n";
}

bool sameRequest(const HttpRequest& a, const HttpRequest& b) {
  if (a.method != b.method || a.target != b.target || a.path != b.path || a.query != b.query ||
      a.versionMinor != b.versionMinor || a.body != b.body || a.keepAlive != b.keepAlive ||
      a.headers.size() != b.headers.size()) {
    return false;
  }
  for (std::size_t i = 0; i < a.headers.size(); ++i) {
    if (a.headers[i].name != b.headers[i].name || a.headers[i].value != b.headers[i].value) return false;
  }
  return true;
}

// ---- properties of one parse() result -----------------------------------------

/// How the target splits into path and query, per HttpRequest's field docs.
void checkTarget(const Run& run, const HttpRequest& request) {
  const std::string& target = request.target;
  check(!target.empty() && std::all_of(target.begin(), target.end(), isVisibleAscii), run,
        "the target is non-empty visible ASCII");
  check(request.path.find('?') == std::string::npos, run, "the path holds no '?'");
  if (target == "*") {
    check(request.method == "OPTIONS", run, "the target '*' comes with OPTIONS only");
    check(request.path == "*" && request.query.empty(), run, "the target '*' is its own path");
    return;
  }
  std::string_view rest = target;
  if (target.front() != '/') {
    check(rest.size() >= 7 && equalsIgnoreCase(rest.substr(0, 7), "http://"), run,
          "a target that is no path is an http:// URL");
    rest.remove_prefix(7);
    const std::size_t hostEnd = std::min(rest.find_first_of("/?"), rest.size());
    check(hostEnd > 0, run, "an absolute-form target has a host");
    rest.remove_prefix(hostEnd);
    if (rest.empty() || rest.front() == '?') {
      check(request.path == "/", run, "an absolute-form target without a path has the path '/'");
      check(request.query == (rest.empty() ? std::string_view() : rest.substr(1)), run,
            "the query is what follows the '?'");
      return;
    }
  }
  const std::size_t question = rest.find('?');
  check(request.path == rest.substr(0, question), run, "the path is the target up to its '?'");
  check(request.query == (question == std::string_view::npos ? std::string_view() : rest.substr(question + 1)), run,
        "the query is what follows the '?'");
}

/// findQueryParameter() finds the first parameter of each name and decodes it.
void checkQuery(const Run& run, std::string_view query) {
  std::vector<std::string_view> pairs;
  std::size_t from = 0;
  while (from <= query.size() && pairs.size() < 8) {
    const std::size_t amp = std::min(query.find('&', from), query.size());
    pairs.push_back(query.substr(from, amp - from));
    from = amp + 1;
  }
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    if (pairs[i].empty()) continue;
    const std::size_t equals = pairs[i].find('=');
    const std::string_view name = pairs[i].substr(0, equals);
    bool earlier = false;
    for (std::size_t j = 0; j < i; ++j)
      earlier = earlier || (!pairs[j].empty() && pairs[j].substr(0, pairs[j].find('=')) == name);
    if (earlier) continue;
    const std::string_view raw = equals == std::string_view::npos ? std::string_view() : pairs[i].substr(equals + 1);
    std::string decoded;
    bool malformed = false;
    for (std::size_t k = 0; k < raw.size() && !malformed; ++k) {
      if (raw[k] == '+') {
        decoded += ' ';
      } else if (raw[k] != '%') {
        decoded += raw[k];
      } else if (k + 2 < raw.size() && hexDigit(raw[k + 1]) >= 0 && hexDigit(raw[k + 2]) >= 0) {
        decoded += static_cast<char>(hexDigit(raw[k + 1]) * 16 + hexDigit(raw[k + 2]));
        k += 2;
      } else {
        malformed = true;
      }
    }
    const QueryParameter found = findQueryParameter(query, name);
    check(found.found, run, "findQueryParameter finds a parameter of the query");
    check(found.malformed == malformed, run, "findQueryParameter flags exactly the bad %-escapes");
    check(found.value == (malformed ? std::string() : decoded), run,
          "findQueryParameter decodes '+' and %XX, and gives an empty value when malformed");
  }
}

/// A complete result for the request at the start of `bytes`.
void checkComplete(const Run& run, const HttpParseResult& result, std::string_view bytes) {
  const HttpRequest& request = result.request;
  const HttpLimits& limits = run.limits;
  check(result.consumed > 0 && result.consumed <= bytes.size(), run, "consumed is within the bytes given");
  check(result.status == 0 && result.reason.empty(), run, "a complete result has no status or reason");
  check(isToken(request.method), run, "the method is a token");
  check(request.versionMinor == 0 || request.versionMinor == 1, run, "the version is HTTP/1.0 or HTTP/1.1");
  check(requestLineOf(request).size() <= limits.maxRequestLine, run, "the request line is within maxRequestLine");
  checkTarget(run, request);

  check(request.headers.size() <= limits.maxHeaderCount, run, "the header count is within maxHeaderCount");
  std::size_t hosts = 0;
  bool close = false;
  bool keepAlive = false;
  for (const HttpHeader& header : request.headers) {
    check(isToken(header.name), run, "a header name is a token");
    check(trim(header.value) == header.value, run, "a header value has no surrounding whitespace");
    check(std::none_of(header.value.begin(), header.value.end(),
                       [](char c) { return (static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f; }),
          run, "a header value holds no control character");
    check(!equalsIgnoreCase(header.name, "transfer-encoding"), run, "no request with Transfer-Encoding completes");
    if (equalsIgnoreCase(header.name, "host")) ++hosts;
    if (equalsIgnoreCase(header.name, "connection")) {
      close = close || listHas(header.value, "close");
      keepAlive = keepAlive || listHas(header.value, "keep-alive");
    }
    if (equalsIgnoreCase(header.name, "content-length")) {
      const std::string& text = header.value;
      check(!text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }), run,
            "Content-Length is a decimal number");
      const std::size_t digits = text.find_first_not_of('0');
      check(digits == std::string::npos ? request.body.empty()
                                        : text.substr(digits) == std::to_string(request.body.size()),
            run, "Content-Length is the body's size");
    }
    const std::string* first = &header.value;
    for (const HttpHeader& earlier : request.headers) {
      if (equalsIgnoreCase(earlier.name, header.name)) {
        first = &earlier.value;
        break;
      }
    }
    check(request.header(upperCase(header.name)) == first, run,
          "header() finds the first field of a name, in any case");
  }
  check(request.versionMinor == 0 ? hosts <= 1 : hosts == 1, run,
        "HTTP/1.1 has exactly one Host, HTTP/1.0 at most one");
  check(request.keepAlive == (request.versionMinor == 1 ? !close : keepAlive && !close), run,
        "keepAlive follows the version and the Connection header");
  check(request.body.size() <= limits.maxBodyBytes, run, "the body is within maxBodyBytes");
  check(bytes.substr(result.consumed - request.body.size(), request.body.size()) == request.body, run,
        "the body is the bytes before `consumed`");
}

/// Bytes a needMore result may hold: two empty lines, the request line (and
/// a CR that may begin its CRLF), its CRLF, the header section, the body.
void checkNeedMore(const Run& run, const HttpParseResult& result, std::string_view bytes) {
  check(result.consumed == 0 && result.status == 0 && result.reason.empty(), run,
        "a needMore result has no consumed, status or reason");
  const HttpLimits& limits = run.limits;
  const std::size_t bound = 4 + limits.maxRequestLine + 2 + limits.maxHeaderBytes + limits.maxBodyBytes;
  check(bytes.size() <= bound, run, "needMore never holds more bytes than the limits allow");
}

void checkError(const Run& run, const HttpParseResult& result) {
  const int s = result.status;
  check(s == 400 || s == 413 || s == 414 || s == 431 || s == 501 || s == 505, run, "an error has a documented status");
  check(!result.reason.empty(), run, "an error has a reason");
}

void checkResult(const Run& run, const HttpParseResult& result, std::string_view bytes) {
  switch (result.kind) {
    case Kind::complete: checkComplete(run, result, bytes); break;
    case Kind::needMore: checkNeedMore(run, result, bytes); break;
    case Kind::error: checkError(run, result); break;
    default: fail(run, "parse() returns one of the three kinds");
  }
}

// ---- feeding a stream the way a connection does -------------------------------

struct Parsed {
  HttpRequest request;
  std::size_t consumed = 0;
};

/// How a connection's stream ended: its requests, then an error or the bytes
/// still waiting for more.
struct Outcome {
  std::vector<Parsed> requests;
  bool failed = false;
  int status = 0;
  std::string reason;
  std::size_t pending = 0;
};

std::string describe(const Outcome& outcome) {
  std::string text;
  for (const Parsed& parsed : outcome.requests)
    text += "  request of " + std::to_string(parsed.consumed) + " bytes:\n" + describe(parsed.request);
  if (outcome.failed) return text + "  error " + std::to_string(outcome.status) + ": " + outcome.reason + '\n';
  return text + "  " + std::to_string(outcome.pending) + " bytes wait for more\n";
}

bool sameOutcome(const Outcome& a, const Outcome& b) {
  if (a.requests.size() != b.requests.size() || a.failed != b.failed || a.status != b.status || a.reason != b.reason ||
      a.pending != b.pending) {
    return false;
  }
  for (std::size_t i = 0; i < a.requests.size(); ++i) {
    if (a.requests[i].consumed != b.requests[i].consumed || !sameRequest(a.requests[i].request, b.requests[i].request))
      return false;
  }
  return true;
}

/// Feeds `bytes` in chunks ending at `splits` (increasing, inside the input),
/// the last chunk ending at the end.
Outcome feed(const Run& run, std::string_view bytes, const std::vector<std::size_t>& splits) {
  const HttpRequestParser parser(run.limits);
  Outcome outcome;
  std::string buffer;
  std::size_t from = 0;
  for (std::size_t chunk = 0; chunk <= splits.size(); ++chunk) {
    const std::size_t to = chunk < splits.size() ? splits[chunk] : bytes.size();
    buffer.append(bytes.substr(from, to - from));
    from = to;
    while (true) {
      HttpParseResult result = parser.parse(buffer);
      checkResult(run, result, buffer);
      if (result.kind == Kind::needMore) break;
      if (result.kind == Kind::error) {
        outcome.failed = true;
        outcome.status = result.status;
        outcome.reason = std::move(result.reason);
        return outcome;
      }
      buffer.erase(0, result.consumed);
      outcome.requests.push_back({std::move(result.request), result.consumed});
    }
  }
  outcome.pending = buffer.size();
  return outcome;
}

/// The properties of each complete request of a whole feed that need a
/// parse() of their own.
void checkEachRequest(const Run& run, std::string_view bytes, const Outcome& whole) {
  const HttpRequestParser parser(run.limits);
  std::size_t offset = 0;
  for (const Parsed& parsed : whole.requests) {
    const std::string_view own = bytes.substr(offset, parsed.consumed);
    offset += parsed.consumed;
    const HttpParseResult alone = parser.parse(own);
    if (alone.kind != Kind::complete || alone.consumed != parsed.consumed ||
        !sameRequest(alone.request, parsed.request))
      fail(run, "a request parses the same without the bytes after it", describe(parsed.request));
    check(parser.parse(own.substr(0, own.size() - 1)).kind == Kind::needMore, run,
          "a request one byte short needs more");
    const std::string shortest = shortestForm(parsed.request);
    const HttpParseResult again = parser.parse(shortest);
    if (again.kind != Kind::complete || again.consumed != shortest.size() ||
        !sameRequest(again.request, parsed.request))
      fail(run, "a request written back in its shortest form parses the same", describe(parsed.request));
    checkQuery(run, parsed.request.query);
  }
}

// ---- split points and limits derived from the input ---------------------------

/// splitmix64 seeded by a hash of the input: the same input, the same draws.
class Draws {
 public:
  explicit Draws(std::string_view bytes) {
    state_ = 0xcbf29ce484222325ULL;
    for (char c : bytes)
      state_ = (state_ ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  }

  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }

  /// Uniform in [0, bound]; 0 if bound is 0.
  std::size_t upTo(std::size_t bound) { return bound == 0 ? 0 : static_cast<std::size_t>(next() % (bound + 1)); }

 private:
  std::uint64_t state_;
};

std::vector<std::size_t> randomSplits(Draws& draws, std::size_t size) {
  std::vector<std::size_t> splits;
  if (size < 2) return splits;
  const std::size_t count = 1 + draws.upTo(6);
  for (std::size_t i = 0; i < count; ++i)
    splits.push_back(1 + draws.upTo(size - 2));
  std::sort(splits.begin(), splits.end());
  splits.erase(std::unique(splits.begin(), splits.end()), splits.end());
  return splits;
}

/// Chunks that end right after each CR and each LF: a line end split in two.
std::vector<std::size_t> lineEndSplits(std::string_view bytes) {
  std::vector<std::size_t> splits;
  for (std::size_t i = 0; i + 1 < bytes.size(); ++i)
    if (bytes[i] == '\r' || bytes[i] == '\n') splits.push_back(i + 1);
  return splits;
}

std::vector<std::size_t> everyByte(std::size_t size) {
  std::vector<std::size_t> splits;
  for (std::size_t i = 1; i < size; ++i)
    splits.push_back(i);
  return splits;
}

/// Small limits, each now and then left at its default: the limit checks see
/// every kind of edge, including 0.
HttpLimits smallLimits(Draws& draws) {
  const HttpLimits defaults;
  HttpLimits limits;
  limits.maxRequestLine = draws.upTo(3) == 0 ? defaults.maxRequestLine : draws.upTo(96);
  limits.maxHeaderBytes = draws.upTo(3) == 0 ? defaults.maxHeaderBytes : draws.upTo(256);
  limits.maxHeaderCount = draws.upTo(3) == 0 ? defaults.maxHeaderCount : draws.upTo(8);
  limits.maxBodyBytes = draws.upTo(3) == 0 ? defaults.maxBodyBytes : draws.upTo(128);
  return limits;
}

/// Feeds `bytes` whole and in chunks under `limits`; every feed must end as
/// the whole one does, which is returned.
Outcome checkFeeds(const char* name, const HttpLimits& limits, std::string_view bytes, Draws& draws) {
  const std::vector<std::size_t> none;
  const Run wholeRun{name, limits, &none};
  const Outcome whole = feed(wholeRun, bytes, none);
  checkEachRequest(wholeRun, bytes, whole);

  std::vector<std::vector<std::size_t>> splitSets = {randomSplits(draws, bytes.size()),
                                                     randomSplits(draws, bytes.size()), lineEndSplits(bytes)};
  if (bytes.size() <= kByteFeedMaxSize) splitSets.push_back(everyByte(bytes.size()));
  for (const std::vector<std::size_t>& splits : splitSets) {
    if (splits.empty()) continue;
    const Run run{name, limits, &splits};
    const Outcome chunked = feed(run, bytes, splits);
    if (!sameOutcome(chunked, whole)) {
      fail(run, "the stream ends the same whether fed whole or in chunks",
           "whole:\n" + describe(whole) + "in chunks:\n" + describe(chunked));
    }
  }
  return whole;
}

/// Limits no larger than the defaults change an outcome only by a limit's own
/// error (413, 414, 431), which may come where the defaults go on: before it,
/// the same requests; without it, the same outcome.
void checkLowerLimits(const Run& run, const Outcome& lower, const Outcome& underDefaults) {
  const bool limitError = lower.failed && (lower.status == 413 || lower.status == 414 || lower.status == 431);
  bool same = limitError ? lower.requests.size() <= underDefaults.requests.size() : sameOutcome(lower, underDefaults);
  for (std::size_t i = 0; same && i < lower.requests.size(); ++i) {
    same = lower.requests[i].consumed == underDefaults.requests[i].consumed &&
           sameRequest(lower.requests[i].request, underDefaults.requests[i].request);
  }
  if (!same) {
    fail(run, "lower limits change an outcome only by a 413, 414 or 431",
         "under these limits:\n" + describe(lower) + "under the defaults:\n" + describe(underDefaults));
  }
}

/// Limits the first request of `bytes` (as parsed under the defaults) fits
/// exactly; each one lower must be refused with that limit's status.
void checkExactLimits(std::string_view bytes, const Outcome& underDefaults, Draws& draws) {
  const Parsed& first = underDefaults.requests.front();
  const HttpRequest& request = first.request;
  const Run defaultsRun{"exact limits", HttpLimits{}, nullptr};
  const std::string requestLine = requestLineOf(request);
  const std::size_t lineStart = bytes.find(requestLine);
  check(lineStart != std::string_view::npos && lineStart <= 4 &&
            bytes.substr(0, lineStart).find_first_not_of("\r\n") == std::string_view::npos,
        defaultsRun, "the request line follows at most two empty lines");
  std::size_t headersStart = lineStart + requestLine.size();
  check(bytes.substr(headersStart, 1) == "\n" || bytes.substr(headersStart, 2) == "\r\n", defaultsRun,
        "the request line ends with CRLF or LF");
  headersStart += bytes[headersStart] == '\n' ? 1 : 2;
  check(first.consumed >= headersStart + request.body.size(), defaultsRun, "consumed covers the header section");

  HttpLimits exact;
  exact.maxRequestLine = requestLine.size();
  exact.maxHeaderBytes = first.consumed - request.body.size() - headersStart;
  exact.maxHeaderCount = request.headers.size();
  exact.maxBodyBytes = request.body.size();

  const Outcome fitted = checkFeeds("exact limits", exact, bytes, draws);
  const Run exactRun{"exact limits", exact, nullptr};
  if (fitted.requests.empty() || fitted.requests.front().consumed != first.consumed ||
      !sameRequest(fitted.requests.front().request, request)) {
    fail(exactRun, "a request completes under limits it fits exactly", describe(request));
  }
  checkLowerLimits(exactRun, fitted, underDefaults);

  const auto expectRefused = [&](HttpLimits limits, int status, const char* property) {
    const Run run{"one below the exact limits", limits, nullptr};
    const HttpParseResult result = HttpRequestParser(limits).parse(bytes);
    if (result.kind != Kind::error || result.status != status) {
      fail(run, property,
           "got kind " + std::to_string(static_cast<int>(result.kind)) + " status " + std::to_string(result.status) +
               ": " + result.reason);
    }
  };
  const HttpLimits defaults;
  if (exact.maxRequestLine > 0) {
    HttpLimits limits = defaults;
    limits.maxRequestLine = exact.maxRequestLine - 1;
    expectRefused(limits, 414, "a request line one byte above maxRequestLine is 414");
  }
  if (exact.maxHeaderBytes > 0) {
    HttpLimits limits = defaults;
    limits.maxHeaderBytes = exact.maxHeaderBytes - 1;
    expectRefused(limits, 431, "a header section one byte above maxHeaderBytes is 431");
  }
  if (exact.maxHeaderCount > 0) {
    HttpLimits limits = defaults;
    limits.maxHeaderCount = exact.maxHeaderCount - 1;
    expectRefused(limits, 431, "one header field above maxHeaderCount is 431");
  }
  if (exact.maxBodyBytes > 0) {
    HttpLimits limits = defaults;
    limits.maxBodyBytes = exact.maxBodyBytes - 1;
    expectRefused(limits, 413, "a body one byte above maxBodyBytes is 413");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  Draws draws(bytes);
  const Outcome underDefaults = checkFeeds("default limits", HttpLimits{}, bytes, draws);
  const HttpLimits small = smallLimits(draws);
  checkLowerLimits({"small limits", small, nullptr}, checkFeeds("small limits", small, bytes, draws), underDefaults);
  if (!underDefaults.requests.empty()) checkExactLimits(bytes, underDefaults, draws);
  return 0;
}
