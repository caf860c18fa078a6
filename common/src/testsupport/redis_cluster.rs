//! A throw-away Redis Cluster for tests: 3 masters + 3 replicas on free loopback ports, each
//! node with an explicit `cluster-port` and `cluster-node-timeout 1000` (DECISIONS.md), data in
//! one temp dir, joined with `redis-cli --cluster create … --cluster-replicas 1`. Ready when
//! every node says `cluster_state:ok`, knows all six nodes, and every replica's link is up.
//! Helpers to find a key's master, move a slot (`SETSLOT IMPORTING/MIGRATING`, `MIGRATE`,
//! `SETSLOT NODE`) and fail a master over. Stopped (killed) on drop.

use super::free_port;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NODES: usize = 6;
/// Generous: under a loaded CI machine a node may miss the 1 s node timeout once and the
/// cluster needs a failover round to settle.
const DEADLINE: Duration = Duration::from_secs(60);

/// One node of the cluster.
#[derive(Debug)]
struct Node {
    child: Child,
    port: u16,
    bus: u16,
}

/// A running 3 + 3 Redis Cluster.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<Node>,
    dir: PathBuf,
    /// Kills the nodes once the test process is gone: a cluster shared through a `static`
    /// is never dropped.
    watchdog: Option<Child>,
}

/// One line of `CLUSTER NODES`.
#[derive(Debug, Clone)]
pub struct ClusterNode {
    /// Node id.
    pub id: String,
    /// Client port.
    pub port: u16,
    /// `master` or `slave` among the flags.
    pub master: bool,
    /// The master's id for a replica.
    pub master_id: Option<String>,
    /// Slot ranges served (inclusive), migration markers left out.
    pub slots: Vec<(u16, u16)>,
}

fn spawn_node(port: u16, bus: u16, dir: &std::path::Path) -> std::io::Result<Child> {
    let bin = std::env::var("REDIS_SERVER").unwrap_or_else(|_| "redis-server".into());
    Command::new(bin)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--cluster-enabled", "yes"])
        .args(["--cluster-config-file", &format!("nodes-{port}.conf")])
        .args(["--cluster-port", &bus.to_string()])
        .args(["--cluster-node-timeout", "1000"])
        .args(["--maxmemory-policy", "noeviction"])
        .args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
        .arg("--dbfilename")
        .arg(format!("dump-{port}.rdb"))
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// Runs `redis-cli -p port args…` and returns its output (panics when it cannot run).
pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run redis-cli (install Debian's redis-tools): {e}"));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts one node on free ports and waits until it answers (`INFO server` gives its process
/// id). A node that exits first (its port
/// or bus port was taken between [`free_port`] and its bind, by another test starting a server
/// at the same moment: CI saw a node never answer for 60 s) is started again on new ports.
fn start_node(dir: &std::path::Path) -> Node {
    for _ in 0..5 {
        let (port, bus) = (free_port(), free_port());
        let mut child = spawn_node(port, bus, dir).unwrap_or_else(|e| {
            panic!("cannot start redis-server (install Debian's redis-server): {e}")
        });
        let start = Instant::now();
        while start.elapsed() < DEADLINE {
            // Answered by this node, not by a server another test started on the port.
            let ours = format!("process_id:{}", child.id());
            if cli(port, &["INFO", "server"])
                .lines()
                .any(|l| l.trim() == ours)
            {
                return Node { child, port, bus };
            }
            if child.try_wait().ok().flatten().is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
    panic!("redis cluster: no node answered PING on 5 pairs of free ports");
}

fn poll(what: &str, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while start.elapsed() < DEADLINE {
        if ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("redis cluster: {what} not within {DEADLINE:?}");
}

impl RedisCluster {
    /// Starts six nodes and joins them as 3 masters + 3 replicas. Panics when `redis-server`
    /// or `redis-cli` is missing: tests that need a cluster must not silently pass without it.
    pub fn start() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "redis-cluster-{}-{}",
            std::process::id(),
            free_port()
        ));
        std::fs::create_dir_all(&dir).expect("create redis cluster temp dir");
        let nodes: Vec<Node> = (0..NODES).map(|_| start_node(&dir)).collect();
        let watchdog = watchdog(&nodes, &dir);
        let cluster = Self {
            nodes,
            dir,
            watchdog,
        };
        let addrs: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        cluster.wait_healthy();
        cluster
    }

    /// Every node: `cluster_state:ok`, six known nodes, 3 masters with slots, replica links up.
    pub fn wait_healthy(&self) {
        for n in &self.nodes {
            let mut last = String::new();
            let start = Instant::now();
            let mut met = start;
            while !(last.contains("cluster_state:ok") && last.contains("cluster_known_nodes:6")) {
                assert!(
                    start.elapsed() < DEADLINE,
                    "redis cluster: node {} not ok within {DEADLINE:?}:\n{last}\n{}",
                    n.port,
                    cli(n.port, &["CLUSTER", "NODES"])
                );
                std::thread::sleep(Duration::from_millis(50));
                last = cli(n.port, &["CLUSTER", "INFO"]);
                // A node that still misses one of the others after a few seconds (a MEET lost
                // while a restarted node came back: 5 known nodes for a minute on a loaded CI
                // machine) is introduced again; meeting a known node changes nothing.
                if last.contains("cluster_known_nodes:")
                    && !last.contains("cluster_known_nodes:6")
                    && met.elapsed() > Duration::from_secs(5)
                {
                    met = Instant::now();
                    for other in self.nodes.iter().filter(|o| o.port != n.port) {
                        let (p, b) = (other.port.to_string(), other.bus.to_string());
                        cli(n.port, &["CLUSTER", "MEET", "127.0.0.1", &p, &b]);
                    }
                }
            }
        }
        poll("3 masters and linked replicas", || {
            let nodes = self.cluster_nodes();
            let masters = nodes.iter().filter(|n| n.master && !n.slots.is_empty());
            masters.count() == 3
                && nodes.iter().filter(|n| !n.master).all(|r| {
                    cli(r.port, &["INFO", "replication"]).contains("master_link_status:up")
                })
        });
    }

    /// Client URLs of every node (`redis://127.0.0.1:P`).
    pub fn urls(&self) -> Vec<String> {
        self.nodes
            .iter()
            .map(|n| format!("redis://127.0.0.1:{}", n.port))
            .collect()
    }

    /// Sends `kill -{sig}` to the node on `port` (`STOP`/`CONT` to pause one, `KILL` to lose
    /// it with whatever it had not replicated). Never ask a paused node anything.
    pub fn signal(&self, port: u16, sig: &str) {
        let node = self
            .nodes
            .iter()
            .find(|n| n.port == port)
            .expect("a node of this cluster");
        let ok = Command::new("kill")
            .args([format!("-{sig}"), node.child.id().to_string()])
            .status()
            .expect("kill")
            .success();
        assert!(ok, "kill -{sig} node {port}");
    }

    /// Starts the node on `port` again after it was killed: same ports, same node id (its
    /// `nodes-P.conf`), so it rejoins the cluster, as a replica if its master role was taken
    /// over. Waits until it answers `PING`.
    pub fn restart(&mut self, port: u16) {
        let dir = self.dir.clone();
        let node = self
            .nodes
            .iter_mut()
            .find(|n| n.port == port)
            .expect("a node of this cluster");
        let _ = node.child.kill();
        let _ = node.child.wait();
        node.child = spawn_node(node.port, node.bus, &dir).expect("restart redis-server");
        poll("PING after restart", || {
            cli(port, &["PING"]).trim() == "PONG"
        });
    }

    /// Ports of the nodes started (alive or not).
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    /// `CLUSTER NODES` as seen by the first node that answers.
    pub fn cluster_nodes(&self) -> Vec<ClusterNode> {
        let text = self
            .nodes
            .iter()
            .map(|n| cli(n.port, &["CLUSTER", "NODES"]))
            .find(|t| !t.trim().is_empty())
            .expect("some node answers CLUSTER NODES");
        text.lines().filter_map(parse_node).collect()
    }

    /// The hash slot of `key`.
    pub fn slot_of(&self, key: &str) -> u16 {
        cli(self.nodes[0].port, &["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("CLUSTER KEYSLOT")
    }

    /// The master serving `key`'s slot, as the cluster sees it now.
    pub fn master_of(&self, key: &str) -> ClusterNode {
        let slot = self.slot_of(key);
        self.cluster_nodes()
            .into_iter()
            .find(|n| n.master && n.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            .expect("a master serves the slot")
    }

    /// The replica of the master with id `master_id`.
    pub fn replica_of(&self, master_id: &str) -> ClusterNode {
        self.cluster_nodes()
            .into_iter()
            .find(|n| n.master_id.as_deref() == Some(master_id))
            .expect("the master has a replica")
    }

    /// The first line of `ROLE` from the node on `port` (`master` or `slave`).
    pub fn role(&self, port: u16) -> String {
        cli(port, &["ROLE"])
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_owned()
    }

    /// `CLUSTER FAILOVER` on the replica of `master` (a graceful, lossless switch: the master
    /// stops writes until the replica caught up); waits until the replica is the master and the
    /// cluster agrees. Returns the new master.
    pub fn failover(&self, master: &ClusterNode) -> ClusterNode {
        let replica = self.replica_of(&master.id);
        let out = cli(replica.port, &["CLUSTER", "FAILOVER"]);
        assert_eq!(out.trim(), "OK", "CLUSTER FAILOVER answered {out:?}");
        poll("the replica promoted", || {
            self.role(replica.port) == "master" && self.role(master.port) == "slave"
        });
        self.wait_healthy();
        self.cluster_nodes()
            .into_iter()
            .find(|n| n.id == replica.id)
            .expect("new master listed")
    }

    /// First step of a slot move: `IMPORTING` on `to`, `MIGRATING` on the slot's owner.
    pub fn begin_slot_move(&self, slot: u16, from: &ClusterNode, to: &ClusterNode) {
        let s = slot.to_string();
        let a = cli(to.port, &["CLUSTER", "SETSLOT", &s, "IMPORTING", &from.id]);
        let b = cli(from.port, &["CLUSTER", "SETSLOT", &s, "MIGRATING", &to.id]);
        assert_eq!(
            (a.trim(), b.trim()),
            ("OK", "OK"),
            "SETSLOT IMPORTING/MIGRATING"
        );
    }

    /// Second step: `MIGRATE` every key of the slot from `from` to `to`; returns how many.
    pub fn move_slot_keys(&self, slot: u16, from: &ClusterNode, to: &ClusterNode) -> usize {
        self.move_slot_keys_where(slot, from, to, |_| true)
    }

    /// Like [`RedisCluster::move_slot_keys`] for the keys `pick` chooses only (a migration
    /// caught half-way: `redis-cli --cluster reshard` moves keys in batches, in no set order).
    pub fn move_slot_keys_where(
        &self,
        slot: u16,
        from: &ClusterNode,
        to: &ClusterNode,
        pick: impl Fn(&str) -> bool,
    ) -> usize {
        let s = slot.to_string();
        let mut moved = 0;
        loop {
            let keys = cli(from.port, &["CLUSTER", "GETKEYSINSLOT", &s, "100000"]);
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty() && pick(k)).collect();
            if keys.is_empty() {
                return moved;
            }
            let port = to.port.to_string();
            let mut args = vec!["MIGRATE", "127.0.0.1", &port, "", "0", "5000", "KEYS"];
            args.extend(keys.iter().copied());
            let out = cli(from.port, &args);
            assert_eq!(out.trim(), "OK", "MIGRATE answered {out:?}");
            moved += keys.len();
        }
    }

    /// Last step: `SETSLOT … NODE` on every master, so the slot is `to`'s everywhere.
    pub fn end_slot_move(&self, slot: u16, to: &ClusterNode) {
        let s = slot.to_string();
        for n in self.cluster_nodes().iter().filter(|n| n.master) {
            let out = cli(n.port, &["CLUSTER", "SETSLOT", &s, "NODE", &to.id]);
            assert_eq!(out.trim(), "OK", "SETSLOT NODE on {}", n.port);
        }
        poll("every node sees the slot's new owner", || {
            self.nodes.iter().all(|n| {
                cli(n.port, &["CLUSTER", "NODES"])
                    .lines()
                    .filter_map(parse_node)
                    .any(|m| m.id == to.id && m.slots.iter().any(|&(a, b)| a <= slot && slot <= b))
            })
        });
    }

    /// `INFO errorstats` count of replies starting with `prefix` (`MOVED`, `ASK`, `TRYAGAIN`)
    /// the node on `port` has sent.
    pub fn error_count(&self, port: u16, prefix: &str) -> u64 {
        let tag = format!("errorstat_{prefix}:count=");
        cli(port, &["INFO", "errorstats"])
            .lines()
            .find_map(|l| l.trim().strip_prefix(tag.as_str()))
            .and_then(|v| v.split(',').next()?.parse().ok())
            .unwrap_or(0)
    }
}

fn watchdog(nodes: &[Node], dir: &std::path::Path) -> Option<Child> {
    let pids: Vec<String> = nodes.iter().map(|n| n.child.id().to_string()).collect();
    let script = format!(
        "while kill -0 {} 2>/dev/null; do sleep 1; done; kill -9 {} 2>/dev/null; rm -rf '{}'",
        std::process::id(),
        pids.join(" "),
        dir.display()
    );
    Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()
}

fn parse_node(line: &str) -> Option<ClusterNode> {
    let f: Vec<&str> = line.split_whitespace().collect();
    if f.len() < 8 {
        return None;
    }
    let port = f[1]
        .split(['@', ','])
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let slots = f[8..]
        .iter()
        .filter(|s| !s.starts_with('['))
        .filter_map(|s| match s.split_once('-') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => s.parse().ok().map(|a| (a, a)),
        })
        .collect();
    Some(ClusterNode {
        id: f[0].to_owned(),
        port,
        master: f[2].split(',').any(|x| x == "master"),
        master_id: (f[3] != "-").then(|| f[3].to_owned()),
        slots,
    })
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        if let Some(w) = &mut self.watchdog {
            let _ = w.kill();
            let _ = w.wait();
        }
        for n in &mut self.nodes {
            let _ = n.child.kill();
            let _ = n.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
