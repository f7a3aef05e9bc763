"""One member of a kazoo SetPartitioner, for benches/partition: the peer side.

    kazoo_member.py <hosts> <path> <id> <partitions> <session timeout s> <time boundary s>

Prints `<ms> working <partition>` for each partition of the set it acquired and
`<ms> stopped <partition>` for each one it stops working (the set is released whenever the
party changes), `<ms> left` once it left on SIGTERM; ms since the epoch.
"""

import signal
import sys
import time

from kazoo.client import KazooClient


def say(what):
    print("%d %s" % (int(time.time() * 1000), what), flush=True)


class Leave(Exception):
    pass


def leave(_signum, _frame):
    raise Leave()


def stop_working(partitions):
    for partition in partitions:
        say("stopped " + partition)


def main():
    hosts, path, ident, count, timeout, boundary = sys.argv[1:7]
    signal.signal(signal.SIGTERM, leave)
    client = KazooClient(hosts=hosts, timeout=float(timeout))
    client.start()
    changed = client.handler.event_object()
    names = ["p%02d" % i for i in range(int(count))]
    partitioner = client.SetPartitioner(
        path=path,
        set=names,
        identifier=ident,
        time_boundary=float(boundary),
        state_change_event=changed,
    )
    working = []
    try:
        while True:
            changed.clear()
            if partitioner.failed:
                stop_working(working)
                say("failed")
                sys.exit(1)
            elif partitioner.release:
                stop_working(working)
                working = []
                partitioner.release_set()
            elif partitioner.acquired:
                if not working:
                    working = list(partitioner)
                    for partition in working:
                        say("working " + partition)
                changed.wait(1.0)
            else:
                partitioner.wait_for_acquire(1.0)
    except Leave:
        stop_working(working)
        partitioner.finish()
        client.stop()
        client.close()
        say("left")


if __name__ == "__main__":
    main()
