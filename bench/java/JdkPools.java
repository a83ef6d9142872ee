// SPDX-License-Identifier: BSL-1.0
// The benchmark workloads on the JDK's own pools (Java 17), the peers of
// CoexecPool.cpp where a workload maps onto them:
//   tpe  java.util.concurrent.ThreadPoolExecutor (LinkedBlockingQueue unless
//        the workload says otherwise), core = max = the workload's workers,
//        all prestarted;
//   fjp  java.util.concurrent.ForkJoinPool(parallelism = the workload's
//        workers), its workers started before the timed region.
// Workload, metric and unit names, `better` directions, sizes and the CPU
// work per task are those of bench_coexec (Harness.h, CoexecPool.cpp).
//
// Usage as Harness.h's main(), with the implementation in front:
//   java -cp <dir> JdkPools <tpe|fjp> <workload|group|all|list|calibrate> [runs=5] [scale=1]
// (bench/CMakeLists.txt generates the wrappers bench_tpe and bench_fjp that
// pass the first argument). Samples go to stdout as CSV
// (`impl,workload,metric,unit,better,value`), a summary to stderr; exit 0 on
// success, 1 if a workload failed, 2 on a usage error or an unknown workload.
//
// Warm-up (the JIT): before its reported runs, each workload runs unreported
// passes at the reported scale, at least two and until BENCH_JAVA_WARMUP_MS
// (default 1000) have passed, so that the pool's paths, the task bodies and
// burn() are compiled by C2 (JDK 17 compiles a method after about 10,000
// calls or loop iterations; one W1 pass is 1,000,000 executes). A System.gc()
// then gives each reported run a collected heap; collections during the run
// count, as they are the JDK's cost. That collection must not give memory
// back: at a full collection G1 shrinks the heap until at most
// MaxHeapFreeRatio (70 %) of it is free, returning to the kernel what the
// warm-up committed, and the reported run then allocates in fresh pages,
// a page fault per 4 KiB that neither the warm-up passes nor a JVM that
// never calls System.gc() (peer-bench) pays; so keepCommittedHeap() sets
// MaxHeapFreeRatio to 100 before the first pass (unless BENCH_JAVA_OPTS
// sets it). `idle` measures no code path: it gets the C++ binaries'
// warm-up, one pass at a tenth of the scale.
// BENCH_NO_WARMUP skips the warm-up as it does in the C++ binaries.
//
// Environment, as the C++ binaries: BENCH_SPIN_PER_US (burn() iterations
// per microsecond; run.sh hands every binary the value bench_coexec
// calibrated, so every implementation burns the same iterations per task),
// BENCH_WORKERS_N (workers of W1.2, W2 and W4 instead of 2: run.sh's
// scaling mode).
//
// Not mapped: W3.coro (no coroutines; the closest hop is W3.chain), W6 (the
// JDK's timers are another pool), W8 (no io_context), W9 (no keyed lanes);
// W4 on tpe (a ThreadPoolExecutor task cannot join its children without
// blocking its worker), W5 on fjp (ForkJoinPool has no bounded queue or
// rejection policy).
//
// The sources, compiled together (bench/CMakeLists.txt): JdkPools.java (this
// file: main(), the runs and the report), JdkHarness.java (Harness.h's
// counterparts: burn(), Work, Countdown, Run) and JdkWorkloads.java (the
// pools, the workloads and their tables).

import com.sun.management.HotSpotDiagnosticMXBean;
import com.sun.management.VMOption;
import java.lang.management.ManagementFactory;
import java.math.BigDecimal;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;

public final class JdkPools {
  // ---- main: Harness.h's main() -------------------------------------------------

  public static void main(String[] args) {
    System.exit(run(args));
  }

  static int run(String[] args) {
    final String impl = args.length > 0 ? args[0] : "";
    final List<JdkWorkloads.Workload> workloads =
        impl.equals("tpe") ? JdkWorkloads.tpeWorkloads() : impl.equals("fjp") ? JdkWorkloads.fjpWorkloads() : null;
    final String which = args.length > 1 ? args[1] : "list";
    final int runs = args.length > 2 ? (int) JdkHarness.parseDouble(args[2], 0) : 5;
    final double scale = args.length > 3 ? JdkHarness.parseDouble(args[3], 0) : 1.0;
    if (workloads == null || runs < 1 || !(scale > 0)) {
      System.err.println("usage: JdkPools <tpe|fjp> <workload|group|all|list|calibrate> [runs=5] [scale=1]");
      return 2;
    }
    if (which.equals("calibrate")) {
      System.out.println(String.format(Locale.ROOT, "%.3f", JdkHarness.calibrateSpin()));
      return 0;
    }
    if (which.equals("list")) {
      for (var w : workloads) System.out.println(String.format(Locale.ROOT, "%-9s %s", w.name(), w.description()));
      return 0;
    }
    keepCommittedHeap();
    final boolean warmUp = System.getenv("BENCH_NO_WARMUP") == null;
    final long warmUpNanos = (long) (JdkHarness.parseDouble(System.getenv("BENCH_JAVA_WARMUP_MS"), 1000) * 1e6);
    boolean found = false;
    for (var w : workloads) {
      if (!which.equals("all") && !inGroup(w.name(), which)) continue;
      found = true;
      try {
        if (warmUp && w.jit()) {
          final long start = System.nanoTime();
          int passes = 0;
          while (passes < 2 || System.nanoTime() - start < warmUpNanos) {
            w.body().run(new JdkHarness.Run(scale));
            ++passes;
          }
          System.err.println(String.format(Locale.ROOT, "%-7s %-9s warm-up: %d passes at scale %s, %.0f ms", impl,
                                           w.name(), passes, g(scale, 6), (System.nanoTime() - start) / 1e6));
        } else if (warmUp) {
          w.body().run(new JdkHarness.Run(scale / 10));
        }
        final Map<String, List<Double>> byMetric = new LinkedHashMap<>();
        for (int r = 0; r < runs; ++r) {
          System.gc();
          final var run = new JdkHarness.Run(scale);
          w.body().run(run);
          for (var s : run.samples) {
            System.out.println(
                String.join(",", impl, w.name(), s.metric(), s.unit(), s.better(), g(s.value(), 6)));
            byMetric.computeIfAbsent(s.metric() + " (" + s.unit() + ")", k -> new ArrayList<>()).add(s.value());
          }
        }
        System.out.flush();
        for (var m : byMetric.entrySet())
          System.err.println(String.format(Locale.ROOT, "%-7s %-9s %-34s %s", impl, w.name(), m.getKey(),
                                           cell(m.getValue())));
      } catch (Exception | Error e) {
        System.out.flush();
        System.err.println(impl + " " + w.name() + ": failed: " + e);
        return 1;
      }
    }
    if (!found) {
      System.err.println(impl + ": no workload named '" + which + "' (try 'list')");
      return 2;
    }
    return 0;
  }

  /**
   * Makes a full collection keep the heap committed (MaxHeapFreeRatio=100;
   * see the top of this file), unless the JVM's command line set that flag.
   * A JVM without the flag or the management API measures as before, with a
   * note on stderr.
   */
  static void keepCommittedHeap() {
    try {
      final var vm = ManagementFactory.getPlatformMXBean(HotSpotDiagnosticMXBean.class);
      if (vm.getVMOption("MaxHeapFreeRatio").getOrigin() == VMOption.Origin.DEFAULT)
        vm.setVMOption("MaxHeapFreeRatio", "100");
    } catch (RuntimeException | LinkageError e) {
      System.err.println("JdkPools: the heap may shrink at System.gc() (MaxHeapFreeRatio not set: " + e + ")");
    }
  }

  /** True if `name` is `which` or in the group `which` names ("W6" selects "W6.cancel"). */
  static boolean inGroup(String name, String which) {
    return name.equals(which) || (name.startsWith(which) && name.length() > which.length()
                                  && name.charAt(which.length()) == '.');
  }


  /** C's "%.{digits}g": the shortest of fixed and exponent notation, no trailing zeros. */
  static String g(double v, int digits) {
    if (v == 0) return "0";
    if (Double.isNaN(v) || Double.isInfinite(v)) return Double.isNaN(v) ? "nan" : v > 0 ? "inf" : "-inf";
    final BigDecimal d = new BigDecimal(v).round(new MathContext(digits)).stripTrailingZeros();
    final int exponent = d.precision() - d.scale() - 1;
    if (exponent < -4 || exponent >= digits) {
      return String.format(Locale.ROOT, "%se%s%02d", d.movePointLeft(exponent).toPlainString(), exponent < 0 ? "-" : "+",
                           Math.abs(exponent));
    }
    return d.toPlainString();
  }

  /** Harness.h's num(): a number in 3-4 significant digits. */
  static String num(double v) {
    if (v == 0) return "0";
    final double a = Math.abs(v);
    return a >= 1000   ? String.format(Locale.ROOT, "%.0f", v)
           : a >= 100  ? String.format(Locale.ROOT, "%.1f", v)
           : a >= 10   ? String.format(Locale.ROOT, "%.2f", v)
           : a >= 0.01 ? String.format(Locale.ROOT, "%.3f", v)
                       : g(v, 2);
  }

  /** Harness.h's cell(): "median [min-max]" of the runs, the value alone for one run. */
  static String cell(List<Double> values) {
    final double[] v = values.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    final int n = v.length;
    if (n == 0) return "-";
    final double median = n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    if (n == 1) return num(median);
    return num(median) + " [" + num(v[0]) + "-" + num(v[n - 1]) + "]";
  }
}
