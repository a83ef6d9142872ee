// SPDX-License-Identifier: BSL-1.0
#include "HttpRequestParser.h"

#include <string>
#include <string_view>

#include "Assertions.h"

// The offload server's request parser (examples/offload_server): bytes in,
// a request or a precise error out.

namespace {

using offload::findQueryParameter;
using offload::HttpLimits;
using offload::HttpParseResult;
using offload::HttpRequestParser;
using Kind = HttpParseResult::Kind;

HttpParseResult parse(std::string_view bytes, HttpLimits limits = {}) { return HttpRequestParser(limits).parse(bytes); }

// The status of an error result; fails the test if the result is no error.
int errorStatus(const HttpParseResult& result) {
  INFO("kind " << static_cast<int>(result.kind) << ", reason: " << result.reason);
  REQUIRE(result.kind == Kind::error);
  CHECK(!result.reason.empty());
  return result.status;
}

}  // namespace

TEST_CASE("a complete GET request is parsed into its parts", "[http][parser]") {
  const std::string bytes = "GET /work?n=100&x=1 HTTP/1.1\r\nHost: localhost:8080\r\nAccept:  */* \r\n\r\n";
  const HttpParseResult result = parse(bytes);
  REQUIRE(result.kind == Kind::complete);
  CHECK(result.consumed == bytes.size());
  CHECK(result.request.method == "GET");
  CHECK(result.request.target == "/work?n=100&x=1");
  CHECK(result.request.path == "/work");
  CHECK(result.request.query == "n=100&x=1");
  CHECK(result.request.versionMinor == 1);
  CHECK(result.request.keepAlive);
  REQUIRE(result.request.headers.size() == 2);
  CHECK(result.request.headers[1].name == "Accept");
  CHECK(result.request.headers[1].value == "*/*");
  REQUIRE(result.request.header("HOST") != nullptr);
  CHECK(*result.request.header("host") == "localhost:8080");
  CHECK(result.request.header("Cookie") == nullptr);
  CHECK(result.request.body.empty());
}

TEST_CASE("every proper prefix of a request needs more bytes", "[http][parser]") {
  const std::string bytes = "POST /p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    INFO("prefix of " << size << " bytes");
    CHECK(parse(std::string_view(bytes).substr(0, size)).kind == Kind::needMore);
  }
  const HttpParseResult result = parse(bytes);
  REQUIRE(result.kind == Kind::complete);
  CHECK(result.request.body == "hello");
  CHECK(result.consumed == bytes.size());
}

TEST_CASE("pipelined requests are parsed one at a time, consumed says where the next begins", "[http][parser]") {
  const std::string first = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
  const std::string second = "GET /b HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  const std::string bytes = first + second;
  const HttpParseResult one = parse(bytes);
  REQUIRE(one.kind == Kind::complete);
  CHECK(one.consumed == first.size());
  CHECK(one.request.path == "/a");
  const HttpParseResult two = parse(std::string_view(bytes).substr(one.consumed));
  REQUIRE(two.kind == Kind::complete);
  CHECK(two.request.path == "/b");
  CHECK_FALSE(two.request.keepAlive);
}

TEST_CASE("keep-alive follows the version and the Connection header", "[http][parser]") {
  CHECK(parse("GET / HTTP/1.1\r\nHost: h\r\n\r\n").request.keepAlive);
  CHECK_FALSE(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Close\r\n\r\n").request.keepAlive);
  CHECK_FALSE(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade, close\r\n\r\n").request.keepAlive);
  CHECK_FALSE(parse("GET / HTTP/1.0\r\n\r\n").request.keepAlive);
  const HttpParseResult old = parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  REQUIRE(old.kind == Kind::complete);
  CHECK(old.request.versionMinor == 0);
  CHECK(old.request.keepAlive);
}

TEST_CASE("bare LF line ends and up to two leading empty lines are accepted", "[http][parser]") {
  CHECK(parse("GET / HTTP/1.1\nHost: h\n\n").kind == Kind::complete);
  const std::string request = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  const HttpParseResult leading = parse("\r\n\r\n" + request);
  REQUIRE(leading.kind == Kind::complete);
  CHECK(leading.consumed == 4 + request.size());
  CHECK(errorStatus(parse("\r\n\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n")) == 400);
}

TEST_CASE("absolute-form targets are reduced to their path, '*' is only for OPTIONS", "[http][parser]") {
  const HttpParseResult absolute = parse("GET http://example.com/work?n=5 HTTP/1.1\r\nHost: example.com\r\n\r\n");
  REQUIRE(absolute.kind == Kind::complete);
  CHECK(absolute.request.path == "/work");
  CHECK(absolute.request.query == "n=5");
  const HttpParseResult bare = parse("GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n");
  REQUIRE(bare.kind == Kind::complete);
  CHECK(bare.request.path == "/");
  CHECK(parse("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n").kind == Kind::complete);
  CHECK(errorStatus(parse("GET * HTTP/1.1\r\nHost: h\r\n\r\n")) == 400);
  CHECK(errorStatus(parse("GET ftp://x/ HTTP/1.1\r\nHost: h\r\n\r\n")) == 400);
  CHECK(errorStatus(parse("GET http:/// HTTP/1.1\r\nHost: h\r\n\r\n")) == 400);
}

TEST_CASE("malformed request lines are 400", "[http][parser][errors]") {
  for (const char* line : {"GET\r\n", "GET /\r\n", "GET  / HTTP/1.1\r\n", "GET / HTTP/1.1 \r\n", "G(T / HTTP/1.1\r\n",
                           " GET / HTTP/1.1\r\n", "GET / HTTP/11\r\n", "GET / http/1.1\r\n", "GET / HTTP/1.x\r\n",
                           "GET relative HTTP/1.1\r\n", "GET /a\x01 HTTP/1.1\r\n", "GET /a\rb HTTP/1.1\r\n",
                           "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\r\n"}) {
    INFO("request line: " << line);
    CHECK(errorStatus(parse(std::string(line) + "Host: h\r\n\r\n")) == 400);
  }
}

TEST_CASE("versions other than HTTP/1.0 and 1.1 are 505", "[http][parser][errors]") {
  CHECK(errorStatus(parse("GET / HTTP/2.0\r\nHost: h\r\n\r\n")) == 505);
  CHECK(errorStatus(parse("GET / HTTP/1.2\r\nHost: h\r\n\r\n")) == 505);
  CHECK(errorStatus(parse("GET / HTTP/0.9\r\n\r\n")) == 505);
}

TEST_CASE("malformed header fields are 400", "[http][parser][errors]") {
  for (const char* header : {"NoColon\r\n", "Bad Name: v\r\n", "Name : v\r\n", ": v\r\n", "X: a\x01b\r\n",
                             "X: a\rb\r\n", "X: v\r\n folded\r\n"}) {
    INFO("header: " << header);
    CHECK(errorStatus(parse(std::string("GET / HTTP/1.1\r\nHost: h\r\n") + header + "\r\n")) == 400);
  }
}

TEST_CASE("HTTP/1.1 needs exactly one Host header", "[http][parser][errors]") {
  CHECK(errorStatus(parse("GET / HTTP/1.1\r\n\r\n")) == 400);
  CHECK(errorStatus(parse("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n")) == 400);
  CHECK(parse("GET / HTTP/1.0\r\n\r\n").kind == Kind::complete);
}

TEST_CASE("Content-Length must be one decimal number, Transfer-Encoding is 501", "[http][parser][errors]") {
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\n";
  CHECK(errorStatus(parse(head + "Content-Length: abc\r\n\r\n")) == 400);
  CHECK(errorStatus(parse(head + "Content-Length: -1\r\n\r\n")) == 400);
  CHECK(errorStatus(parse(head + "Content-Length: 1 2\r\n\r\n")) == 400);
  CHECK(errorStatus(parse(head + "Content-Length: \r\n\r\n")) == 400);
  CHECK(errorStatus(parse(head + "Content-Length: 1\r\nContent-Length: 2\r\n\r\nab")) == 400);
  CHECK(parse(head + "Content-Length: 2\r\nContent-Length: 2\r\n\r\nab").kind == Kind::complete);
  CHECK(errorStatus(parse(head + "Transfer-Encoding: chunked\r\n\r\n")) == 501);
  CHECK(errorStatus(parse(head + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n")) == 400);
}

TEST_CASE("a body above maxBodyBytes is 413 as soon as the headers are complete", "[http][parser][limits]") {
  HttpLimits limits;
  limits.maxBodyBytes = 10;
  const std::string head = "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: ";
  CHECK(parse(head + "10\r\n\r\n0123456789", limits).kind == Kind::complete);
  CHECK(errorStatus(parse(head + "11\r\n\r\n", limits)) == 413);
  CHECK(errorStatus(parse(head + "99999999999999999999999999\r\n\r\n", limits)) == 413);
}

TEST_CASE("a request line above maxRequestLine is 414, even before its end arrives", "[http][parser][limits]") {
  HttpLimits limits;
  limits.maxRequestLine = 64;
  const std::string fits = "GET /" + std::string(64 - 14, 'a') + " HTTP/1.1";
  REQUIRE(fits.size() == 64);
  CHECK(parse(fits + "\r\nHost: h\r\n\r\n", limits).kind == Kind::complete);
  const std::string tooLong = "GET /" + std::string(64 - 13, 'a') + " HTTP/1.1";
  CHECK(errorStatus(parse(tooLong + "\r\nHost: h\r\n\r\n", limits)) == 414);
  CHECK(parse(std::string(64, 'G'), limits).kind == Kind::needMore);
  CHECK(errorStatus(parse(std::string(65, 'G'), limits)) == 414);
}

TEST_CASE("a header section above maxHeaderBytes or maxHeaderCount is 431", "[http][parser][limits]") {
  HttpLimits limits;
  limits.maxHeaderBytes = 100;
  limits.maxHeaderCount = 3;
  const std::string line = "GET / HTTP/1.1\r\n";
  // Without an end in sight: refused once more than the limit has arrived.
  CHECK(parse(line + "Host: h\r\nX: " + std::string(80, 'v'), limits).kind == Kind::needMore);
  CHECK(errorStatus(parse(line + "Host: h\r\nX: " + std::string(100, 'v'), limits)) == 431);
  CHECK(errorStatus(parse(line + "Host: h\r\nX: " + std::string(100, 'v') + "\r\n\r\n", limits)) == 431);
  CHECK(parse(line + "Host: h\r\nA: 1\r\nB: 2\r\n\r\n", limits).kind == Kind::complete);
  CHECK(errorStatus(parse(line + "Host: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits)) == 431);
}

TEST_CASE("the method is any token: the router decides which are allowed", "[http][parser]") {
  const HttpParseResult result = parse("BREW /pot HTTP/1.1\r\nHost: h\r\n\r\n");
  REQUIRE(result.kind == Kind::complete);
  CHECK(result.request.method == "BREW");
}

TEST_CASE("query parameters are found by name and decoded", "[http][parser][query]") {
  CHECK(findQueryParameter("n=100", "n").value == "100");
  CHECK(findQueryParameter("a=1&n=2&n=3", "n").value == "2");
  CHECK(findQueryParameter("nn=1&n=%32%33", "n").value == "23");
  CHECK(findQueryParameter("q=a+b%20c", "q").value == "a b c");
  const auto empty = findQueryParameter("n=&m=1", "n");
  CHECK(empty.found);
  CHECK(empty.value.empty());
  const auto bare = findQueryParameter("flag", "flag");
  CHECK(bare.found);
  CHECK_FALSE(findQueryParameter("", "n").found);
  CHECK_FALSE(findQueryParameter("m=1&&x", "n").found);
  const auto bad = findQueryParameter("n=%4", "n");
  CHECK(bad.found);
  CHECK(bad.malformed);
  CHECK(findQueryParameter("n=%zz1", "n").malformed);
}

// Found by fuzzing (tests/fuzz/HttpRequestParserFuzz.cpp): the same bytes must
// give the same answer however the network splits them.

TEST_CASE("a request line of exactly maxRequestLine bytes still fits when its CR arrives before its LF",
          "[http][fuzz]") {
  HttpLimits limits;
  limits.maxRequestLine = 64;
  const std::string line = "GET /" + std::string(64 - 14, 'a') + " HTTP/1.1";
  REQUIRE(line.size() == 64);
  CHECK(parse(line + "\r", limits).kind == Kind::needMore);
  CHECK(parse("\r\n" + line + "\r", limits).kind == Kind::needMore);
  CHECK(parse(line + "\r\nHost: h\r\n\r\n", limits).kind == Kind::complete);
  // One byte more that is no line end is still refused at once.
  CHECK(errorStatus(parse(line + "a", limits)) == 414);
  CHECK(errorStatus(parse(line + "\ra", limits)) == 414);
  // The fuzzer's input: two bytes fit a limit of 2, so the line is parsed (and
  // refused for its content) rather than refused as too long when split.
  limits.maxRequestLine = 2;
  CHECK(parse("\xfe\x01\r", limits).kind == Kind::needMore);
  CHECK(errorStatus(parse("\xfe\x01\r\n", limits)) == 400);
}

TEST_CASE("an http:// target of the scheme alone has no host and is 400", "[http][fuzz]") {
  CHECK(errorStatus(parse("GET http:// HTTP/1.1\r\nHost: h\r\n\r\n")) == 400);
  CHECK(errorStatus(parse("O HTTP:// HTTP/1.1\nHost:\n\n")) == 400);
  CHECK(parse("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n").kind == Kind::complete);
}
