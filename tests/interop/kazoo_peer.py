"""A kazoo peer driven over stdin/stdout by tests/suite/interop.rs.

    /usr/bin/python3 kazoo_peer.py <connect string> <path>

Prints `ready` once its client is connected, then answers every command line with one
line: `ok [...]` or `err <what>`. Every Lock is made with extra_lock_patterns=["-lock-"],
so kazoo counts the `_c_<uuid>-lock-<seq>` nodes of zk-recipes and Curator as contenders.

    lock                    Lock.acquire() (blocks)                 -> ok locked <node>
    lock-for <ms>           Lock.acquire(timeout) (0: non-blocking) -> ok true | ok false
    unlock                  Lock.release()                          -> ok unlocked
    contenders              Lock.contenders(), queue order          -> ok <data> <data> ...
    stress <n> <counter> <inside> <threads>
                            <threads> threads, each on its own client (session) with its
                            own Lock, lock <n> times each; inside the section create <inside>
                            EPHEMERAL (NodeExists = overlap), read-modify-write <counter>
                            (`<count> <last holder>`), delete <inside>, release
                                                                    -> ok <acquisitions> <overlaps>
    read | write            ReadLock / WriteLock .acquire() (blocks) -> ok read | ok write
    read-for <ms> | write-for <ms>
                            acquire(timeout) (0: non-blocking)      -> ok true | ok false
    unread | unwrite        release() of the ReadLock / WriteLock   -> ok unread | ok unwrite
    quit                    releases, closes the client and exits   -> ok bye

The ReadLock is made with extra_lock_patterns=["__WRIT__"] and the WriteLock with
["__WRIT__", "__READ__"], so kazoo counts the writers (and, for a writer, the readers) of
zk-recipes and Curator (`_c_<uuid>-__WRIT__<seq>`, `_c_<uuid>-__READ__<seq>`).

Logging goes to stderr; stdout carries the protocol only.
"""

import sys
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import LockTimeout, NodeExistsError

PATTERNS = ["-lock-"]
READ_PATTERNS = ["__WRIT__"]
WRITE_PATTERNS = ["__WRIT__", "__READ__"]


def reply(line, _lock=threading.Lock()):
    with _lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def connect(hosts):
    client = KazooClient(hosts=hosts, timeout=10.0)
    client.start(timeout=20)
    return client


def stress(hosts, path, n, counter, inside, threads):
    totals = {"acquisitions": 0, "overlaps": 0}
    failures = []
    guard = threading.Lock()

    def worker(who):
        client = connect(hosts)
        try:
            lock = client.Lock(path, who, extra_lock_patterns=PATTERNS)
            for _ in range(n):
                with lock:
                    mine = True
                    try:
                        client.create(inside, who.encode(), ephemeral=True)
                    except NodeExistsError:
                        mine = False
                        with guard:
                            totals["overlaps"] += 1
                    data, _ = client.get(counter)
                    count = int(data.split(b" ")[0])
                    client.set(counter, b"%d %s" % (count + 1, who.encode()))
                    with guard:
                        totals["acquisitions"] += 1
                    if mine:
                        client.delete(inside)
        except Exception as e:  # reported to the test
            with guard:
                failures.append(repr(e))
        finally:
            client.stop()
            client.close()

    workers = [
        threading.Thread(target=worker, args=("kazoo-%d" % t,)) for t in range(threads)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if failures:
        return "err stress worker failed: " + failures[0]
    return "ok %d %d" % (totals["acquisitions"], totals["overlaps"])


def acquire_within(lock, ms):
    """acquire() waiting at most `ms` (0: not at all); whether it holds."""
    if ms == 0:
        return lock.acquire(blocking=False)
    try:
        return lock.acquire(timeout=ms / 1000.0)
    except LockTimeout:
        return False


def main():
    if len(sys.argv) != 3:
        sys.stderr.write("usage: kazoo_peer.py <connect string> <path>\n")
        sys.exit(2)
    hosts, path = sys.argv[1], sys.argv[2]
    client = connect(hosts)
    lock = client.Lock(path, "kazoo-main", extra_lock_patterns=PATTERNS)
    rw = {
        "read": client.ReadLock(path, "kazoo-reader", extra_lock_patterns=READ_PATTERNS),
        "write": client.WriteLock(path, "kazoo-writer", extra_lock_patterns=WRITE_PATTERNS),
    }
    reply("ready")
    for line in sys.stdin:
        w = line.split()
        if not w:
            continue
        try:
            cmd = w[0]
            if cmd == "lock":
                lock.acquire()
                reply("ok locked %s/%s" % (path, lock.node))
            elif cmd == "lock-for":
                got = acquire_within(lock, int(w[1]))
                reply("ok %s" % ("true" if got else "false"))
            elif cmd in rw:
                rw[cmd].acquire()
                reply("ok " + cmd)
            elif cmd in ("read-for", "write-for"):
                got = acquire_within(rw[cmd[: -len("-for")]], int(w[1]))
                reply("ok %s" % ("true" if got else "false"))
            elif cmd in ("unread", "unwrite"):
                rw[cmd[len("un"):]].release()
                reply("ok " + cmd)
            elif cmd == "unlock":
                lock.release()
                reply("ok unlocked")
            elif cmd == "contenders":
                reply(" ".join(["ok"] + [c or "-" for c in lock.contenders()]))
            elif cmd == "stress":
                reply(stress(hosts, path, int(w[1]), w[2], w[3], int(w[4])))
            elif cmd == "quit":
                lock.release()
                for held in rw.values():
                    held.release()
                client.stop()
                client.close()
                reply("ok bye")
                return
            else:
                reply("err unknown command " + cmd)
        except Exception as e:
            reply("err " + repr(e).replace("\n", " "))
    client.stop()
    client.close()


if __name__ == "__main__":
    main()
