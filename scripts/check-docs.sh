#!/usr/bin/env bash
# Checks that the API reference renders: opens its main page and the
# ThreadPoolExecutor class page in headless Chromium, screenshots both and
# reads the class page's text as the browser built it.
#
#   scripts/check-docs.sh [HTML_DIR]    (default build/docs/html; make docs runs it)
#
# Fails, saying which, unless both screenshots are PNGs of the window's size
# that are more than a blank page, and the class page names submit, invokeAll
# and shutdownNow. The screenshots stay in HTML_DIR/../check/ to look at.
set -euo pipefail

html_dir=$(realpath -m "${1:-build/docs/html}")
out_dir=$(dirname "$html_dir")/check
width=1280
height=2000
# A blank page of this size is a PNG of about 12 KB; a page of the reference is hundreds of KB.
min_png_bytes=50000
class_page=classcoexec_1_1ThreadPoolExecutor.html
words=(submit invokeAll shutdownNow)

fail() {
  echo "check-docs: FAIL: $*" >&2
  exit 1
}

browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || fail "chromium not found (make docs-deps installs it)"
for page in index.html "$class_page"; do
  [ -f "$html_dir/$page" ] || fail "$html_dir/$page does not exist (run doxygen docs/Doxyfile first)"
done
mkdir -p "$out_dir"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

chromium_run() {
  # A throwaway profile, no GPU, no sandbox (root in a container), bounded time.
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage \
    --user-data-dir="$profile" --hide-scrollbars --window-size="$width,$height" "$@" 2>>"$out_dir/chromium.log"
}

: >"$out_dir/chromium.log"
for page in index.html "$class_page"; do
  png="$out_dir/${page%.html}.png"
  rm -f "$png"
  chromium_run --screenshot="$png" "file://$html_dir/$page" >/dev/null ||
    fail "chromium could not screenshot $page (see $out_dir/chromium.log)"
  [ -s "$png" ] || fail "no screenshot of $page at $png (see $out_dir/chromium.log)"
  python3 - "$png" "$width" "$height" "$min_png_bytes" <<'EOF' || fail "the screenshot of $page is not a rendered page"
import struct, sys
path, width, height, min_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
data = open(path, "rb").read()
if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
    sys.exit(f"check-docs: {path} is not a PNG")
w, h = struct.unpack(">II", data[16:24])
if (w, h) != (width, height):
    sys.exit(f"check-docs: {path} is {w}x{h}, not {width}x{height}")
if len(data) < min_bytes:
    sys.exit(f"check-docs: {path} has {len(data)} bytes, under {min_bytes}: a blank or nearly blank page")
print(f"check-docs: {path}: {w}x{h} PNG, {len(data)} bytes")
EOF
done

dom="$out_dir/${class_page%.html}.dom.html"
chromium_run --dump-dom "file://$html_dir/$class_page" >"$dom" ||
  fail "chromium could not load $class_page (see $out_dir/chromium.log)"
python3 - "$dom" "${words[@]}" <<'EOF' || fail "the ThreadPoolExecutor page does not show its API (DOM in $dom)"
import html.parser, re, sys
class Text(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.parts, self.skip = [], 0
    def handle_starttag(self, tag, attrs):
        self.skip += tag in ("script", "style")
    def handle_endtag(self, tag):
        self.skip -= tag in ("script", "style")
    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)
parser = Text()
parser.feed(open(sys.argv[1], encoding="utf-8").read())
text = " ".join(parser.parts)
if "ThreadPoolExecutor Class Reference" not in text:
    sys.exit("check-docs: the page's text has no 'ThreadPoolExecutor Class Reference' title")
missing = [w for w in sys.argv[2:] if not re.search(r"\b%s\b" % re.escape(w), text)]
if missing:
    sys.exit("check-docs: the page's text does not name " + ", ".join(missing))
print("check-docs: the ThreadPoolExecutor page names " + ", ".join(sys.argv[2:]))
EOF
echo "check-docs: OK: the reference renders (screenshots in $out_dir)"
