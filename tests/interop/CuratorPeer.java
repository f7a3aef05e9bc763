// A Curator peer driven over stdin/stdout by tests/interop.rs.
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
//   quit                    closes everything and exits              -> ok bye
//
// stdout carries the protocol only: logging goes nowhere (slf4j-nop on the class path).

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;

public class CuratorPeer {
    private static String connectString;

    static CuratorFramework connect() throws Exception {
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
        Map<String, LeaderLatch> latches = new HashMap<>();
        BufferedReader in =
                new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        reply("ready");
        String line;
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            if (w.length == 0 || w[0].isEmpty()) {
                continue;
            }
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
                    case "nodes":
                        reply(("ok " + String.join(" ", mutex.getParticipantNodes())).trim());
                        break;
                    case "stress":
                        reply(stress(path, Integer.parseInt(w[1]), w[2], w[3],
                                Integer.parseInt(w[4])));
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
                    case "quit":
                        for (LeaderLatch latch : latches.values()) {
                            latch.close();
                        }
                        if (mutex.isAcquiredInThisProcess()) {
                            mutex.release();
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

    static synchronized void reply(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static String stress(String path, int n, String counter, String inside, int threads)
            throws Exception {
        AtomicInteger acquisitions = new AtomicInteger();
        AtomicInteger overlaps = new AtomicInteger();
        List<Throwable> failures = new ArrayList<>();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            String who = "curator-" + t;
            Thread worker = new Thread(() -> {
                try (CuratorFramework client = connect()) {
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
        if (!failures.isEmpty()) {
            return "err stress worker failed: " + failures.get(0).toString().replace('\n', ' ');
        }
        return "ok " + acquisitions.get() + " " + overlaps.get();
    }
}
