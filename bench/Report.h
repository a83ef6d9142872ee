#pragma once

// The reporting side of the harness (bench_report): every sample of a
// bench/run.sh session -> the ratio table and the goals, a CSV, a markdown
// table and an SVG chart. Uses Harness.h's statistics (Stat, summarize, cell).

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include "Harness.h"

namespace bench {

// ---- reporting: every sample of a session -> table, CSV, markdown, SVG ---------

/// A goal from the issue, checked on medians. `against` is a peer ("asio",
/// "tbb"): the value is coexec's ratio to it; another workload name: the
/// ratio of coexec's same metric there; empty: coexec's own value. Met when
/// lo <= value <= hi.
struct Goal {
  std::string workload, metric, against;
  double lo, hi;
  std::string text;
};

namespace detail {

struct Row {
  std::string workload, metric, unit;
  Better better = Better::none;
  std::map<std::string, std::vector<double>> values;  // impl -> samples
};

inline std::vector<std::string> splitCsv(const std::string& line) {
  std::vector<std::string> out;
  std::stringstream in(line);
  for (std::string field; std::getline(in, field, ',');)
    out.push_back(field);
  return out;
}

/// "3.10x better" / "0.80x worse" for coexec / peer.
inline std::string ratioCell(const Row& row, const std::string& subject, const std::string& peer) {
  const Stat a = summarize(row.values.count(subject) ? row.values.at(subject) : std::vector<double>{});
  const Stat b = summarize(row.values.count(peer) ? row.values.at(peer) : std::vector<double>{});
  if (a.count == 0 || b.count == 0 || b.median == 0) return "-";
  const double r = a.median / b.median;
  if (row.better == Better::none) return "-";
  if (r == 1) return "1x";
  const bool better = (row.better == Better::higher) == (r > 1);
  return fmt::format("{}x {}", num(r), better ? "better" : "worse");
}

inline std::string xmlEscape(std::string_view s) {
  std::string out;
  for (char c : s)
    out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

}  // namespace detail

/// `bench_report <samples.csv> <results.csv> <latest.md> <latest.svg>`.
/// samples.csv: `run,impl,workload,metric,unit,better,value` with a header.
/// $BENCH_MACHINE and $BENCH_COMMAND go into the markdown.
inline int reportMain(int argc, char** argv, const std::vector<Goal>& goals) {
  if (argc != 5) {
    fmt::print(stderr, "usage: {} <samples.csv> <results.csv> <latest.md> <latest.svg>\n", argv[0]);
    return 2;
  }
  std::ifstream in(argv[1]);
  if (!in) {
    fmt::print(stderr, "cannot read {}\n", argv[1]);
    return 1;
  }
  std::vector<detail::Row> rows;
  std::vector<std::string> impls;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    const auto f = detail::splitCsv(line);
    if (f.size() != 7) continue;
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const detail::Row& r) { return r.workload == f[2] && r.metric == f[3]; });
    if (it == rows.end()) it = rows.insert(rows.end(), detail::Row{f[2], f[3], f[4], parseBetter(f[5]), {}});
    it->values[f[1]].push_back(std::atof(f[6].c_str()));
    if (std::find(impls.begin(), impls.end(), f[1]) == impls.end()) impls.push_back(f[1]);
  }
  const std::string subject = "coexec";
  std::vector<std::string> peers;
  for (const auto& i : impls)
    if (i != subject) peers.push_back(i);
  std::sort(impls.begin(), impls.end(), [&](const auto& a, const auto& b) { return (a == subject) > (b == subject); });

  auto stat = [](const detail::Row& r, const std::string& impl) {
    return summarize(r.values.count(impl) ? r.values.at(impl) : std::vector<double>{});
  };
  auto direction = [](Better b) { return b == Better::higher ? "higher" : b == Better::lower ? "lower" : "-"; };

  // Readable table (stdout) and markdown.
  std::vector<std::string> header{"workload", "metric", "unit", "better"};
  for (const auto& i : impls)
    header.push_back(i + " median [min-max]");
  for (const auto& p : peers)
    header.push_back(subject + "/" + p);
  std::vector<std::vector<std::string>> table{header};
  for (const auto& r : rows) {
    std::vector<std::string> t{r.workload, r.metric, r.unit, direction(r.better)};
    for (const auto& i : impls)
      t.push_back(cell(stat(r, i)));
    for (const auto& p : peers)
      t.push_back(detail::ratioCell(r, subject, p));
    table.push_back(std::move(t));
  }
  std::vector<std::size_t> width(header.size(), 0);
  for (const auto& t : table)
    for (std::size_t c = 0; c < t.size(); ++c)
      width[c] = std::max(width[c], t[c].size());
  const std::string legend = fmt::format(
      "ratio = {0} median / peer median; 'better' column: higher = more is better (ratio > 1 favours {0}), "
      "lower = less is better (ratio < 1 favours {0}); the word after the ratio says which way it went.",
      subject);
  fmt::print("\n{}\n\n", legend);
  for (const auto& t : table) {
    for (std::size_t c = 0; c < t.size(); ++c)
      fmt::print("{:<{}}  ", t[c], width[c]);
    fmt::print("\n");
  }

  // Goals.
  std::vector<std::string> goalLines;
  for (const auto& g : goals) {
    auto it = std::find_if(rows.begin(), rows.end(),
                           [&](const auto& r) { return r.workload == g.workload && r.metric == g.metric; });
    if (it == rows.end()) {
      goalLines.push_back(fmt::format("n/a  {} (no data)", g.text));
      continue;
    }
    const Stat own = stat(*it, subject);
    double value = own.median;
    std::string what = fmt::format("{} {}", num(own.median), it->unit);
    if (!g.against.empty()) {
      const detail::Row* other = &*it;
      std::string impl = g.against;
      if (std::find(impls.begin(), impls.end(), g.against) == impls.end()) {  // another workload of coexec
        auto o = std::find_if(rows.begin(), rows.end(),
                              [&](const auto& r) { return r.workload == g.against && r.metric == g.metric; });
        other = o == rows.end() ? nullptr : &*o;
        impl = subject;
      }
      const Stat ref = other != nullptr ? stat(*other, impl) : Stat{};
      if (own.count == 0 || ref.count == 0 || ref.median == 0) {
        goalLines.push_back(fmt::format("n/a  {} (no data)", g.text));
        continue;
      }
      value = own.median / ref.median;
      what = fmt::format("ratio {}", num(value));
    } else if (own.count == 0) {
      goalLines.push_back(fmt::format("n/a  {} (no data)", g.text));
      continue;
    }
    goalLines.push_back(fmt::format("{}  {}: {}", g.lo <= value && value <= g.hi ? "MET " : "MISS", g.text, what));
  }
  if (!goalLines.empty()) {
    fmt::print("\nGoals of the scheduler work, on medians:\n");
    for (const auto& g : goalLines)
      fmt::print("  {}\n", g);
  }

  // results.csv: one row per metric, every implementation's statistics.
  {
    std::ofstream csv(argv[2]);
    csv << "workload,metric,unit,better";
    for (const auto& i : impls)
      csv << fmt::format(",{0}_median,{0}_min,{0}_max,{0}_runs", i);
    for (const auto& p : peers)
      csv << fmt::format(",{}_over_{}", subject, p);
    csv << "\n";
    for (const auto& r : rows) {
      csv << fmt::format("{},{},{},{}", r.workload, r.metric, r.unit, toString(r.better));
      for (const auto& i : impls) {
        const Stat s = stat(r, i);
        csv << (s.count ? fmt::format(",{:.6g},{:.6g},{:.6g},{}", s.median, s.min, s.max, s.count)
                        : std::string(",,,,0"));
      }
      for (const auto& p : peers) {
        const Stat a = stat(r, subject), b = stat(r, p);
        csv << (a.count && b.count && b.median != 0 && r.better != Better::none
                    ? fmt::format(",{:.6g}", a.median / b.median)
                    : std::string(","));
      }
      csv << "\n";
    }
  }

  // latest.md
  {
    std::ofstream md(argv[3]);
    const char* machine = std::getenv("BENCH_MACHINE");
    const char* command = std::getenv("BENCH_COMMAND");
    md << "# coexec benchmarks: latest run\n\n";
    if (machine != nullptr) md << "Machine: " << machine << "  \n";
    if (command != nullptr) md << "Command: `" << command << "`  \n";
    md << "\n" << legend << "\n\n";
    for (std::size_t t = 0; t < table.size(); ++t) {
      md << "|";
      for (const auto& c : table[t])
        md << " " << c << " |";
      md << "\n";
      if (t == 0) {
        md << "|";
        for (std::size_t c = 0; c < table[t].size(); ++c)
          md << (c < 4 ? "---|" : "--:|");
        md << "\n";
      }
    }
    if (!goalLines.empty()) {
      md << "\nGoals of the scheduler work, on medians:\n\n";
      for (const auto& g : goalLines)
        md << "- " << g << "\n";
    }
    md << "\n![chart](latest.svg)\n";
  }

  // latest.svg: per metric, each implementation's performance relative to the
  // best one (1.0 = best; higher-is-better metrics as value / best,
  // lower-is-better ones as best / value), labelled with the median.
  {
    std::vector<const detail::Row*> charted;
    for (const auto& r : rows)
      if (r.better != Better::none && r.values.size() > 1) charted.push_back(&r);
    const int labelW = 250, barW = 520, barH = 13, rowGap = 12, top = 64;
    const int rowH = static_cast<int>(impls.size()) * barH + rowGap;
    const int height = top + static_cast<int>(charted.size()) * rowH + 20;
    const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b"};
    std::ofstream svg(argv[4]);
    svg << fmt::format(
               R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" font-family="sans-serif" font-size="11">)",
               labelW + barW + 110, height)
        << "\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n"
        << "<text x=\"10\" y=\"18\" font-size=\"14\" font-weight=\"bold\">coexec vs peers: performance relative to the "
           "best "
           "(longer is better), medians</text>\n";
    for (std::size_t i = 0; i < impls.size(); ++i)
      svg << fmt::format(R"(<rect x="{}" y="30" width="12" height="12" fill="{}"/><text x="{}" y="40">{}</text>)",
                         10 + i * 110, colors[i % 5], 26 + i * 110, detail::xmlEscape(impls[i]))
          << "\n";
    for (std::size_t k = 0; k < charted.size(); ++k) {
      const auto& r = *charted[k];
      const int y = top + static_cast<int>(k) * rowH;
      std::vector<double> med;
      for (const auto& i : impls)
        med.push_back(stat(r, i).count ? stat(r, i).median : std::nan(""));
      double best = r.better == Better::higher ? 0 : std::numeric_limits<double>::max();
      for (double m : med)
        if (!std::isnan(m) && m > 0) best = r.better == Better::higher ? std::max(best, m) : std::min(best, m);
      svg << fmt::format(R"(<text x="{}" y="{}" text-anchor="end">{} {} ({}, {})</text>)", labelW - 6,
                         y + static_cast<int>(impls.size()) * barH / 2 + 4, detail::xmlEscape(r.workload),
                         detail::xmlEscape(r.metric), detail::xmlEscape(r.unit), direction(r.better))
          << "\n";
      for (std::size_t i = 0; i < impls.size(); ++i) {
        if (std::isnan(med[i])) continue;
        const double rel = med[i] <= 0                  ? (r.better == Better::lower ? 1.0 : 0.0)
                           : r.better == Better::higher ? med[i] / best
                                                        : best / med[i];
        const int w = std::max(1, static_cast<int>(rel * barW));
        const int by = y + static_cast<int>(i) * barH;
        svg << fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="{}"/><text x="{}" y="{}">{}</text>)",
                           labelW, by, w, barH - 2, colors[i % 5], labelW + w + 4, by + barH - 3, num(med[i]))
            << "\n";
      }
    }
    svg << "</svg>\n";
  }
  return 0;
}

}  // namespace bench
