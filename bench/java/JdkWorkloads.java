// SPDX-License-Identifier: BSL-1.0
// The JDK pools benchmark's pools and workloads (JdkPools.java describes the
// benchmark and runs it; JdkHarness.java holds Harness.h's counterparts): the
// two pools, each workload's body, and the table of the workloads each pool
// runs.

import java.util.ArrayList;
import java.util.List;
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

final class JdkWorkloads {
  private JdkWorkloads() {}

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
    void run(JdkHarness.Run run, ExecutorService pool) throws Exception;
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
  static void submitThroughput(JdkHarness.Run run, ExecutorService pool) throws Exception {
    final var done = new JdkHarness.Countdown();
    final long n = run.count(1_000_000);
    done.reset(n);
    final Runnable task = () -> done.hit();
    run.throughput("throughput", "Mtasks/s", n, () -> {
      for (long i = 0; i < n; ++i) pool.execute(task);
      done.await();
    });
  }

  // W2: 64 submit()s of ~1 us, then their Futures waited for, per round.
  static void fanOutFanIn(JdkHarness.Run run, ExecutorService pool) throws Exception {
    final var work = new JdkHarness.Work(1_000);
    final Future<?>[] futures = new Future<?>[64];
    run.rounds(run.count(1_000), () -> {
      for (int i = 0; i < futures.length; ++i) futures[i] = pool.submit(() -> work.run());
      for (Future<?> f : futures) f.get();
    });
  }

  // W3: a chain of tasks, each execute()s the next (the Runnable is the chain itself).
  static final class Chain implements Runnable {
    private final ExecutorService pool;
    private final JdkHarness.Countdown done;
    private long left;  // plain: each step happens-before the next through the pool's hand-off

    Chain(ExecutorService pool, long left, JdkHarness.Countdown done) {
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

  static void taskChain(JdkHarness.Run run, ExecutorService pool) throws Exception {
    final var done = new JdkHarness.Countdown();
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

  static void forkJoin(JdkHarness.Run run, ExecutorService pool) throws Exception {
    final int depth = run.depth(25);
    final long[] result = {0};
    run.duration("fib time", () -> result[0] = ((ForkJoinPool) pool).invoke(new Fib(depth)));
    if (result[0] <= 0) throw new IllegalStateException("fib returned a wrong value");
  }

  // W5: overload: core = max = 2, ArrayBlockingQueue(1024), CallerRunsPolicy,
  // tasks of ~200 ns; the share of tasks the producer ran itself.
  static void overload(JdkHarness.Run run) throws Exception {
    final var pool = new ThreadPoolExecutor(2, 2, 60, TimeUnit.SECONDS, new ArrayBlockingQueue<>(1024),
                                            new ThreadPoolExecutor.CallerRunsPolicy());
    pool.prestartAllCoreThreads();
    try {
      final var done = new JdkHarness.Countdown();
      final var work = new JdkHarness.Work(200);
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
  static void invokeAll64(JdkHarness.Run run, ExecutorService pool) throws Exception {
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
    JdkHarness.expectCount("sum of the last results", sum[0], 63 * rounds);
  }

  // Idle: process CPU of a pool of 2 with nothing to do, after a burst of work
  // (the JVM's own threads, JIT and GC, count too).
  static void idle(JdkHarness.Run run, ExecutorService pool) throws Exception {
    final var done = new JdkHarness.Countdown();
    done.reset(10_000);
    for (int i = 0; i < 10_000; ++i) pool.execute(() -> done.hit());
    done.await();
    run.idleCpu();
  }

  // ---- the workload tables --------------------------------------------------------

  @FunctionalInterface
  interface WorkloadBody {
    void run(JdkHarness.Run run) throws Exception;
  }

  /** `jit`: warmed up at full scale until compiled (see JdkPools.java's top); else one pass at a tenth of the scale. */
  record Workload(String name, String description, boolean jit, WorkloadBody body) {}

  /** BENCH_WORKERS_N if set (run.sh's scaling mode), else `fallback`. */
  static int workers(int fallback) {
    final double env = JdkHarness.parseDouble(System.getenv("BENCH_WORKERS_N"), 0);
    return env >= 1 ? (int) env : fallback;
  }

  static List<Workload> tpeWorkloads() {
    final PoolFactory f = JdkWorkloads::tpe;
    return List.of(
        new Workload("W1.1",
                     "submit throughput, 1 worker: ThreadPoolExecutor(1, 1, LinkedBlockingQueue), execute of "
                         + "1,000,000 trivial tasks (a countdown)",
                     true, onPool(f, 1, JdkWorkloads::submitThroughput)),
        new Workload("W1.2", "submit throughput, 2 workers", true,
                     onPool(f, workers(2), JdkWorkloads::submitThroughput)),
        new Workload("W2", "fan-out/fan-in: 1,000 rounds of 64 submit()s of ~1 us, their Futures get()", true,
                     onPool(f, workers(2), JdkWorkloads::fanOutFanIn)),
        new Workload("W3.chain", "a chain of 200,000 tasks, each execute()s the next", true,
                     onPool(f, 2, JdkWorkloads::taskChain)),
        new Workload("W5",
                     "overload: core=max=2, ArrayBlockingQueue(1024), CallerRunsPolicy, 1,000,000 tasks of ~200 ns",
                     true, JdkWorkloads::overload),
        new Workload("W7", "10,000 rounds of invokeAll(64 trivial Callables) -> List<Future<Integer>>, read into int[]",
                     true, onPool(f, 2, JdkWorkloads::invokeAll64)),
        new Workload("idle", "process CPU of an idle pool of 2 over 2 s (JVM threads included)", false,
                     onPool(f, 2, JdkWorkloads::idle)));
  }

  static List<Workload> fjpWorkloads() {
    final PoolFactory f = JdkWorkloads::fjp;
    return List.of(
        new Workload("W1.1", "submit throughput, 1 worker: ForkJoinPool(1), execute of 1,000,000 trivial tasks "
                                 + "(a countdown) from outside the pool",
                     true, onPool(f, 1, JdkWorkloads::submitThroughput)),
        new Workload("W1.2", "submit throughput, 2 workers", true,
                     onPool(f, workers(2), JdkWorkloads::submitThroughput)),
        new Workload("W2", "fan-out/fan-in: 1,000 rounds of 64 submit()s of ~1 us, their ForkJoinTasks get()", true,
                     onPool(f, workers(2), JdkWorkloads::fanOutFanIn)),
        new Workload("W3.chain", "a chain of 200,000 tasks, each execute()s the next (a worker's local queue)", true,
                     onPool(f, 2, JdkWorkloads::taskChain)),
        new Workload("W4", "fib(25), a RecursiveTask per call forks both children and joins them", true,
                     onPool(f, workers(2), JdkWorkloads::forkJoin)),
        new Workload("W7", "10,000 rounds of invokeAll(64 trivial Callables) -> List<Future<Integer>>, read into int[]",
                     true, onPool(f, 2, JdkWorkloads::invokeAll64)),
        new Workload("idle", "process CPU of an idle pool of 2 over 2 s (JVM threads included)", false,
                     onPool(f, 2, JdkWorkloads::idle)));
  }
}
