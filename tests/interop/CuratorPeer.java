// A Curator peer driven over stdin/stdout by tests/suite/interop.rs.
//
//   java -cp <curator jars>:<dir of CuratorPeer.class> CuratorPeer <connect string> <path>
//
// Prints `ready` once its client is connected, then answers every command line with one
// line: `ok [...]` or `err <what>`. Commands (ids and paths contain no spaces):
//
//   lock                    InterProcessMutex.acquire() (blocks)   -> ok locked <node>
//   lock-for <ms>           InterProcessMutex.acquire(ms)          -> ok true | ok false
//   unlock                  InterProcessMutex.release()            -> ok unlocked
//   nodes                   the mutex's participant nodes          -> ok <node> <node> ...
//   revocable               InterProcessMutex.makeRevocable(listener) before `lock`
//                                                                  -> ok revocable
//                           the listener, when called, prints      -> revocation-requested
//   revoke <node>           Revoker.attemptRevoke(client, node)    -> ok revoked
//   stress <n> <counter> <inside> <threads>
//                           <threads> threads, each on its own client (session) with its own
//                           InterProcessMutex, lock <n> times each; inside the section create
//                           <inside> EPHEMERAL (NodeExists = overlap), read-modify-write
//                           <counter> (`<count> <last holder>`), delete <inside>, unlock
//                                                                  -> ok <acquisitions> <overlaps>
//   latch-join <id>         new LeaderLatch(client, path, id).start()  -> ok joined
//   latch-close <id>        LeaderLatch.close()                        -> ok closed
//   is-leader <id>          LeaderLatch.hasLeadership()                -> ok true | ok false
//   await-leader <id> <ms>  LeaderLatch.await(ms)                      -> ok true | ok false
//   latch-leader <id>       LeaderLatch.getLeader().getId()            -> ok <id> | ok -
//   participants <id>       LeaderLatch.getParticipants(), queue order -> ok <id>[*] ...
//                           (`*` marks the one Curator calls leader)
//   read | write            InterProcessReadWriteLock's read or write lock, acquire() (blocks)
//                                                                  -> ok read | ok write
//   read-for <ms> | write-for <ms>   acquire(ms)                   -> ok true | ok false
//   unread | unwrite        release() of the read or write lock    -> ok unread | ok unwrite
//   acquire <max>           InterProcessSemaphoreV2(client, path, max).acquire() (blocks)
//                                                                  -> ok lease <node name>
//   acquire-for <max> <ms>  acquire(ms)                            -> ok lease <node name> | ok none
//   return                  closes the oldest lease it holds       -> ok returned
//   rw-stress <n> <room> <readers> <writers> <hold-ms>
//   sem-stress <n> <room> <threads> <max> <hold-ms>
//                           <readers> + <writers> (or <threads>) threads, each on its own
//                           client (session) with its own InterProcessReadWriteLock (or
//                           InterProcessSemaphoreV2 of <max> leases), hold <n> times each; while
//                           holding, enter <room> (see `room` below)
//                                                      -> ok <sections> <violations> <most> <foreign>
//   rw-rate <ms> <readers> <writers>
//   sem-rate <ms> <threads> <max>
//                           for the benchmark: <readers> + <writers> (or <threads>) threads,
//                           each on its own client with its own InterProcessReadWriteLock (or
//                           InterProcessSemaphoreV2 of <max> leases), take and release the read
//                           or write lock (or a lease) as often as they can for <ms> once all
//                           are connected           -> ok <acquisitions> <elapsed ms>
//   perkey-rate <ms> <clients> <threads> <keys> <root> <connect string>
//                           for the benchmark: <threads> threads over <clients> clients on
//                           <connect string> (thread t on client t mod <clients>) take and
//                           release a new InterProcessMutex on <root>/k<key> as often as they
//                           can for <ms>, each key drawn from 0..<keys> by a xorshift seeded
//                           with t + 1                -> ok <acquisitions> <elapsed ms>
//   count-start <path> <seed>   new SharedCount(client, path, seed).start(), kept by path
//                                                                  -> ok <count> <version>
//   count-get <path>        its getVersionedValue()                -> ok <count> <version>
//   count-set <path> <n>    its setCount(n)                        -> ok set
//   count-add <path> <delta> <times>
//                           <times> increments by <delta>, each a loop of
//                           trySetCount(getVersionedValue(), value + delta) until it is true
//                                                                  -> ok <count> <failed tries>
//   count-await <path> <n> <ms>  waits (its listener) until getCount() is <n>
//                                                                  -> ok true | ok false
//   count-close <path>      its close()                            -> ok closed
//   count-stress <path> <n> <threads>
//                           <threads> threads, each on its own client with its own started
//                           SharedCount(path, 0), increment <n> times each as `count-add`
//                                                                  -> ok <increments> <failed tries>
//   count-rate <path> <ms> <threads>
//                           for the benchmark: as `count-stress`, as many increments as they
//                           can for <ms> once all are connected    -> ok <increments> <elapsed ms>
//   quit                    closes everything and exits              -> ok bye
//
// The room: a holder creates the EPHEMERAL_SEQUENTIAL <room>/<kind>-<who>- (kind `r` reader,
// `w` writer, `h` lease holder; Curator's <who> are curator-…, Rust's rust-…), sleeps
// <hold-ms>, lists <room>, deletes its node. A violation: a writer that sees anyone else, a
// reader that sees a writer, a lease holder that sees more than <max> holders. <most>: the
// most readers (or holders) one listing saw; <foreign>: listings that saw a Rust holder.
//
// stdout carries the protocol only: logging goes nowhere (slf4j-nop on the class path).

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.IntFunction;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.Revoker;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.recipes.shared.SharedCount;
import org.apache.curator.framework.recipes.shared.SharedCountListener;
import org.apache.curator.framework.recipes.shared.SharedCountReader;
import org.apache.curator.framework.recipes.shared.VersionedValue;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorPeer {
    private static String connectString;

    static CuratorFramework connect() throws Exception {
        return connect(connectString);
    }

    // Also the connection of CuratorGroupPeer and CuratorCachePeer, compiled with this one.
    static CuratorFramework connect(String connectString) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.builder()
                .connectString(connectString)
                .sessionTimeoutMs(10000)
                .connectionTimeoutMs(10000)
                .retryPolicy(new ExponentialBackoffRetry(100, 10))
                .build();
        client.start();
        if (!client.blockUntilConnected(20, TimeUnit.SECONDS)) {
            client.close();
            throw new IllegalStateException("no connection to " + connectString + " within 20 s");
        }
        return client;
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CuratorPeer <connect string> <path>");
            System.exit(2);
        }
        connectString = args[0];
        String path = args[1];
        CuratorFramework client = connect();
        InterProcessMutex mutex = new InterProcessMutex(client, path);
        InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, path);
        Map<Integer, InterProcessSemaphoreV2> semaphores = new HashMap<>();
        Deque<Lease> leases = new ArrayDeque<>();
        Map<String, LeaderLatch> latches = new HashMap<>();
        Map<String, SharedCount> counts = new HashMap<>();
        BufferedReader in = ready();
        String[] w;
        while ((w = words(in)) != null) {
            try {
                switch (w[0]) {
                    case "lock": {
                        mutex.acquire();
                        List<String> nodes = new ArrayList<>(mutex.getParticipantNodes());
                        reply("ok locked " + (nodes.isEmpty() ? "-" : nodes.get(0)));
                        break;
                    }
                    case "lock-for":
                        reply("ok " + mutex.acquire(Long.parseLong(w[1]), TimeUnit.MILLISECONDS));
                        break;
                    case "unlock":
                        mutex.release();
                        reply("ok unlocked");
                        break;
                    case "revocable":
                        mutex.makeRevocable(forLock -> reply("revocation-requested"));
                        reply("ok revocable");
                        break;
                    case "revoke":
                        Revoker.attemptRevoke(client, w[1]);
                        reply("ok revoked");
                        break;
                    case "nodes":
                        reply(("ok " + String.join(" ", mutex.getParticipantNodes())).trim());
                        break;
                    case "stress":
                        reply(stress(path, Integer.parseInt(w[1]), w[2], w[3],
                                Integer.parseInt(w[4])));
                        break;
                    case "read":
                        rw.readLock().acquire();
                        reply("ok read");
                        break;
                    case "write":
                        rw.writeLock().acquire();
                        reply("ok write");
                        break;
                    case "read-for":
                        reply("ok " + rw.readLock().acquire(Long.parseLong(w[1]), TimeUnit.MILLISECONDS));
                        break;
                    case "write-for":
                        reply("ok " + rw.writeLock().acquire(Long.parseLong(w[1]), TimeUnit.MILLISECONDS));
                        break;
                    case "unread":
                        rw.readLock().release();
                        reply("ok unread");
                        break;
                    case "unwrite":
                        rw.writeLock().release();
                        reply("ok unwrite");
                        break;
                    case "acquire":
                    case "acquire-for": {
                        InterProcessSemaphoreV2 semaphore = semaphores.computeIfAbsent(
                                Integer.parseInt(w[1]), max -> new InterProcessSemaphoreV2(client, path, max));
                        Lease lease = w[0].equals("acquire")
                                ? semaphore.acquire()
                                : semaphore.acquire(Long.parseLong(w[2]), TimeUnit.MILLISECONDS);
                        if (lease != null) {
                            leases.addLast(lease);
                        }
                        reply(lease == null ? "ok none" : "ok lease " + lease.getNodeName());
                        break;
                    }
                    case "return":
                        leases.removeFirst().close();
                        reply("ok returned");
                        break;
                    case "rw-stress": {
                        int writers = Integer.parseInt(w[4]);
                        reply(stressRoom(Integer.parseInt(w[1]), w[2], Integer.parseInt(w[3]) + writers,
                                Integer.MAX_VALUE, Long.parseLong(w[5]), (c, t) -> {
                                    InterProcessReadWriteLock lock = new InterProcessReadWriteLock(c, path);
                                    return holdable(t < writers ? lock.writeLock() : lock.readLock());
                                }, t -> t < writers ? "w" : "r"));
                        break;
                    }
                    case "sem-stress": {
                        int max = Integer.parseInt(w[4]);
                        reply(stressRoom(Integer.parseInt(w[1]), w[2], Integer.parseInt(w[3]), max,
                                Long.parseLong(w[5]),
                                (c, t) -> holdable(new InterProcessSemaphoreV2(c, path, max)), t -> "h"));
                        break;
                    }
                    case "rw-rate": {
                        int writers = Integer.parseInt(w[3]);
                        reply(rate(Long.parseLong(w[1]), Integer.parseInt(w[2]) + writers, (c, t) -> {
                            InterProcessReadWriteLock lock = new InterProcessReadWriteLock(c, path);
                            return holdable(t < writers ? lock.writeLock() : lock.readLock());
                        }));
                        break;
                    }
                    case "sem-rate": {
                        int max = Integer.parseInt(w[3]);
                        reply(rate(Long.parseLong(w[1]), Integer.parseInt(w[2]),
                                (c, t) -> holdable(new InterProcessSemaphoreV2(c, path, max))));
                        break;
                    }
                    case "perkey-rate":
                        reply(perKeyRate(Long.parseLong(w[1]), Integer.parseInt(w[2]),
                                Integer.parseInt(w[3]), Integer.parseInt(w[4]), w[5], w[6]));
                        break;
                    case "latch-join": {
                        if (latches.containsKey(w[1])) {
                            throw new IllegalStateException("latch " + w[1] + " exists");
                        }
                        LeaderLatch latch = new LeaderLatch(client, path, w[1]);
                        latch.start();
                        latches.put(w[1], latch);
                        reply("ok joined");
                        break;
                    }
                    case "latch-close":
                        latch(latches, w[1]).close();
                        latches.remove(w[1]);
                        reply("ok closed");
                        break;
                    case "is-leader":
                        reply("ok " + latch(latches, w[1]).hasLeadership());
                        break;
                    case "await-leader":
                        reply("ok " + latch(latches, w[1])
                                .await(Long.parseLong(w[2]), TimeUnit.MILLISECONDS));
                        break;
                    case "latch-leader": {
                        Participant leader = latch(latches, w[1]).getLeader();
                        reply("ok " + (leader.getId().isEmpty() ? "-" : leader.getId()));
                        break;
                    }
                    case "participants": {
                        StringBuilder out = new StringBuilder("ok");
                        for (Participant p : latch(latches, w[1]).getParticipants()) {
                            out.append(' ').append(p.getId()).append(p.isLeader() ? "*" : "");
                        }
                        reply(out.toString());
                        break;
                    }
                    case "count-start": {
                        if (counts.containsKey(w[1])) {
                            throw new IllegalStateException("count " + w[1] + " exists");
                        }
                        SharedCount count = new SharedCount(client, w[1], Integer.parseInt(w[2]));
                        count.addListener(new Notifier(count));
                        count.start();
                        counts.put(w[1], count);
                        reply("ok " + versioned(count));
                        break;
                    }
                    case "count-get":
                        reply("ok " + versioned(count(counts, w[1])));
                        break;
                    case "count-set":
                        count(counts, w[1]).setCount(Integer.parseInt(w[2]));
                        reply("ok set");
                        break;
                    case "count-add": {
                        SharedCount count = count(counts, w[1]);
                        int failed = add(count, Integer.parseInt(w[2]), Integer.parseInt(w[3]));
                        reply("ok " + count.getCount() + " " + failed);
                        break;
                    }
                    case "count-await": {
                        SharedCount count = count(counts, w[1]);
                        int want = Integer.parseInt(w[2]);
                        long end = System.nanoTime() + Long.parseLong(w[3]) * 1_000_000L;
                        synchronized (count) {
                            while (count.getCount() != want && System.nanoTime() < end) {
                                count.wait(Math.max(1, (end - System.nanoTime()) / 1_000_000L));
                            }
                        }
                        reply("ok " + (count.getCount() == want));
                        break;
                    }
                    case "count-close":
                        count(counts, w[1]).close();
                        counts.remove(w[1]);
                        reply("ok closed");
                        break;
                    case "count-stress":
                        reply(countStress(w[1], Integer.parseInt(w[2]), Integer.parseInt(w[3])));
                        break;
                    case "count-rate":
                        reply(countRate(w[1], Long.parseLong(w[2]), Integer.parseInt(w[3])));
                        break;
                    case "quit":
                        for (SharedCount count : counts.values()) {
                            count.close();
                        }
                        for (LeaderLatch latch : latches.values()) {
                            latch.close();
                        }
                        if (mutex.isAcquiredInThisProcess()) {
                            mutex.release();
                        }
                        while (rw.readLock().isAcquiredInThisProcess()) {
                            rw.readLock().release();
                        }
                        while (rw.writeLock().isAcquiredInThisProcess()) {
                            rw.writeLock().release();
                        }
                        for (Lease lease : leases) {
                            lease.close();
                        }
                        client.close();
                        reply("ok bye");
                        System.exit(0);
                        break;
                    default:
                        reply("err unknown command " + w[0]);
                }
            } catch (Exception e) {
                reply("err " + e.toString().replace('\n', ' '));
            }
        }
        client.close();
        System.exit(0);
    }

    static LeaderLatch latch(Map<String, LeaderLatch> latches, String id) {
        LeaderLatch latch = latches.get(id);
        if (latch == null) {
            throw new IllegalStateException("no latch " + id);
        }
        return latch;
    }

    static SharedCount count(Map<String, SharedCount> counts, String path) {
        SharedCount count = counts.get(path);
        if (count == null) {
            throw new IllegalStateException("no count " + path);
        }
        return count;
    }

    static String versioned(SharedCount count) {
        VersionedValue<Integer> value = count.getVersionedValue();
        return value.getValue() + " " + value.getVersion();
    }

    /// Wakes `count-await` each time the count changes.
    static final class Notifier implements SharedCountListener {
        private final SharedCount count;

        Notifier(SharedCount count) {
            this.count = count;
        }

        public void countHasChanged(SharedCountReader reader, int value) {
            synchronized (count) {
                count.notifyAll();
            }
        }

        public void stateChanged(CuratorFramework client, ConnectionState state) {}
    }

    /// <times> increments of `count` by <delta>, each retried until its trySetCount is true;
    /// the number of tries that were not.
    static int add(SharedCount count, int delta, int times) throws Exception {
        int failed = 0;
        for (int i = 0; i < times; i++) {
            while (true) {
                VersionedValue<Integer> read = count.getVersionedValue();
                if (count.trySetCount(read, read.getValue() + delta)) {
                    break;
                }
                failed++;
            }
        }
        return failed;
    }

    static String countStress(String path, int n, int threads) throws Exception {
        AtomicInteger increments = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        String error = inThreads(threads, (client, t) -> {
            try (SharedCount count = new SharedCount(client, path, 0)) {
                count.start();
                for (int i = 0; i < n; i++) {
                    failed.addAndGet(add(count, 1, 1));
                    increments.incrementAndGet();
                }
            }
        });
        return error != null ? error : "ok " + increments.get() + " " + failed.get();
    }

    static String countRate(String path, long ms, int threads) throws Exception {
        AtomicInteger increments = new AtomicInteger();
        long[] window = new long[2];
        CyclicBarrier ready = new CyclicBarrier(threads, () -> {
            window[0] = System.nanoTime();
            window[1] = window[0] + ms * 1_000_000L;
        });
        String error = inThreads(threads, (client, t) -> {
            try (SharedCount count = new SharedCount(client, path, 0)) {
                count.start();
                ready.await();
                while (System.nanoTime() < window[1]) {
                    add(count, 1, 1);
                    increments.incrementAndGet();
                }
            }
        });
        long elapsed = (System.nanoTime() - window[0]) / 1_000_000L;
        return error != null ? error : "ok " + increments.get() + " " + elapsed;
    }

    // Says `ready`, then reads the command lines on stdin. Also CuratorGroupPeer's and
    // CuratorCachePeer's.
    static BufferedReader ready() {
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        reply("ready");
        return in;
    }

    // The words of the next command line on `in`, blank lines skipped; null at its end.
    // Also CuratorGroupPeer's.
    static String[] words(BufferedReader in) throws IOException {
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length > 0 && !w[0].isEmpty()) {
                return w;
            }
        }
        return null;
    }

    // One line of the protocol; also the reply of CuratorGroupPeer and CuratorCachePeer.
    static synchronized void reply(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String stress(String path, int n, String counter, String inside, int threads)
            throws Exception {
        AtomicInteger acquisitions = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        String failed = inThreads(threads, (client, t) -> {
            String who = "curator-" + t;
            InterProcessMutex mutex = new InterProcessMutex(client, path);
            byte[] me = who.getBytes(StandardCharsets.UTF_8);
            for (int i = 0; i < n; i++) {
                mutex.acquire();
                try {
                    boolean mine = true;
                    try {
                        client.create().withMode(CreateMode.EPHEMERAL).forPath(inside, me);
                    } catch (KeeperException.NodeExistsException e) {
                        overlaps.incrementAndGet();
                        mine = false;
                    }
                    byte[] data = client.getData().forPath(counter);
                    String text = new String(data, StandardCharsets.UTF_8);
                    long value = Long.parseLong(text.split(" ")[0]);
                    Thread.yield();
                    client.setData().forPath(counter,
                            ((value + 1) + " " + who).getBytes(StandardCharsets.UTF_8));
                    acquisitions.incrementAndGet();
                    if (mine) {
                        client.delete().forPath(inside);
                    }
                } finally {
                    mutex.release();
                }
            }
        });
        return failed != null ? failed : "ok " + acquisitions.get() + " " + overlaps.get();
    }

    /// What one stress thread does, on its own client (session).
    interface Work {
        void run(CuratorFramework client, int thread) throws Exception;
    }

    /// Runs `work` in <threads> threads, each on its own client; `null` if all went well,
    /// else the reply that says how the first failure went.
    static String inThreads(int threads, Work work) throws InterruptedException {
        List<Throwable> failures = new ArrayList<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            Thread worker = new Thread(() -> {
                try (CuratorFramework client = connect()) {
                    work.run(client, thread);
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            worker.start();
            workers.add(worker);
        }
        for (Thread worker : workers) {
            worker.join();
        }
        if (failures.isEmpty()) {
            return null;
        }
        return "err stress worker failed: " + failures.get(0).toString().replace('\n', ' ');
    }

    /// What a stress thread holds: a lock (read, write) or a semaphore's lease.
    interface Holdable {
        void acquire() throws Exception;

        void release() throws Exception;
    }

    static Holdable holdable(InterProcessMutex lock) {
        return new Holdable() {
            public void acquire() throws Exception { lock.acquire(); }
            public void release() throws Exception { lock.release(); }
        };
    }

    static Holdable holdable(InterProcessSemaphoreV2 semaphore) {
        return new Holdable() {
            private Lease lease;
            public void acquire() throws Exception { lease = semaphore.acquire(); }
            public void release() throws Exception { lease.close(); }
        };
    }

    /// <threads> threads, each on its own client with the holdable `make` gives it, each
    /// holding <n> times and entering the room while it holds (see the header).
    static String stressRoom(int n, String room, int threads, int max, long holdMs,
            BiFunction<CuratorFramework, Integer, Holdable> make, IntFunction<String> kinds)
            throws Exception {
        AtomicInteger sections = new AtomicInteger();
        AtomicInteger violations = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicInteger foreign = new AtomicInteger();
        String failed = inThreads(threads, (client, t) -> {
            String kind = kinds.apply(t);
            String who = "curator-" + kind + t;
            Holdable holdable = make.apply(client, t);
            for (int i = 0; i < n; i++) {
                holdable.acquire();
                try {
                    String node = client.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL)
                            .forPath(room + "/" + kind + "-" + who + "-");
                    Thread.sleep(holdMs);
                    List<String> seen = client.getChildren().forPath(room);
                    client.delete().forPath(node);
                    long writers = seen.stream().filter(c -> c.startsWith("w-")).count();
                    boolean bad = kind.equals("w") ? seen.size() != 1
                            : kind.equals("r") ? writers > 0 : seen.size() > max;
                    if (bad) {
                        violations.incrementAndGet();
                    }
                    most.accumulateAndGet((int) (seen.size() - writers), Math::max);
                    if (seen.stream().anyMatch(c -> c.substring(2).startsWith("rust"))) {
                        foreign.incrementAndGet();
                    }
                    sections.incrementAndGet();
                } finally {
                    holdable.release();
                }
            }
        });
        return failed != null ? failed
                : "ok " + sections.get() + " " + violations.get() + " " + most.get() + " " + foreign.get();
    }

    /// <threads> threads, each on its own client with the holdable `make` gives it, take and
    /// release it as often as they can for <ms>, from the moment all are ready.
    static String rate(long ms, int threads, BiFunction<CuratorFramework, Integer, Holdable> make)
            throws Exception {
        AtomicInteger acquisitions = new AtomicInteger();
        long[] window = new long[2];
        CyclicBarrier ready = new CyclicBarrier(threads, () -> {
            window[0] = System.nanoTime();
            window[1] = window[0] + ms * 1_000_000L;
        });
        String failed = inThreads(threads, (client, t) -> {
            Holdable holdable = make.apply(client, t);
            ready.await();
            while (System.nanoTime() < window[1]) {
                holdable.acquire();
                holdable.release();
                acquisitions.incrementAndGet();
            }
        });
        long elapsed = (System.nanoTime() - window[0]) / 1_000_000L;
        return failed != null ? failed : "ok " + acquisitions.get() + " " + elapsed;
    }

    /// See `perkey-rate` in the header.
    static String perKeyRate(long ms, int clients, int threads, int keys, String root,
            String connect) throws Exception {
        List<CuratorFramework> sessions = new ArrayList<>();
        for (int c = 0; c < clients; c++) {
            sessions.add(connect(connect));
        }
        AtomicInteger acquisitions = new AtomicInteger();
        List<Throwable> failures = new ArrayList<>();
        long start = System.nanoTime();
        long end = start + ms * 1_000_000L;
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            CuratorFramework client = sessions.get(t % clients);
            long seed = t + 1;
            Thread worker = new Thread(() -> {
                long x = seed;
                try {
                    while (System.nanoTime() < end) {
                        x ^= x << 13;
                        x ^= x >>> 7;
                        x ^= x << 17;
                        long key = Long.remainderUnsigned(x, keys);
                        InterProcessMutex mutex = new InterProcessMutex(client, root + "/k" + key);
                        mutex.acquire();
                        mutex.release();
                        acquisitions.incrementAndGet();
                    }
                } catch (Throwable e) {
                    synchronized (failures) {
                        failures.add(e);
                    }
                }
            });
            worker.start();
            workers.add(worker);
        }
        for (Thread worker : workers) {
            worker.join();
        }
        long elapsed = (System.nanoTime() - start) / 1_000_000L;
        for (CuratorFramework client : sessions) {
            client.close();
        }
        if (!failures.isEmpty()) {
            return "err perkey worker failed: " + failures.get(0).toString().replace('\n', ' ');
        }
        return "ok " + acquisitions.get() + " " + elapsed;
    }
}
