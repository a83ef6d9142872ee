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
// count, as they are the JDK's cost. `idle` measures no code path: it gets
// the C++ binaries' warm-up, one pass at a tenth of the scale.
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

import java.io.IOException;
import java.math.BigDecimal;
import java.math.MathContext;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.Future;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.RecursiveTask;
import java.util.concurrent.ThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

public final class JdkPools {
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

  /** BENCH_WORKERS_N if set (run.sh's scaling mode), else `fallback`. */
  static int workers(int fallback) {
    final double env = parseDouble(System.getenv("BENCH_WORKERS_N"), 0);
    return env >= 1 ? (int) env : fallback;
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

  // ---- the pools ----------------------------------------------------------------

  /** A ThreadPoolExecutor of `workers` core (= max) threads on a LinkedBlockingQueue, all started. */
  static ThreadPoolExecutor tpe(int workers) {
    final var pool = new ThreadPoolExecutor(workers, workers, 60, TimeUnit.SECONDS, new LinkedBlockingQueue<>());
    pool.prestartAllCoreThreads();
    return pool;
  }

  /**
   * A ForkJoinPool of parallelism `workers`, its workers started: it starts
   * them on demand, so `workers` tasks each wait (up to a second) until all
   * of them run at once.
   */
  static ForkJoinPool fjp(int workers) {
    final var pool = new ForkJoinPool(workers);
    final var running = new AtomicInteger();
    final var started = new ArrayList<Future<?>>();
    for (int i = 0; i < workers; ++i) {
      started.add(pool.submit(() -> {
        running.incrementAndGet();
        final long deadline = System.nanoTime() + 1_000_000_000L;
        while (running.get() < workers && System.nanoTime() < deadline) Thread.onSpinWait();
      }));
    }
    for (Future<?> f : started) {
      try {
        f.get();
      } catch (Exception e) {
        throw new IllegalStateException("starting the ForkJoinPool's workers", e);
      }
    }
    return pool;
  }

  /** Shuts `pool` down and waits for its threads. */
  static void close(ExecutorService pool) throws InterruptedException {
    pool.shutdown();
    if (!pool.awaitTermination(1, TimeUnit.MINUTES)) throw new IllegalStateException("the pool did not terminate");
  }

  @FunctionalInterface
  interface PoolFactory {
    ExecutorService create(int workers);
  }

  @FunctionalInterface
  interface PoolBody {
    void run(Run run, ExecutorService pool) throws Exception;
  }

  /** A workload body on a fresh pool of `workers` from `factory`, shut down after the run. */
  static WorkloadBody onPool(PoolFactory factory, int workers, PoolBody body) {
    return run -> {
      final ExecutorService pool = factory.create(workers);
      try {
        body.run(run, pool);
      } finally {
        close(pool);
      }
    };
  }

  // ---- the workloads ------------------------------------------------------------

  // W1: one producer, N trivial tasks (a countdown each). One Runnable for
  // every execute(), as ../shared/peer-bench does: a new lambda per call is
  // one more object per task that the C++ closures, stored inside their task
  // states, do not cost; with it ForkJoinPool measured half its rate.
  static void submitThroughput(Run run, ExecutorService pool) throws Exception {
    final var done = new Countdown();
    final long n = run.count(1_000_000);
    done.reset(n);
    final Runnable task = () -> done.hit();
    run.throughput("throughput", "Mtasks/s", n, () -> {
      for (long i = 0; i < n; ++i) pool.execute(task);
      done.await();
    });
  }

  // W2: 64 submit()s of ~1 us, then their Futures waited for, per round.
  static void fanOutFanIn(Run run, ExecutorService pool) throws Exception {
    final var work = new Work(1_000);
    final Future<?>[] futures = new Future<?>[64];
    run.rounds(run.count(1_000), () -> {
      for (int i = 0; i < futures.length; ++i) futures[i] = pool.submit(() -> work.run());
      for (Future<?> f : futures) f.get();
    });
  }

  // W3: a chain of tasks, each execute()s the next (the Runnable is the chain itself).
  static final class Chain implements Runnable {
    private final ExecutorService pool;
    private final Countdown done;
    private long left;  // plain: each step happens-before the next through the pool's hand-off

    Chain(ExecutorService pool, long left, Countdown done) {
      this.pool = pool;
      this.left = left;
      this.done = done;
    }

    @Override
    public void run() {
      if (--left == 0) {
        done.hit();
      } else {
        pool.execute(this);
      }
    }
  }

  static void taskChain(Run run, ExecutorService pool) throws Exception {
    final var done = new Countdown();
    final long n = run.count(200_000);
    final var chain = new Chain(pool, n, done);
    done.reset(1);
    run.perOp("hop", n, () -> {
      pool.execute(chain);
      done.await();
    });
  }

  // W4: fork/join fib: every call with n >= 2 forks both children and joins them
  // (a join runs the child itself or helps, it does not park the worker).
  @SuppressWarnings("serial")  // never serialized
  static final class Fib extends RecursiveTask<Long> {
    private final int n;

    Fib(int n) {
      this.n = n;
    }

    @Override
    protected Long compute() {
      if (n < 2) return (long) n;
      final var a = new Fib(n - 1);
      final var b = new Fib(n - 2);
      a.fork();
      b.fork();
      return b.join() + a.join();
    }
  }

  static void forkJoin(Run run, ExecutorService pool) throws Exception {
    final int depth = run.depth(25);
    final long[] result = {0};
    run.duration("fib time", () -> result[0] = ((ForkJoinPool) pool).invoke(new Fib(depth)));
    if (result[0] <= 0) throw new IllegalStateException("fib returned a wrong value");
  }

  // W5: overload: core = max = 2, ArrayBlockingQueue(1024), CallerRunsPolicy,
  // tasks of ~200 ns; the share of tasks the producer ran itself.
  static void overload(Run run) throws Exception {
    final var pool = new ThreadPoolExecutor(2, 2, 60, TimeUnit.SECONDS, new ArrayBlockingQueue<>(1024),
                                            new ThreadPoolExecutor.CallerRunsPolicy());
    pool.prestartAllCoreThreads();
    try {
      final var done = new Countdown();
      final var work = new Work(200);
      final long n = run.count(1_000_000);
      final Thread producer = Thread.currentThread();
      final long[] callerRan = {0};  // written by the producer only
      done.reset(n);
      run.throughput("throughput", "Mtasks/s", n, () -> {
        for (long i = 0; i < n; ++i) {
          pool.execute(() -> {
            work.run();
            if (Thread.currentThread() == producer) ++callerRan[0];
            done.hit();
          });
        }
        done.await();
      });
      run.record("caller share", "%", "none", 100.0 * callerRan[0] / n);
    } finally {
      close(pool);
    }
  }

  // W7: invokeAll of 64 trivial tasks returning their index, per round; the
  // results read into an int[64] (the C++ side's std::vector<int>).
  static void invokeAll64(Run run, ExecutorService pool) throws Exception {
    final List<Callable<Integer>> tasks = new ArrayList<>();
    for (int i = 0; i < 64; ++i) {
      final int index = i;
      tasks.add(() -> index);
    }
    final long rounds = run.count(10_000);
    final long[] sum = {0};
    run.rounds(rounds, () -> {
      final List<Future<Integer>> futures = pool.invokeAll(tasks);
      final int[] results = new int[futures.size()];
      for (int i = 0; i < results.length; ++i) results[i] = futures.get(i).get();
      sum[0] += results[results.length - 1];
    });
    expectCount("sum of the last results", sum[0], 63 * rounds);
  }

  // Idle: process CPU of a pool of 2 with nothing to do, after a burst of work
  // (the JVM's own threads, JIT and GC, count too).
  static void idle(Run run, ExecutorService pool) throws Exception {
    final var done = new Countdown();
    done.reset(10_000);
    for (int i = 0; i < 10_000; ++i) pool.execute(() -> done.hit());
    done.await();
    run.idleCpu();
  }

  // ---- the workload tables --------------------------------------------------------

  @FunctionalInterface
  interface WorkloadBody {
    void run(Run run) throws Exception;
  }

  /** `jit`: warmed up at full scale until compiled (see the top); else one pass at a tenth of the scale. */
  record Workload(String name, String description, boolean jit, WorkloadBody body) {}

  static List<Workload> tpeWorkloads() {
    final PoolFactory f = JdkPools::tpe;
    return List.of(
        new Workload("W1.1",
                     "submit throughput, 1 worker: ThreadPoolExecutor(1, 1, LinkedBlockingQueue), execute of "
                         + "1,000,000 trivial tasks (a countdown)",
                     true, onPool(f, 1, JdkPools::submitThroughput)),
        new Workload("W1.2", "submit throughput, 2 workers", true, onPool(f, workers(2), JdkPools::submitThroughput)),
        new Workload("W2", "fan-out/fan-in: 1,000 rounds of 64 submit()s of ~1 us, their Futures get()", true,
                     onPool(f, workers(2), JdkPools::fanOutFanIn)),
        new Workload("W3.chain", "a chain of 200,000 tasks, each execute()s the next", true,
                     onPool(f, 2, JdkPools::taskChain)),
        new Workload("W5",
                     "overload: core=max=2, ArrayBlockingQueue(1024), CallerRunsPolicy, 1,000,000 tasks of ~200 ns",
                     true, JdkPools::overload),
        new Workload("W7", "10,000 rounds of invokeAll(64 trivial Callables) -> List<Future<Integer>>, read into int[]",
                     true, onPool(f, 2, JdkPools::invokeAll64)),
        new Workload("idle", "process CPU of an idle pool of 2 over 2 s (JVM threads included)", false,
                     onPool(f, 2, JdkPools::idle)));
  }

  static List<Workload> fjpWorkloads() {
    final PoolFactory f = JdkPools::fjp;
    return List.of(
        new Workload("W1.1", "submit throughput, 1 worker: ForkJoinPool(1), execute of 1,000,000 trivial tasks "
                                 + "(a countdown) from outside the pool",
                     true, onPool(f, 1, JdkPools::submitThroughput)),
        new Workload("W1.2", "submit throughput, 2 workers", true, onPool(f, workers(2), JdkPools::submitThroughput)),
        new Workload("W2", "fan-out/fan-in: 1,000 rounds of 64 submit()s of ~1 us, their ForkJoinTasks get()", true,
                     onPool(f, workers(2), JdkPools::fanOutFanIn)),
        new Workload("W3.chain", "a chain of 200,000 tasks, each execute()s the next (a worker's local queue)", true,
                     onPool(f, 2, JdkPools::taskChain)),
        new Workload("W4", "fib(25), a RecursiveTask per call forks both children and joins them", true,
                     onPool(f, workers(2), JdkPools::forkJoin)),
        new Workload("W7", "10,000 rounds of invokeAll(64 trivial Callables) -> List<Future<Integer>>, read into int[]",
                     true, onPool(f, 2, JdkPools::invokeAll64)),
        new Workload("idle", "process CPU of an idle pool of 2 over 2 s (JVM threads included)", false,
                     onPool(f, 2, JdkPools::idle)));
  }

  // ---- main: Harness.h's main() -------------------------------------------------

  public static void main(String[] args) {
    System.exit(run(args));
  }

  static int run(String[] args) {
    final String impl = args.length > 0 ? args[0] : "";
    final List<Workload> workloads =
        impl.equals("tpe") ? tpeWorkloads() : impl.equals("fjp") ? fjpWorkloads() : null;
    final String which = args.length > 1 ? args[1] : "list";
    final int runs = args.length > 2 ? (int) parseDouble(args[2], 0) : 5;
    final double scale = args.length > 3 ? parseDouble(args[3], 0) : 1.0;
    if (workloads == null || runs < 1 || !(scale > 0)) {
      System.err.println("usage: JdkPools <tpe|fjp> <workload|group|all|list|calibrate> [runs=5] [scale=1]");
      return 2;
    }
    if (which.equals("calibrate")) {
      System.out.println(String.format(Locale.ROOT, "%.3f", calibrateSpin()));
      return 0;
    }
    if (which.equals("list")) {
      for (Workload w : workloads) System.out.println(String.format(Locale.ROOT, "%-9s %s", w.name(), w.description()));
      return 0;
    }
    final boolean warmUp = System.getenv("BENCH_NO_WARMUP") == null;
    final long warmUpNanos = (long) (parseDouble(System.getenv("BENCH_JAVA_WARMUP_MS"), 1000) * 1e6);
    boolean found = false;
    for (Workload w : workloads) {
      if (!which.equals("all") && !inGroup(w.name(), which)) continue;
      found = true;
      try {
        if (warmUp && w.jit()) {
          final long start = System.nanoTime();
          int passes = 0;
          while (passes < 2 || System.nanoTime() - start < warmUpNanos) {
            w.body().run(new Run(scale));
            ++passes;
          }
          System.err.println(String.format(Locale.ROOT, "%-7s %-9s warm-up: %d passes at scale %s, %.0f ms", impl,
                                           w.name(), passes, g(scale, 6), (System.nanoTime() - start) / 1e6));
        } else if (warmUp) {
          w.body().run(new Run(scale / 10));
        }
        final Map<String, List<Double>> byMetric = new LinkedHashMap<>();
        for (int r = 0; r < runs; ++r) {
          System.gc();
          final var run = new Run(scale);
          w.body().run(run);
          for (Sample s : run.samples) {
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

  /** True if `name` is `which` or in the group `which` names ("W6" selects "W6.cancel"). */
  static boolean inGroup(String name, String which) {
    return name.equals(which) || (name.startsWith(which) && name.length() > which.length()
                                  && name.charAt(which.length()) == '.');
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
