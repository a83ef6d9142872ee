// SPDX-License-Identifier: BSL-1.0
#pragma once

// The reporting side of the harness (bench_report): every sample of a
// bench/run.sh session -> the ratio table and the goals, a CSV, a markdown
// table and an SVG chart of coexec against the best peer of each metric;
// and, for run.sh's scaling mode, the table of W1, W2 and W4 by worker
// count. Uses Harness.h's statistics (Stat, summarize, cell).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <ostream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "Harness.h"

namespace bench {

// ---- reporting: every sample of a session -> table, CSV, markdown, SVG ---------

/// A goal of the scheduler work, checked on medians. The value is coexec's
/// median of `metric` on `workload`; with a `peer`, its ratio to that
/// implementation's median of `peerMetric` on `peerWorkload` (each empty:
/// the same as coexec's). `peer` may be "coexec" itself, to compare two of
/// its workloads. Met when lo <= value <= hi. `kept`: a goal of an earlier
/// round that still holds; the report lists those after the others.
struct Goal {
  std::string workload, metric, peer;
  double lo, hi;
  std::string text;
  std::string peerWorkload{}, peerMetric{};
  bool kept = false;
};

namespace detail {

inline const std::string kSubject = "coexec";

/// The column order: coexec, then its peers; an implementation not named
/// here comes after them, in the order of its first sample.
inline const std::vector<std::string> kImplOrder{"coexec", "asio", "tbb", "tpe", "fjp"};

/// One metric of one workload (and, in the scaling table, one worker count).
struct Row {
  std::string workload, metric, unit;
  Better better = Better::none;
  int workers = 0;                                    // scaling table only
  std::map<std::string, std::vector<double>> values;  // impl -> samples
};

struct Session {
  std::vector<Row> rows;
  std::vector<std::string> impls;  // coexec first
  std::vector<std::string> peers;  // impls without coexec
};

inline std::vector<std::string> splitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, ',');)
    out.push_back(field);
  return out;
}

/// Reads `run,impl,workload,metric,unit,better,value` lines after a header;
/// `byWorkers`: `workers,run,impl,...` (the scaling mode's samples), one row
/// per worker count. False if the file cannot be read.
inline bool readSession(const char* path, bool byWorkers, Session& s) {
  std::ifstream in(path);
  if (!in) return false;
  const std::size_t skip = byWorkers ? 1 : 0;
  std::vector<std::string> seen;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const auto f = splitCsv(line);
    if (f.size() != 7 + skip) continue;
    const int workers = byWorkers ? std::atoi(f[0].c_str()) : 0;
    const std::string &impl = f[skip + 1], &workload = f[skip + 2], &metric = f[skip + 3];
    auto it = std::find_if(s.rows.begin(), s.rows.end(), [&](const Row& r) {
      return r.workload == workload && r.metric == metric && r.workers == workers;
    });
    if (it == s.rows.end())
      it = s.rows.insert(s.rows.end(), Row{workload, metric, f[skip + 4], parseBetter(f[skip + 5]), workers, {}});
    it->values[impl].push_back(std::atof(f[skip + 6].c_str()));
    if (std::find(seen.begin(), seen.end(), impl) == seen.end()) seen.push_back(impl);
  }
  for (const auto& i : kImplOrder)
    if (std::find(seen.begin(), seen.end(), i) != seen.end()) s.impls.push_back(i);
  for (const auto& i : seen)
    if (std::find(kImplOrder.begin(), kImplOrder.end(), i) == kImplOrder.end()) s.impls.push_back(i);
  for (const auto& i : s.impls)
    if (i != kSubject) s.peers.push_back(i);
  if (byWorkers) {  // each workload's rows together, metrics in their first order, workers ascending
    std::vector<std::string> order;
    for (const auto& r : s.rows)
      if (std::find(order.begin(), order.end(), r.workload + "/" + r.metric) == order.end())
        order.push_back(r.workload + "/" + r.metric);
    auto rank = [&](const Row& r) {
      return std::find(order.begin(), order.end(), r.workload + "/" + r.metric) - order.begin();
    };
    std::stable_sort(s.rows.begin(), s.rows.end(), [&](const Row& a, const Row& b) {
      return rank(a) != rank(b) ? rank(a) < rank(b) : a.workers < b.workers;
    });
  }
  return true;
}

inline Stat stat(const Row& r, const std::string& impl) {
  return summarize(r.values.count(impl) ? r.values.at(impl) : std::vector<double>{});
}

/// The peer with the best median on this row ("" if no peer has one, or the
/// metric has no better direction).
inline std::string bestPeer(const Row& r, const std::vector<std::string>& peers) {
  std::string best;
  double bestMedian = 0;
  if (r.better == Better::none) return best;
  for (const auto& p : peers) {
    const Stat s = stat(r, p);
    if (s.count == 0) continue;
    if (best.empty() || (r.better == Better::higher ? s.median > bestMedian : s.median < bestMedian)) {
      best = p;
      bestMedian = s.median;
    }
  }
  return best;
}

/// "3.10x better" / "0.80x worse" for coexec / peer.
inline std::string ratioCell(const Row& row, const std::string& peer) {
  const Stat a = stat(row, kSubject);
  const Stat b = stat(row, peer);
  if (a.count == 0 || b.count == 0 || b.median == 0) return "-";
  const double r = a.median / b.median;
  if (row.better == Better::none) return "-";
  if (r == 1) return "1x";
  const bool better = (row.better == Better::higher) == (r > 1);
  return fmt::format("{}x {}", num(r), better ? "better" : "worse");
}

inline std::string direction(Better b) { return b == Better::higher ? "higher" : b == Better::lower ? "lower" : "-"; }

/// The table as cells: workload, metric, unit, better, [workers,] each
/// implementation's median [min-max], [coexec's ratio to each peer,] the
/// best peer and coexec's ratio to it.
inline std::vector<std::vector<std::string>> buildTable(const Session& s, bool byWorkers) {
  std::vector<std::string> header{"workload", "metric", "unit", "better"};
  if (byWorkers) header.push_back("workers");
  for (const auto& i : s.impls)
    header.push_back(i + " median [min-max]");
  if (!byWorkers)
    for (const auto& p : s.peers)
      header.push_back(kSubject + "/" + p);
  header.push_back("best peer");
  header.push_back(kSubject + "/best");
  std::vector<std::vector<std::string>> table{header};
  for (const auto& r : s.rows) {
    std::vector<std::string> t{r.workload, r.metric, r.unit, direction(r.better)};
    if (byWorkers) t.push_back(std::to_string(r.workers));
    for (const auto& i : s.impls)
      t.push_back(cell(stat(r, i)));
    if (!byWorkers)
      for (const auto& p : s.peers)
        t.push_back(ratioCell(r, p));
    const std::string best = bestPeer(r, s.peers);
    t.push_back(best.empty() ? "-" : best);
    t.push_back(best.empty() ? "-" : ratioCell(r, best));
    table.push_back(std::move(t));
  }
  return table;
}

inline void printTable(const std::vector<std::vector<std::string>>& table) {
  std::vector<std::size_t> width(table.front().size(), 0);
  for (const auto& t : table)
    for (std::size_t c = 0; c < t.size(); ++c)
      width[c] = std::max(width[c], t[c].size());
  for (const auto& t : table) {
    for (std::size_t c = 0; c < t.size(); ++c)
      fmt::print("{:<{}}  ", t[c], width[c]);
    fmt::print("\n");
  }
}

/// A markdown table; the first `textColumns` columns left-aligned, the rest right.
inline void writeMarkdownTable(std::ostream& md, const std::vector<std::vector<std::string>>& table,
                               std::size_t textColumns) {
  for (std::size_t t = 0; t < table.size(); ++t) {
    md << "|";
    for (const auto& c : table[t])
      md << " " << c << " |";
    md << "\n";
    if (t == 0) {
      md << "|";
      for (std::size_t c = 0; c < table[t].size(); ++c)
        md << (c < textColumns ? "---|" : "--:|");
      md << "\n";
    }
  }
}

inline void writeMachine(std::ostream& md) {
  const char* machine = std::getenv("BENCH_MACHINE");
  const char* command = std::getenv("BENCH_COMMAND");
  if (machine != nullptr) md << "Machine: " << machine << "  \n";
  if (command != nullptr) md << "Command: `" << command << "`  \n";
}

inline const Row* findRow(const Session& s, const std::string& workload, const std::string& metric) {
  auto it = std::find_if(s.rows.begin(), s.rows.end(),
                         [&](const Row& r) { return r.workload == workload && r.metric == metric; });
  return it == s.rows.end() ? nullptr : &*it;
}

/// "MET   text: ratio 1.23", "MISS  text: 42.1 %" or "n/a   text (no data)".
inline std::string goalLine(const Goal& g, const Session& s) {
  const Row* own = findRow(s, g.workload, g.metric);
  const Stat mine = own != nullptr ? stat(*own, kSubject) : Stat{};
  if (mine.count == 0) return fmt::format("n/a   {} (no data)", g.text);
  double value = mine.median;
  std::string what = fmt::format("{} {}", num(mine.median), own->unit);
  if (!g.peer.empty()) {
    const Row* other = findRow(s, g.peerWorkload.empty() ? g.workload : g.peerWorkload,
                               g.peerMetric.empty() ? g.metric : g.peerMetric);
    const Stat ref = other != nullptr ? stat(*other, g.peer) : Stat{};
    if (ref.count == 0 || ref.median == 0) return fmt::format("n/a   {} (no data)", g.text);
    value = mine.median / ref.median;
    what = fmt::format("ratio {}", num(value));
  }
  return fmt::format("{}  {}: {}", g.lo <= value && value <= g.hi ? "MET " : "MISS", g.text, what);
}

inline std::string xmlEscape(std::string_view s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

/// The chart: per metric, coexec and the best peer of that metric, each as
/// its performance relative to the better of the two (1.0 = the better;
/// higher-is-better metrics as value / best, lower-is-better ones as best /
/// value), labelled with the median and the peer's name.
inline void writeSvg(std::ostream& svg, const Session& s) {
  struct Bar {
    const Row* row;
    std::string peer;
  };
  std::vector<Bar> charted;
  for (const auto& r : s.rows) {
    const std::string peer = bestPeer(r, s.peers);
    if (!peer.empty() && stat(r, kSubject).count > 0) charted.push_back({&r, peer});
  }
  const int labelW = 250, barW = 520, barH = 13, rowGap = 12, top = 64;
  const int rowH = 2 * barH + rowGap;
  const int height = top + static_cast<int>(charted.size()) * rowH + 20;
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"};
  auto color = [&](const std::string& impl) {
    const auto i = std::find(s.impls.begin(), s.impls.end(), impl) - s.impls.begin();
    return colors[static_cast<std::size_t>(i) % 6];
  };
  svg << fmt::format(
             R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)",
             labelW + barW + 130, height)
      << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
      << "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">coexec vs the best peer of each metric: "
         "performance relative to the better of the two (longer is better), medians</text>\n";
  for (std::size_t i = 0; i < s.impls.size(); ++i)
    svg << fmt::format(R"(<rect x="{}" y="30" width="12" height="12" fill="{}"/><text x="{}" y="40">{}</text>)",
                       10 + i * 110, color(s.impls[i]), 26 + i * 110, xmlEscape(s.impls[i]))
        << "\n";
  for (std::size_t k = 0; k < charted.size(); ++k) {
    const Row& r = *charted[k].row;
    const int y = top + static_cast<int>(k) * rowH;
    const std::string impls[] = {kSubject, charted[k].peer};
    const double med[] = {stat(r, impls[0]).median, stat(r, impls[1]).median};
    double best = r.better == Better::higher ? 0 : std::numeric_limits<double>::max();
    for (double m : med)
      if (m > 0) best = r.better == Better::higher ? std::max(best, m) : std::min(best, m);
    svg << fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{} {} ({}, {})</text>)", labelW - 6, y + barH + 4,
                       xmlEscape(r.workload), xmlEscape(r.metric), xmlEscape(r.unit), direction(r.better))
        << "\n";
    for (std::size_t i = 0; i < 2; ++i) {
      const double rel = med[i] <= 0                  ? (r.better == Better::lower ? 1.0 : 0.0)
                         : r.better == Better::higher ? med[i] / best
                                                      : best / med[i];
      const int w = std::max(1, static_cast<int>(rel * barW));
      const int by = y + static_cast<int>(i) * barH;
      svg << fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/><text x="{}" y="{}">{} {}</text>)",
                         labelW, by, w, barH - 2, color(impls[i]), labelW + w + 4, by + barH - 3, num(med[i]),
                         xmlEscape(impls[i]))
          << "\n";
    }
  }
  svg << "</svg>\n";
}

}  // namespace detail

/// `bench_report <samples.csv> <results.csv> <latest.md> <latest.svg>`.
/// samples.csv: `run,impl,workload,metric,unit,better,value` with a header.
/// $BENCH_MACHINE and $BENCH_COMMAND go into the markdown.
inline int reportMain(int argc, char** argv, const std::vector<Goal>& goals) {
  if (argc != 5) {
    fmt::print(stderr, "usage: {} <samples.csv> <results.csv> <latest.md> <latest.svg>\n", argv[0]);
    fmt::print(stderr, "       {} scaling <scaling-samples.csv> <scaling.md>\n", argv[0]);
    return 2;
  }
  detail::Session s;
  if (!detail::readSession(argv[1], false, s)) {
    fmt::print(stderr, "cannot read {}\n", argv[1]);
    return 1;
  }
  const std::string& subject = detail::kSubject;

  const auto table = detail::buildTable(s, false);
  const std::string legend = fmt::format(
      "ratio = {0} median / peer median; 'better' column: higher = more is better (ratio > 1 favours {0}), "
      "lower = less is better (ratio < 1 favours {0}); the word after the ratio says which way it went. "
      "'best peer': the peer with the best median on that row, measured in the same run.",
      subject);
  fmt::print("\n{}\n\n", legend);
  detail::printTable(table);

  // Goals: this round's, then the kept ones.
  std::vector<std::string> goalLines, keptLines;
  for (const auto& g : goals)
    (g.kept ? keptLines : goalLines).push_back(detail::goalLine(g, s));
  const std::string goalTitle = "Goals of the scheduler work, each against the peer it names, on medians:";
  const std::string keptTitle = "Kept from earlier rounds:";
  if (!goalLines.empty() || !keptLines.empty()) {
    fmt::print("\n{}\n", goalTitle);
    for (const auto& g : goalLines)
      fmt::print("  {}\n", g);
    fmt::print("{}\n", keptTitle);
    for (const auto& g : keptLines)
      fmt::print("  {}\n", g);
  }

  // results.csv: one row per metric, every implementation's statistics.
  {
    std::ofstream csv(argv[2]);
    csv << "workload,metric,unit,better";
    for (const auto& i : s.impls)
      csv << fmt::format(",{0}_median,{0}_min,{0}_max,{0}_runs", i);
    for (const auto& p : s.peers)
      csv << fmt::format(",{}_over_{}", subject, p);
    csv << fmt::format(",best_peer,{}_over_best\n", subject);
    for (const auto& r : s.rows) {
      csv << fmt::format("{},{},{},{}", r.workload, r.metric, r.unit, toString(r.better));
      for (const auto& i : s.impls) {
        const Stat st = detail::stat(r, i);
        csv << (st.count ? fmt::format(",{:.6g},{:.6g},{:.6g},{}", st.median, st.min, st.max, st.count)
                         : std::string(",,,,0"));
      }
      auto ratio = [&](const std::string& p) {
        const Stat a = detail::stat(r, subject), b = detail::stat(r, p);
        return a.count && b.count && b.median != 0 && r.better != Better::none
                   ? fmt::format(",{:.6g}", a.median / b.median)
                   : std::string(",");
      };
      for (const auto& p : s.peers)
        csv << ratio(p);
      const std::string best = detail::bestPeer(r, s.peers);
      csv << "," << best << (best.empty() ? std::string(",") : ratio(best)) << "\n";
    }
  }

  // latest.md
  {
    std::ofstream md(argv[3]);
    md << "# coexec benchmarks: latest run\n\n";
    detail::writeMachine(md);
    md << "\n" << legend << "\n\n";
    detail::writeMarkdownTable(md, table, 4);
    if (!goalLines.empty() || !keptLines.empty()) {
      md << "\n" << goalTitle << "\n\n";
      for (const auto& g : goalLines)
        md << "- " << g << "\n";
      md << "\n" << keptTitle << "\n\n";
      for (const auto& g : keptLines)
        md << "- " << g << "\n";
    }
    md << "\n![chart](latest.svg)\n";
  }

  // latest.svg
  {
    std::ofstream svg(argv[4]);
    detail::writeSvg(svg, s);
  }
  return 0;
}

/// `bench_report scaling <scaling-samples.csv> <scaling.md>`: run.sh's
/// scaling mode. The samples carry the worker count in front
/// (`workers,run,impl,workload,metric,unit,better,value`); the table has a
/// row per workload, metric and worker count, each implementation's median
/// [min-max], the best peer of that row and coexec's ratio to it. It goes to
/// stdout and, with $BENCH_MACHINE and $BENCH_COMMAND, to scaling.md.
inline int scalingMain(int argc, char** argv) {
  if (argc != 4) {
    fmt::print(stderr, "usage: {} scaling <scaling-samples.csv> <scaling.md>\n", argv[0]);
    return 2;
  }
  detail::Session s;
  if (!detail::readSession(argv[2], true, s)) {
    fmt::print(stderr, "cannot read {}\n", argv[2]);
    return 1;
  }
  const auto table = detail::buildTable(s, true);
  const std::string legend = fmt::format(
      "Each workload with N workers (BENCH_WORKERS_N=N): W1, one producer execute()s 1,000,000 trivial tasks to a "
      "pool of N (the W1.2 workload); W2, 1,000 rounds of 64 tasks of ~1 us on a pool of N; W4, fib(25) fork/join "
      "on a pool of N (TBB: task_arena(N), the caller included). Medians [min-max] of the runs; best peer: the peer "
      "with the best median on that row; {0}/best = {0} median / best peer median (the word says which way it "
      "went). With more workers than cores the threads share the cores.",
      detail::kSubject);
  fmt::print("\n{}\n\n", legend);
  detail::printTable(table);
  std::ofstream md(argv[3]);
  md << "# coexec benchmarks: scaling with the worker count\n\n";
  detail::writeMachine(md);
  md << "\n" << legend << "\n\n";
  detail::writeMarkdownTable(md, table, 5);
  return md ? 0 : 1;
}

}  // namespace bench
