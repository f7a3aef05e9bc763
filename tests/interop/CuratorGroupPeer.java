// A Curator GroupMember peer driven over stdin/stdout by tests/suite/interop.rs (see
// zk_harness::peers::Peer::curator_group).
//
//   java -cp <curator jars>:<dir of the peers' classes> CuratorGroupPeer <connect string> <path>
//
// Prints `ready` once its client is connected, then answers every command line with one
// line: `ok [...]` or `err <what>`. Ids and data contain no spaces.
//
//   join <id> <data>        new GroupMember(client, path, id, data).start()  -> ok joined
//   leave <id>              GroupMember.close()                             -> ok left
//   await-members <ms> <ids>
//                           waits up to <ms> until getCurrentMembers() of the first member
//                           (or of an observing GroupMember's cache) lists exactly <ids>
//                           (comma-separated, `-` for none)   -> ok true <id>=<data>,... | ok false <...>
//   quit                    closes everything and exits       -> ok bye
//
// stdout carries the protocol only: logging goes nowhere (slf4j-nop on the class path).

import java.io.BufferedReader;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.recipes.nodes.GroupMember;

public class CuratorGroupPeer {
    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: CuratorGroupPeer <connect string> <path>");
            System.exit(2);
        }
        String path = args[1];
        CuratorFramework client = CuratorPeer.connect(args[0]);
        Map<String, GroupMember> members = new LinkedHashMap<>();
        BufferedReader in = CuratorPeer.ready();
        String[] w;
        while ((w = CuratorPeer.words(in)) != null) {
            try {
                switch (w[0]) {
                    case "join": {
                        GroupMember member = new GroupMember(client, path, w[1],
                                w[2].getBytes(StandardCharsets.UTF_8));
                        member.start();
                        members.put(w[1], member);
                        CuratorPeer.reply("ok joined");
                        break;
                    }
                    case "leave":
                        members.remove(w[1]).close();
                        CuratorPeer.reply("ok left");
                        break;
                    case "await-members": {
                        GroupMember viewer = members.values().iterator().next();
                        String wanted = w[2].equals("-") ? "" : w[2];
                        long deadline = System.currentTimeMillis() + Long.parseLong(w[1]);
                        while (!ids(viewer).equals(wanted) && System.currentTimeMillis() < deadline) {
                            Thread.sleep(10);
                        }
                        String seen = shown(viewer);
                        CuratorPeer.reply("ok " + ids(viewer).equals(wanted) + " " + (seen.isEmpty() ? "-" : seen));
                        break;
                    }
                    case "quit":
                        for (GroupMember member : members.values()) {
                            member.close();
                        }
                        client.close();
                        CuratorPeer.reply("ok bye");
                        return;
                    default:
                        CuratorPeer.reply("err unknown command " + w[0]);
                }
            } catch (Exception e) {
                CuratorPeer.reply("err " + e);
            }
        }
    }

    static Map<String, String> current(GroupMember viewer) {
        Map<String, String> sorted = new TreeMap<>();
        viewer.getCurrentMembers().forEach((id, data) ->
                sorted.put(id, new String(data, StandardCharsets.UTF_8)));
        return sorted;
    }

    static String ids(GroupMember viewer) {
        return String.join(",", current(viewer).keySet());
    }

    static String shown(GroupMember viewer) {
        StringBuilder out = new StringBuilder();
        current(viewer).forEach((id, data) -> out.append(out.length() == 0 ? "" : ",").append(id).append('=').append(data));
        return out.toString();
    }
}
