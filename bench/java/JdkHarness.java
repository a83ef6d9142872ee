// SPDX-License-Identifier: BSL-1.0
// The JDK pools benchmark's counterpart of Harness.h (JdkPools.java describes
// the benchmark and runs it): burn() and its calibration, a task body of a
// given length (Work), the completion count (Countdown), and one run of one
// workload with its timers and samples (Run). The pools and the workloads are
// in JdkWorkloads.java.

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

final class JdkHarness {
  private JdkHarness() {}

  // ---- CPU work of a given length: Harness.h's burn() ------------------------

  private static final long kMultiplier = 6364136223846793005L;
  private static final long kIncrement = 1442695040888963407L;
  private static volatile long sink;

  /**
   * Harness.h's burn(): `iterations` steps of the same dependent 64-bit
   * multiply-add chain (Java's long arithmetic wraps as uint64_t's does).
   * Returns the last value: a caller that uses it keeps the JIT from dropping
   * the chain, as the C++ side's empty asm does.
   */
  static long burn(int iterations) {
    long x = iterations;
    for (int i = 0; i < iterations; ++i) x = x * kMultiplier + kIncrement;
    return x;
  }

  /** burn() iterations per microsecond on this thread, best of 7 (after a warm-up, so compiled). */
  static double calibrateSpin() {
    final int iterations = 1 << 20;
    for (int i = 0; i < 50; ++i) consume(burn(iterations));
    double best = Double.MAX_VALUE;
    for (int i = 0; i < 7; ++i) {
      final long t0 = System.nanoTime();
      consume(burn(iterations));
      best = Math.min(best, (System.nanoTime() - t0) / 1e3);
    }
    return iterations / best;
  }

  private static void consume(long value) {
    if (value == 0) sink = value;  // practically never: only to keep the value alive
  }

  private static double spinPerUs = 0;

  /** $BENCH_SPIN_PER_US, else calibrated in this process (Harness.h's spinPerUs()). */
  static synchronized double spinPerUs() {
    if (spinPerUs == 0) {
      final double env = parseDouble(System.getenv("BENCH_SPIN_PER_US"), 0);
      spinPerUs = env > 0 ? env : calibrateSpin();
    }
    return spinPerUs;
  }

  /** A task body of about `nanos` of CPU work (Harness.h's Work). */
  static final class Work {
    private final int iterations;

    Work(long nanos) {
      iterations = (int) (spinPerUs() * nanos / 1e3);
    }

    void run() {
      consume(burn(iterations));
    }
  }

  // ---- completion helpers (Harness.h's Countdown) -----------------------------

  /**
   * Counts finished tasks down to zero; await() parks the producer until the
   * last hit(). Thread safety: hit() from any thread; reset() and await()
   * from the producer, reset() only while no task of the previous count runs.
   * Memory ordering: await() returns seeing everything each task wrote before
   * its hit() (the decrements are volatile read-modify-writes, and the last
   * one publishes through the volatile `done`).
   */
  static final class Countdown {
    private final AtomicLong left = new AtomicLong();
    private volatile boolean done;
    private volatile Thread waiter;

    void reset(long count) {
      waiter = Thread.currentThread();
      done = false;
      left.set(count);
    }

    void hit() {
      if (left.decrementAndGet() == 0) {
        done = true;
        LockSupport.unpark(waiter);
      }
    }

    void await() {
      while (!done) LockSupport.park(this);
    }
  }

  static void expectCount(String what, long actual, long expected) {
    if (actual != expected) throw new IllegalStateException(what + ": " + actual + ", expected " + expected);
  }

  // ---- one run of one workload (Harness.h's Run) ------------------------------

  record Sample(String metric, String unit, String better, double value) {}

  /** A workload's timed region: may throw what the pool's API throws. */
  @FunctionalInterface
  interface Body {
    void run() throws Exception;
  }

  /** The scale and the timers; each timer runs its body once on the calling thread. */
  static final class Run {
    final double scale;
    final List<Sample> samples = new ArrayList<>();

    Run(double scale) {
      this.scale = scale;
    }

    /** `base` scaled, at least 1. */
    long count(long base) {
      return Math.max(1, Math.round(base * scale));
    }

    /** A recursion depth whose work (~phi^depth) scales like count(). */
    int depth(int base) {
      final double steps = Math.log(scale) / Math.log(1.618);
      return Math.max(2, base + (int) (steps < 0 ? -Math.round(-steps) : Math.round(steps)));  // C's lround
    }

    double timed(Body body) throws Exception {
      final long start = System.nanoTime();
      body.run();
      return (System.nanoTime() - start) / 1e9;
    }

    void throughput(String metric, String unit, double ops, Body body) throws Exception {
      record(metric, unit, "higher", ops / timed(body) / 1e6);
    }

    void perOp(String metric, double ops, Body body) throws Exception {
      record(metric, "ns", "lower", timed(body) * 1e9 / ops);
    }

    void duration(String metric, Body body) throws Exception {
      record(metric, "ms", "lower", timed(body) * 1e3);
    }

    /** Runs `round` `rounds` times: rounds per second, p50 and p99 round latency. */
    void rounds(long rounds, Body round) throws Exception {
      final double[] latencies = new double[(int) rounds];
      final double seconds = timed(() -> {
        for (int i = 0; i < latencies.length; ++i) {
          final long start = System.nanoTime();
          round.run();
          latencies[i] = (System.nanoTime() - start) / 1e3;
        }
      });
      record("rounds/s", "k/s", "higher", rounds / seconds / 1e3);
      record("round p50", "us", "lower", percentile(latencies, 0.50));
      record("round p99", "us", "lower", percentile(latencies, 0.99));
    }

    /** Settles for 200 ms, then records the process CPU used over `2 s x scale` of sleep. */
    void idleCpu() throws Exception {
      for (int i = 0; i < 20; ++i) processCpuNanos();  // its classes loaded, its code warm: the reads cost little
      Thread.sleep(200);
      final long window = Math.round(2000 * scale);
      final long cpu0 = processCpuNanos();
      Thread.sleep(window);
      record("idle CPU", "% core", "lower", 100.0 * (processCpuNanos() - cpu0) / 1e6 / window);
    }

    /**
     * CPU time of every thread of the process, the JVM's own included, in
     * nanoseconds: the sum of /proc/self/task/N/schedstat (Linux). The JDK's
     * getProcessCpuTime() counts in 10 ms ticks, too coarse for an idle pool.
     */
    private static long processCpuNanos() throws IOException {
      long sum = 0;
      try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
        for (Path task : tasks) {
          try {
            sum += Long.parseLong(Files.readString(task.resolve("schedstat")).split(" ")[0]);
          } catch (NoSuchFileException e) {
            // the thread ended since the listing
          }
        }
      }
      return sum;
    }

    void record(String metric, String unit, String better, double value) {
      samples.add(new Sample(metric, unit, better, value));
    }
  }

  /** Nearest-rank percentile, p in [0, 1] (Harness.h's percentile()). */
  static double percentile(double[] values, double p) {
    final double[] sorted = values.clone();
    java.util.Arrays.sort(sorted);
    final long rank = (long) Math.ceil(p * sorted.length);
    return sorted[(int) Math.min(Math.max(rank, 1), sorted.length) - 1];
  }

  /** The number in `text`, or `fallback` if there is none (C's atof is as lenient). */
  static double parseDouble(String text, double fallback) {
    if (text == null) return fallback;
    try {
      return Double.parseDouble(text.trim());
    } catch (NumberFormatException e) {
      return fallback;
    }
  }
}
