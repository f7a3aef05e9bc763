// A Curator CuratorCache peer driven over stdin/stdout by benches/cache (see
// zk_harness::peers::Peer::curator_cache).
//
//   java -cp <curator jars>:<dir of the peers' classes> CuratorCachePeer <connect string> <path>
//
// Prints `ready` once its client is connected, then answers every command line with one
// line: `ok [...]` or `err <what>`.
//
//   heap      the heap in use after full collections, in bytes     -> ok <bytes>
//   load      starts a CuratorCache of <path> and waits for its initialized() event
//                                                                   -> ok <ms> <nodes cached>
//   size      the nodes cached now, and the ms since the load began -> ok <nodes> <ms>
//   close     closes the cache                                     -> ok closed
//   quit      closes everything and exits                          -> ok bye
//
// stdout carries the protocol only: logging goes nowhere (slf4j-nop on the class path).

import java.io.BufferedReader;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.cache.CuratorCache;
import org.apache.curator.framework.recipes.cache.CuratorCacheListener;

public class CuratorCachePeer {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CuratorCachePeer <connect string> <path>");
            System.exit(2);
        }
        String path = args[1];
        CuratorFramework client = CuratorPeer.connect(args[0]);
        CuratorCache cache = null;
        long started = System.nanoTime();
        BufferedReader in = CuratorPeer.ready();
        String line;
        while ((line = in.readLine()) != null) {
            switch (line.trim()) {
                case "heap":
                    CuratorPeer.reply("ok " + heap());
                    break;
                case "load":
                    cache = CuratorCache.build(client, path);
                    CountDownLatch initialized = new CountDownLatch(1);
                    cache.listenable().addListener(CuratorCacheListener.builder()
                            .forInitialized(initialized::countDown)
                            .build());
                    started = System.nanoTime();
                    cache.start();
                    if (!initialized.await(600, TimeUnit.SECONDS)) {
                        CuratorPeer.reply("err not initialized within 600 s");
                        break;
                    }
                    long ms = (System.nanoTime() - started) / 1_000_000;
                    CuratorPeer.reply("ok " + ms + " " + cache.size());
                    break;
                case "size":
                    long since = (System.nanoTime() - started) / 1_000_000;
                    CuratorPeer.reply("ok " + (cache == null ? 0 : cache.size()) + " " + since);
                    break;
                case "close":
                    if (cache != null) {
                        cache.close();
                        cache = null;
                    }
                    CuratorPeer.reply("ok closed");
                    break;
                case "quit":
                    if (cache != null) {
                        cache.close();
                    }
                    client.close();
                    CuratorPeer.reply("ok bye");
                    return;
                default:
                    CuratorPeer.reply("err unknown command " + line);
            }
        }
    }

    /// The heap in use once collections freed what they can.
    private static long heap() throws InterruptedException {
        Runtime runtime = Runtime.getRuntime();
        long used = Long.MAX_VALUE;
        for (int i = 0; i < 5; i++) {
            System.gc();
            Thread.sleep(50);
            used = Math.min(used, runtime.totalMemory() - runtime.freeMemory());
        }
        return used;
    }
}
