// SPDX-License-Identifier: BSL-1.0
// Fan-out / fan-in with coroutines only: count the lines, words and bytes of
// every regular file under some directories, one pool task per file, then
// combine the counts. No thread blocks on a Future: main runs one coroutine
// with syncWait, and that coroutine co_awaits the pool's work.
//
//   usage: fanout [directory...]
//
// Without arguments it counts the project's own sources: ./include and ./src
// when run from the source tree; when run by ctest from the build tree, the
// include/ and src/ of the nearest parent directory that holds include/coexec;
// otherwise the current directory.
//
// The pool is small and bounded: core 2, max 4, a queue of 8, and callerRuns.
// When four threads are busy and eight files wait, the coroutine that hands
// out the work counts the next file itself, which slows the fan-out down
// instead of failing it.
//
// The program checks its totals against a sequential recount and the pool's
// ledger against the number of files, and exits non-zero on a mismatch.

#include <coexec/coexec.h>

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fs = std::filesystem;

namespace {

struct FileCount {
  fs::path path;
  std::uint64_t lines = 0;
  std::uint64_t words = 0;
  std::uint64_t bytes = 0;
};

/// Counts like `wc`: newlines, runs of non-space characters, bytes.
FileCount countFile(const fs::path& path) {
  FileCount count{path};
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path.string());
  char buffer[64 * 1024];
  bool inWord = false;
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    const std::string_view chunk(buffer, static_cast<std::size_t>(in.gcount()));
    count.bytes += chunk.size();
    for (const char c : chunk) {
      if (c == '\n') ++count.lines;
      const bool space = std::isspace(static_cast<unsigned char>(c)) != 0;
      if (!space && !inWord) ++count.words;
      inWord = !space;
    }
  }
  return count;
}

struct Summary {
  std::uint64_t files = 0;
  std::uint64_t lines = 0;
  std::uint64_t words = 0;
  std::uint64_t bytes = 0;
  std::vector<FileCount> largest;  // the five largest files, largest first

  void add(FileCount count) {
    ++files;
    lines += count.lines;
    words += count.words;
    bytes += count.bytes;
    largest.push_back(std::move(count));
    std::sort(largest.begin(), largest.end(), [](const FileCount& a, const FileCount& b) {
      return a.bytes != b.bytes ? a.bytes > b.bytes : a.path < b.path;
    });
    if (largest.size() > 5) largest.pop_back();
  }
};

// Fan-out: one pool task per file. Fan-in: await each Future in turn; the
// coroutine suspends (its thread is free) until that file has been counted.
coexec::Task<Summary> countAll(coexec::ThreadPoolExecutor& pool, std::vector<fs::path> files) {
  std::vector<coexec::Future<FileCount>> counts;
  counts.reserve(files.size());
  for (const fs::path& file : files) {
    counts.push_back(pool.submit([file] { return countFile(file); }));
  }
  Summary summary;
  for (coexec::Future<FileCount>& count : counts) {
    summary.add(co_await count);
  }
  co_return summary;
}

/// Directories to count, relative to `base` (empty: the current directory).
struct Roots {
  fs::path base;
  std::vector<fs::path> dirs;
};

/// The directories to count when none are given (see the top of the file).
Roots defaultRoots() {
  const fs::path here = fs::current_path();
  if (fs::is_directory(here / "include") && fs::is_directory(here / "src")) return {{}, {"include", "src"}};
  fs::path dir = here;
  for (int up = 0; up < 4 && dir.has_parent_path() && dir.parent_path() != dir; ++up) {
    dir = dir.parent_path();
    if (fs::is_directory(dir / "include" / "coexec") && fs::is_directory(dir / "src")) return {dir, {"include", "src"}};
  }
  return {{}, {"."}};
}

/// Every regular file under `dirs`, sorted.
std::vector<fs::path> regularFiles(const std::vector<fs::path>& dirs) {
  std::vector<fs::path> files;
  for (const fs::path& dir : dirs) {
    for (const fs::directory_entry& entry :
         fs::recursive_directory_iterator(dir, fs::directory_options::skip_permission_denied)) {
      if (entry.is_regular_file()) files.push_back(entry.path().lexically_normal());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

int failures = 0;

void check(bool ok, std::string_view what) {
  fmt::print("{:<62} {}\n", what, ok ? "ok" : "MISMATCH");
  failures += ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) try {
  Roots roots;
  for (int i = 1; i < argc; ++i)
    roots.dirs.emplace_back(argv[i]);
  if (roots.dirs.empty()) roots = defaultRoots();
  for (const fs::path& dir : roots.dirs) {
    if (!fs::is_directory(roots.base / dir)) {
      fmt::print(stderr, "fanout: '{}' is not a directory\nusage: fanout [directory...]\n", dir.string());
      return 2;
    }
  }
  if (!roots.base.empty()) fs::current_path(roots.base);  // print paths relative to the source tree
  const std::vector<fs::path> files = regularFiles(roots.dirs);

  coexec::ThreadPoolOptions options;
  options.name = "fanout";
  options.corePoolSize = 2;
  options.maximumPoolSize = 4;
  options.workQueue = coexec::WorkQueue::bounded(8);
  options.rejectionPolicy = coexec::RejectionPolicy::callerRuns();
  coexec::ThreadPoolExecutor pool(options);

  std::string dirList;
  for (const fs::path& dir : roots.dirs)
    dirList += (dirList.empty() ? "" : ", ") + dir.string();
  fmt::print("coexec fanout: {} files under {} in {}\npool '{}': core {}, max {}, queue {}, policy {}\n\n",
             files.size(), dirList, fs::current_path().string(), pool.name(), pool.corePoolSize(),
             pool.maximumPoolSize(), pool.workQueue().describe(), pool.rejectionPolicy().name());

  const Summary summary = coexec::syncWait(countAll(pool, files));
  pool.shutdown();
  (void)pool.awaitTermination(std::chrono::seconds(60));
  const coexec::PoolStats stats = pool.stats();

  fmt::print("{:>12} files\n{:>12} lines\n{:>12} words\n{:>12} bytes\n\n", summary.files, summary.lines, summary.words,
             summary.bytes);
  if (!summary.largest.empty()) {
    fmt::print("largest files:\n{:>10} {:>8} {:>8}  {}\n", "bytes", "lines", "words", "path");
    for (const FileCount& f : summary.largest) {
      fmt::print("{:>10} {:>8} {:>8}  {}\n", f.bytes, f.lines, f.words, f.path.string());
    }
    fmt::print("\n");
  }
  fmt::print("{}\n", stats);
  fmt::print("{} files counted on pool threads, {} by the submitting coroutine (callerRuns)\n\n", stats.taskCount,
             stats.rejectedCount);

  // The self-check: a sequential recount, and the pool's ledger.
  Summary recount;
  for (const fs::path& file : files)
    recount.add(countFile(file));
  check(summary.files == files.size(), "every file was counted once");
  check(summary.lines == recount.lines && summary.words == recount.words && summary.bytes == recount.bytes,
        "the totals equal a sequential recount");
  check(stats.taskCount + stats.rejectedCount == files.size(),
        "each file ran on the pool or, when it was full, in the caller");
  check(stats.completedTaskCount == stats.taskCount && stats.failedCount == 0, "every pool task completed");

  if (failures != 0) {
    fmt::print("{} check(s) failed\n", failures);
    return 1;
  }
  fmt::print("fan-out and fan-in agree\n");
  return 0;
} catch (const std::exception& e) {
  fmt::print(stderr, "fanout: {}\n", e.what());
  return 1;
}
