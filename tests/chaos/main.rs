//! Fault injection with a safety checker.
//!
//! Five lock nodes and one separate "data" node (holding one counter per resource) run as real
//! `redis-server` processes. Several client processes (this binary, re-executed in child mode),
//! each with several threads, contend for a few resources through the public API. Every holder
//! does a deliberately non-atomic read-modify-write (GET, sleep, SET) of its resource's counter
//! inside the lock and logs what it did, with times from `CLOCK_MONOTONIC`, which all processes
//! on the machine share. Meanwhile a driver replays a seeded random schedule of faults, every
//! class the docs (docs/guarantees.md) and the module docs say we survive:
//! - **node hangs** (SIGSTOP … SIGCONT) and **crashes** (SIGKILL, then a restart with an empty
//!   dataset: no persistence), both kinds of restart (see *Restarts* below), and about every
//!   20 s **a majority** (3 of 5) down at the same time;
//! - **a node's clock jumping forward** by 200-3000 ms, later back to the real time: every lock
//!   node runs under the `LD_PRELOAD` shim `tests/support/clockshift.c`, one offset file per
//!   node (a backward step only makes keys live longer; steps below the guard's 50 ms are a
//!   documented limit and not injected);
//! - **clients that see different subsets of nodes**: each client process reaches each node
//!   through a TCP relay of its own in the parent (`relay.rs`), which the driver cuts (refusing
//!   connections, or blackholing them: accepted, silent, what was sent delivered after the heal)
//!   and heals;
//! - **client process pauses**: SIGSTOP of a whole client process for longer than any lock's
//!   validity, mostly right after one of its holders said it is about to write (between its
//!   validity check and its write: Kleppmann's example), then SIGCONT;
//! - and two combinations shaped like the holes of issue 24: *Young* (one client cut off from
//!   two nodes holds its locks on a bare majority, another cut off from the other two; a node
//!   they share restarts empty and the clients reconnect to it just after a second boundary of
//!   its clock, when `uptime_in_seconds` overstates its age by almost a second) and *Fence* (two
//!   nodes hang while fenced counters move on the other three; one of those crashes and the
//!   other two hang as the first two come back; it restarts empty: the only quorum holds the
//!   restarted node and two stale counters).
//!
//! # Restarts, and why the clients run in phases
//! A node restarted without persistence has forgotten the locks it held. Two ways keep that
//! safe, and the run covers both: a **delayed restart** (the node stays down longer than the
//! largest TTL, so every key it held has expired anyway; clients need nothing), and a **quick
//! restart** (down 0-100 ms) with clients that set `restart_grace` to exactly the largest TTL
//! (`TTL_MAX_MS`), the setting docs/operations.md recommends. Clients without grace and quick
//! restarts cannot be mixed: that is simply unsafe. So the run alternates **phases** of `PHASE_MS`
//! (the seed picks which comes first; the client processes get the seed and the start of the
//! chaos phase, so they compute the same plan): each client process holds two Redlock clients,
//! one with `restart_grace(TTL_MAX)` and one without, and every acquisition uses the one of the
//! phase it starts in (its log line says which, `g` or `n`). Quick restarts happen only in
//! quick phases, no sooner than `GUARD_IN_MS` after one begins (every call a client without
//! grace started before has returned) and no later than `GUARD_OUT_MS` before it ends (every
//! lock the node forgot has expired before clients without grace come back, a timed restart's
//! wait for its moment included), and the window is checked again once the kill has returned
//! (a kill that ends outside it, on a starved machine, makes the step a delayed restart); kills
//! elsewhere are delayed restarts. A lock taken without
//! grace that is still held when a quick phase begins is safe: the grace keeps every young node
//! out of every later quorum. Rule (p) checks that the phases held. Clock steps forward are
//! kept the largest TTL and a margin away from a phase's end likewise, since the next phase's
//! client may not have sampled that node for a whole phase, and a step smaller than the
//! guard's rate allowance over that long would go unseen (a documented limit). Clients set
//! `clock_quarantine` to `CLOCK_QUARANTINE` (the largest TTL plus a second), so that liveness
//! returns soon after a jump.
//!
//! # The cluster configurations
//! The run has four configurations. The short profile runs three of them, one after the other,
//! with the same seed: standalone, `--cluster3` and `--sentinel` (`--standalone`, `--cluster`,
//! `--cluster3` or `--sentinel` runs one). In `--cluster`, lock node n4 is a whole Redis
//! Cluster, three masters with a replica each (`redis+cluster://`, `src/topology/cluster/`), beside the
//! standalone nodes n0-n3; in `--cluster3` (N = 3), n2 is such a cluster beside n0 and n1, so
//! that a fault of the cluster is a third of the nodes, not a fifth. The workloads, the two
//! Redlock clients per process and the rules are the same. With `--min-replicas` (not in the
//! short profile: see "min_replicas" below) the
//! clients without grace set `min_replicas(1)`, the replicas of every master (A9's complete
//! cover, A10 of `docs/guarantees.md`), and each standalone node has a replica too (never
//! faulted; a master restarted empty resyncs it at once), or those clients would find no
//! quorum.
//!
//! Each process of the cluster runs under the clock shim with an offset file of its own, and
//! each client process reaches each of them through a relay of its own. The masters announce
//! their own addresses (`CLUSTER SLOTS`, `MOVED`, `ASK`), so a relay in front of a seed would
//! not stand between a client and the cluster: each client maps every announced `host:port` to
//! its relay with the hidden `Builder::address_map_for_tests`, which every connection
//! of a cluster node goes through (an address not in the map is reached as announced). So the
//! standalone faults reach the cluster node one master at a time:
//! - **a client cut off from one master** (refused or blackholed, then healed), the master of
//!   one resource's slot at the time, while the other clients still reach it (`MasterCut`; a
//!   partition or a clock jump's cut that picks the cluster node does the same). The node is
//!   then down for that client only in part (its other masters serve their slots until its
//!   worker reconnects), so rule (e) does not count it down; rule (f) excuses its keys as for
//!   any cut;
//! - **a master's clock jumping forward**, later back, the master of one resource's slot
//!   (`MasterJump`; a clock jump that picks the cluster node does the same), with the margins
//!   of a standalone node's jump: the guard samples every master, and a jump of any one
//!   quarantines the whole node.
//!
//! The cluster's masters do not hang or crash as standalone nodes do (hangs and crashes hit the
//! standalone nodes only, and the combinations Young and Fence, which need five standalone
//! nodes, give way to one standalone crash per phase, a quick restart where the phases allow);
//! they have faults of their own, one per phase:
//! - **a master SIGKILLed**: its replica is promoted, then the old master restarts empty (its
//!   `nodes.conf` kept) and rejoins as a replica;
//! - **a master SIGSTOPped** until its replica is promoted, then SIGCONT: it comes back as a
//!   replica;
//! - **`CLUSTER FAILOVER`** on a master's replica: a graceful switch, nothing lost.
//!
//! The fault budget keeps Redlock's assumptions: faults come one after the other, and a
//! cluster fault is the only fault meanwhile (the driver waits until the cluster is whole
//! again, every master with a replica in sync), so a cluster failing over is the one faulty
//! node (the Majority class stays, on the standalone nodes, for rule (e)). For the phases, a
//! failover is a restart of the node: the replica promoted after a SIGKILL or a SIGSTOP may
//! lack keys its master acknowledged, but it is promoted only after `cluster-node-timeout`
//! (1000 ms) and an election, longer than the largest TTL, so those keys had expired: a
//! delayed restart, safe in either phase. The old master, though, back from a SIGSTOP or its
//! restart, believes it is still the master until the cluster tells it otherwise, and a vote a
//! client without `min_replicas` takes from it meanwhile is lost at its demotion: a quick
//! restart for a client without grace. A client with `min_replicas` loses no vote there (the old
//! master's replica went over to the promoted one, so it acknowledges none of their writes,
//! and the promoted replica has every key such a vote counted): a failover needs no grace for
//! it. So the old master comes back (`schedule::cluster_back_window`) inside a quick window,
//! where only clients with `restart_grace` acquire; with `--min-replicas` also inside a delayed
//! phase begun at least `GUARD_IN_MS` before and lasting past its demotion, where only clients
//! with `min_replicas` acquire. Each quick phase's fault of the cluster is a SIGKILL or a
//! SIGSTOP; each delayed phase's a manual failover (which loses nothing), with
//! `--min-replicas` in turns with a SIGKILL or a SIGSTOP. Rule (p) checks on what the driver
//! measured that no vote lost at a demotion (taken by a client with grace, or without
//! `--min-replicas` by any client) met an acquisition of a client without grace before it
//! expired. The grace stays the
//! largest TTL, less than A9 asks (plus `cluster-node-timeout`, for an old master that keeps
//! serving clients across a partition, which these faults do not make: a cut of one master
//! from one client is not a partition of the cluster): the clients with grace are busy on every
//! master through a stop, so each saw the failover (a timeout, then the new slot map) and one
//! that takes a vote from a returning old master has just seen the list of masters change
//! again, its grace covering the old master's few hundred ms until its demotion. Not run here:
//! a client idle through the whole stop keeps its connection to the old master and sees no
//! `MOVED`; its worker confirms a master idle that long with another node before its first
//! vote there (`src/topology/cluster/link/idle.rs`), which T52
//! (`tests/cluster.rs`) exercises. The clients without grace are idle so in quick phases, but
//! acquire only in the next delayed phase, long after the demotion.
//!
//! # min_replicas
//! `--min-replicas` runs the cluster configurations with the clients without grace setting
//! `min_replicas(1)`, with a replica beside each standalone node (four or two more servers).
//! It is not in the short profile, which keeps its time.
//!
//! # The Sentinel configuration
//! In the Sentinel configuration (`--sentinel`), lock node n4 is a Sentinel group
//! (`sentinel.rs`): one master, two replicas, three sentinels (quorum 2,
//! `down-after-milliseconds` 2000, `failover-timeout` 3000), reached by a `redis+sentinel://`
//! URL, beside the standalone nodes n0-n3, which keep their standalone faults as in the cluster
//! configuration (Young and Fence give way to one standalone crash per phase). Each client
//! process reaches each sentinel and each data node through a relay of its own. The sentinels
//! name one address per data node to every client, so, as in the cluster configuration, each
//! client maps those addresses to its relays with the hidden `Builder::address_map_for_tests`,
//! which every connection to a master the sentinels name goes through; a data node keeps its
//! port whatever its role, so the relay to the old master is known at each fault. Each phase
//! has one fault of the group:
//! - **the master SIGKILLed** (delayed phases, in turns with the next): the sentinels promote a
//!   replica after `down-after-milliseconds` and their election (about 3 s, more than the
//!   largest TTL, so every key the replica lacks had expired: a delayed restart, safe in
//!   either phase); once every sentinel names the new master the old one restarts empty as its
//!   replica (as an orchestrator that asks the sentinels at start does);
//! - **a replica lost** (delayed phases, and now and then at random): SIGKILLed, restarted
//!   empty as a replica of the master after 0.2-1.5 s;
//! - **`SENTINEL FAILOVER` of the live master** (quick phases): the old master takes writes
//!   until the sentinels demote it about 9 s after the switch, and a client connected to it
//!   sends it votes (which the switch loses) until its watch has seen a switched sentinel, `D`
//!   later at most (A8); so the fault is a quick restart of the node from the command until
//!   every sentinel switched plus `D` plus the largest TTL, and comes only where a quick window
//!   holds that long (`sentinel::ready`), where only clients with grace acquire. Their grace
//!   is the largest TTL plus `D` (`SENTINEL_D_MS`), as A8 asks. The driver asks once every
//!   sentinel's view of the replicas is current (a sentinel that still takes a replica for the
//!   master it was turns its promotion back, and the failover aborts), and asks again after a
//!   refusal or an abort while the window holds; a failover it cannot make is printed and left
//!   out of the record;
//! - with a SIGKILL or a failover, often **a client cut off from sentinels** (1 to 3 of them,
//!   refused or blackholed) from just before the fault until every sentinel switched, within
//!   A8's budget: no client is cut off from every switched sentinel while it still reaches a
//!   writable old master. A failover's leader, the sentinel asked, is the first to switch, and
//!   is never cut; after a SIGKILL the old master takes no writes, and the client may lose
//!   every sentinel (the node is then down for it until the heal);
//! - with every SIGKILL or failover, **a client cut off from the old master** (refused or
//!   blackholed, at its relay to that data node) from just before the fault until every
//!   sentinel switched: within A8's budget by construction, since it only lowers what the
//!   client reaches. It heals then rather than at the old master's demotion: every sentinel
//!   names the new master by then, so the healed client, which reaches every sentinel again,
//!   must resolve only the new master while the old one, after a failover, still takes writes
//!   for about 9 s and is reachable again (nothing may lead the client back to it: not a
//!   sentinel that answered first before, not its subscriber). What a blackholed cut held
//!   reaches the old master at the heal: writes whose votes the client gave up on after
//!   `node_timeout`, on a master whose writes the demotion drops. The node is down for that
//!   client only until it reaches the new master through a sentinel that switched, so rule
//!   (e) does not count the cut; rule (f) excuses its keys as for any cut.
//!
//! A failover whose window the driver misses (it ran late: the group took long to be whole
//! again) is skipped, and (cov) says so if the run then has none. As in the cluster
//! configuration the group's fault is the only fault while the node's votes may be lost: the driver goes on only once every sentinel switched (plus `D` after a
//! failover), or once a lost replica restarted; the rest (the old master's demotion, the
//! resync, the group whole: every sentinel naming the master with no failover flag, the master
//! with both replicas linked) runs beside the next standalone faults, and the next fault of
//! the group waits for it. A master's kill counts as an outage of the node for every client
//! until the switch; a failover's votes may be lost until the switch plus `D`, which excuses a
//! key left there (f) but is no outage for (e) (the node answers).
//!
//! # Fresh clients
//! In every configuration the parent also starts short-lived client processes (`fresh.rs`,
//! child mode `--fresh`), at random instants (every 0.5-3 s, at most three at a time) and right
//! after each kill or failover of the group and after the sentinels' switch: clients with no
//! history, like a command-line call or a restarted service. In the cluster configuration
//! they start only where A9 covers such a client: not from a fault of the cluster node until
//! the largest TTL after the cluster is whole again (an old master back from a stop says it
//! owns its slots until its demotion, and nothing tells a client with no history that its
//! vote there will be lost; `min_replicas`, A9's other cover, would refuse every standalone
//! node, which has no replica). Each builds brand-new Redlock clients, with and without grace,
//! and uses the phase's, as every acquisition does (rule (p) checks theirs too). It takes a
//! lock once or twice on the mutex resources with the holders' read-modify-write, asks `leader`
//! once and observes the election for 0.1-0.8 s, and exits; its log lines (ids from
//! `FRESH_BASE`) go through the same rules as every client's.
//!
//! # Rules
//! Afterwards a checker reads the logs and asserts:
//! - (a) safety: no two holders' windows `[lock() returned, min(validity deadline, release
//!   started)]` overlap on one resource (fenced holders included);
//! - (b) no lost update: each resource's final counter equals the number of writes made inside
//!   the lock, and the written values are exactly 1..=n. A write that lands after its lock's
//!   validity (its process stopped between the validity check and the SET) is outside the
//!   lock's promise: a counter that lost updates through such writes is **the known limit of
//!   locks without fencing** (printed as `KNOWN LIMIT`, counted, not failed) when every late
//!   write had its process measurably stopped across it, by the driver (a client pause) or by a
//!   starved machine (the stall probes, or the writing thread's own wait for a core, counted as
//!   in (c)), and every write made in time read what the last write before it left (so the
//!   late writes explain every lost update); anything else is a violation;
//! - (c) no hang: every call returned within its bound, computed from the configuration
//!   (`node_timeout × (retries + 1) + retries × (retry_delay + retry_jitter)` for `lock`), plus a
//!   generous margin, plus the time it was measurably not running, for a noisy machine: its
//!   process's stops (a client pause, the slow-call snapshot's `gdb`), and beyond them the
//!   longer of the process's other stalls (probe threads log every late wake-up: one free to
//!   run on any core, and one pinned to each core, which alone sees a core that runs nothing
//!   for a while, a virtual CPU the host does not run, while the other core runs the free
//!   probe; and one that changes the process's memory map, which alone sees the kernel's lock
//!   on the map held while threads that allocate wait for it) and the calling thread's own
//!   wait for a core (its `schedstat`; a probe, a thread
//!   that mostly sleeps, is scheduled sooner than callers on a crowded core). A call that
//!   needed the thread's wait is named in a `NOTE (c)`; the totals give the stalls only a
//!   pinned probe or the memory-map probe saw. A client process did not finish when its
//!   threads are still in calls the longer of the lock and wait bounds and 10 s after the end,
//!   or it has not said it finished the lock bound and 25 s after it; both count from when the
//!   end was told instead when that came later (the driver tells it once its schedule has run,
//!   late on a slow machine). A fresh client still running 60 s after the last one could
//!   start is killed, and did not finish either. A failed run prints, after its violations,
//!   the kernel's own reports of threads it did not run (`MACHINE` lines from `/dev/kmsg`:
//!   workqueue lockups, RCU stalls) since the run started; they change no verdict;
//! - (d) recovery: after the last fault healed, every client process acquired again, the
//!   workers of both its Redlock clients are all connected again (`node_status`), every lock
//!   node sees exactly one connection per Redlock client (two per process, through the healed
//!   relays; three with `--min-replicas`, the `WAIT` lane of the client with `min_replicas`
//!   included; on a cluster node, one per Redlock client and master summed over the cluster's
//!   processes, no process more than one per Redlock client (an old master keeps the
//!   connection of a worker whose batches have not gone to its slots since its failover), and
//!   the relays carry every client connection to the cluster; on the Sentinel group, the
//!   master every sentinel names does and no replica, the sentinels' own links aside, and the
//!   relays carry every client connection to a data node, each client's to the master at
//!   least its two), and the data node none once the
//!   client threads ended; every fresh client exited on its own, and none of its connections
//!   is left (the counts above are taken after the last one exited): nothing wedged, nothing
//!   leaked;
//! - (e) no client acquired while a majority of the nodes was down **or cut off from that
//!   client** (a cluster node with one master cut off from it is not counted, nor a Sentinel
//!   node with its old master cut off from it);
//! - (f) no key of a cancelled or finished acquisition outlives its call: `node_timeout` after a
//!   wait that gave no lock (failed or cancelled) or a release returned, a key probe in the
//!   client process finds no key with that acquisition's token on any node, or watches the one
//!   it finds until it goes; a key left to expire is a leak, unless its node was down, hung or
//!   cut off from that client meanwhile, or back from a hang or a blackhole for less than
//!   `2 × node_timeout` (it answers its backlog first): Redlock lets such a node keep the key
//!   until its TTL; or unless the client process, the relays' process (the parent) or the
//!   node's servers (a probe in the parent pings each every 5 ms) were measurably not running
//!   for `node_timeout / 2` or more, their stalls merged (a core that ran nothing is seen by
//!   the probes pinned to it in each process, once) (answers or cleanups then came after the caller's
//!   `node_timeout`, which the library does not promise to cover; each such key is printed as a
//!   NOTE); one removed late (a starved machine) is reported, not failed;
//! - (g) cancellation: a wait returns `Cancelled` only after its cancel fired, within
//!   `CANCEL_BOUND_MS` (plus the time it did not run, as for (c), the thread's wait counted
//!   from the cancel's firing); one whose cancel fired before the call fails at once;
//! - (p) the phases held (a check of the harness): no acquisition by a client without grace ran
//!   from a quick restart's kill until the largest TTL (plus the drift allowance) had passed;
//!   in the cluster configurations, no acquisition by a client without grace ran from an old
//!   master's return until the largest TTL after its demotion (with `--min-replicas`: no such
//!   acquisition while one by a client with grace ran from the return until the demotion), and
//!   no replica was promoted sooner than the largest TTL after its master stopped; in the
//!   Sentinel configuration, no replica was promoted sooner than that after its master's
//!   SIGKILL, and no client without grace acquired from a `SENTINEL FAILOVER` until every
//!   sentinel had switched plus `D` plus the largest TTL;
//! - (cl) every fault of the cluster node ran its course: the replica was promoted, the old
//!   master came back as a replica, and the cluster was whole again (a check of the harness and
//!   of the servers, which a failover that never happens would otherwise pass silently);
//! - (sn) likewise every fault of the Sentinel group: after a SIGKILL or a failover every
//!   sentinel named a new master, which says it is one, the killed master restarted only after
//!   that, and the old master is a replica of the new one with its link up; a lost replica
//!   restarted and is in sync again; a client's cut from the old master was made before the
//!   fault and healed once every sentinel switched; and the group was whole again afterwards;
//!   and the sentinels switched master only where the plan made them: every `+switch-master`
//!   they publish (the driver subscribes to each) belongs to a planned kill or failover of that
//!   master, to the master they all named, before the group was whole again. A failover the
//!   sentinels start on their own is one of a live master at any time, which covers only
//!   clients with `restart_grace` (A8): the run fails, naming it and the sentinels' events
//!   before it, and keeps their logs;
//! - (cov) every fault class above was injected (in the cluster configurations, cuts of one
//!   master both ways, a master's clock jump, and an old master back in a quick phase, and with
//!   `--min-replicas` in a delayed one, among them; in the Sentinel configuration, a client's
//!   cut from the old master that ran its course, as (sn) says, among them), both kinds of client acquired, cancellable
//!   read-write and semaphore waits were made, elections were won and campaigns cancelled,
//!   fresh clients were started (during a failover too, where the configuration has them),
//!   acquired and read the leader: a run that skipped one tested nothing about it. Each plan
//!   has quick restarts in two phases: one is lost when the machine takes seconds to end the
//!   killed server (the driver then makes it a delayed restart and says so);
//! - the fenced rules (f1) token order and (f2) no stale write accepted, in `fenced.rs`, and
//!   the read-write and semaphore rules rw1-rw4 and sem1-sem4, in `kinds.rs`;
//! - the election rules, in `election.rs`: el1 at most one leader with validity left at any
//!   instant (no two leadership windows `[campaign returned, min(validity deadline, resign
//!   started)]` overlap); el2 terms strictly increase from leader to leader (a campaign that
//!   started after another returned a leadership gets a greater term) and no term is handed
//!   out twice; el3 no stale write accepted by the term-checking storage (as (f2)); el4 what
//!   `Redlock::leader` and observers report names a granted leadership (a candidate's
//!   identity, with the term a campaign of that identity returned, a campaign begun before the
//!   report);
//! - (pc) a second opinion, from a checker we did not write: the run's operations, recorded as
//!   a history (`history.jsonl` in the log directory), are linearizable for Porcupine, the Go
//!   linearizability checker (`tests/chaos/porcupine`), under models of what the locks promise
//!   about the resources they guard: each counter's read-modify-writes inside the lock as
//!   single operations on a register (lost updates; late writes modelled as the known limit
//!   they are), the token- and term-checking stores (no stale read or write accepted, no update
//!   lost), and fencing tokens and terms rising in real-time order; a model Porcupine cannot
//!   decide within its timeout fails the rule too (`history.rs` gives the history and the
//!   rule, the Go program's package doc the models).
//!
//! A quarter of the mutex calls are cancellable waits: reentrant requests (`wait`, with a
//! `Cancel`) whose owner, and so whose token, the client chooses per call, so that even a
//! cancelled attempt, which returns no lock, has a known token to look for. (A plain attempt
//! that gives no lock has a random token nobody learns: its keys could not be told from the
//! next holder's.) A quarter of the read-write and semaphore waits are cancellable too, with a
//! token of their own per call (the hidden `LockRequest::token_for_tests`), and are probed the
//! same way: for a reader entry (`ZSCORE chaos-rw token`), a writer's key, or a semaphore slot
//! key `redlock:sem:{chaos-sem}:<i>` holding the token. Cancels fire before the call, at a
//! random moment during it (half within the first 2 ms, when the first attempt is on its
//! way), or around a release of the same resource by another thread of the process: the
//! instant the waiter may be granted the lock, where a cancel that skipped the undo would leave
//! keys behind.
//!
//! The read-write lock, the counting semaphore, the fenced lock and a leader election run
//! alongside, on resources of their own (`chaos-rw`, `chaos-sem`, `chaos-fenced`, the election
//! `chaos-election`) under the same faults, each client process giving them threads of their
//! own; `kinds.rs`, `fenced.rs` and `election.rs` describe their clients and rules. Their
//! releases (a leader's resignation or drop) are probed for keys left behind like the mutex's
//! (f), and their calls (a campaign is a `wait`) are bounded (c) and refused while a majority
//! is down (e) like the others.
//!
//! Parts: `schedule.rs` (the phases, the seeded faults and the driver), `relay.rs` (the
//! per-client relays), `client.rs` (child mode: the client processes, their workers and
//! cancels), `fresh.rs` (the fresh clients: their spawner and child mode), `sentinel.rs` (the
//! Sentinel group: its faults and rules (sn) and its (p)), `keys.rs` (the key probe of each client process), `checker.rs` (the rules, and
//! their self-test on made-up violations), `kinds.rs` (the read-write lock and the semaphore:
//! clients, rules, self-test), `fenced.rs` (fenced locks and the storage: client, rules,
//! self-test), `election.rs` (leader elections and their term-checked storage: candidates,
//! rules, self-test), `history.rs` (the history and rule (pc); the Go program in
//! `porcupine/`); this file holds the configuration, the parent and the command line. On a
//! failure the run prints a timeline of what the driver really did, and keeps the logs.
//!
//! Short profile (about a minute per configuration, all three run; part of `cargo test --release`
//! and so of `scripts/test`; every fault class at least once):
//! ```sh
//! cargo test --release --test chaos
//! ```
//! Soak for N minutes of faults, and replay of a run's schedule from its printed seed:
//! ```sh
//! cargo test --release --test chaos -- --minutes 30
//! cargo test --release --test chaos -- --seed 1234 [--minutes 30]
//! cargo test --release --test chaos -- --cluster --minutes 30
//! cargo test --release --test chaos -- --cluster3 --minutes 30
//! ```
//! The end of a run prints its summary as markdown tables (faults by class, acquisitions by
//! kind, violations, keys left, known-limit events) for `docs/guarantees.md`.
//!
//! # Breaking it on purpose
//! Each rule must be able to fail. Before each run the checker is fed made-up violations of
//! every rule, which it must report (`checker_catches_made_up_violations` in `checker.rs`,
//! `kinds.rs`, `fenced.rs`, `election.rs` and `history.rs`, which also runs the Porcupine
//! program's self-test). And these flags break something real, to watch the rules fire on real
//! servers (each run then says it is broken on purpose, and should fail):
//! - `--eager-restarts`: quick restarts in every phase, so clients without grace meet them
//!   (rule (p) stands aside), and a mutex holder's read-modify-write may last most of its
//!   validity: (a), (b), rw1, sem1/sem2 and (f1) fire when a restarted node's forgotten lock
//!   is taken again (el1 and el2 likewise when it is the election's, which needs a leader on a
//!   bare majority: rarer), and (pc) with (b), when the second holder's read-modify-write meets
//!   the first's (seed 32368189315206, for one: Porcupine's counter model on `chaos:r1`);
//! - `--grace-ms N`: the quick phases' clients use a restart grace of N ms (0: none) instead of
//!   the largest TTL: the same rules fire, in quick phases;
//! - `--unchecked-storage`: the fenced storage and the election's check no token or term, and
//!   every client pause waits for a fenced write or a leader's write: (f2) or el3 fires when
//!   the paused holder's stale write lands after a newer holder's, and (pc) with it
//!   (Porcupine's store model; seed 71287257307440, for one, on `chaos-election`);
//! - `--no-clock-guard`: clients without the clock guard, and every clock jump (a cluster
//!   master's too) comes with a client holding its locks on a bare majority that includes the
//!   jumping node: (a) and the others fire when the jump frees such a lock early;
//! - `--fresh-grace-ms N`: the fresh clients of the quick phases use a restart grace of N ms
//!   (0: none), and in the Sentinel configuration every `SENTINEL FAILOVER` comes with a
//!   long-lived client cut off from two standalone nodes until the switch is over (its locks
//!   rest on the old master), five fresh clients start right after the switch, and each tries
//!   to lock for 1.5 s: with 0, (a) and (b) fire when a fresh client takes the promoted
//!   master's vote at once while the old master still counts for a client connected to it,
//!   issue 39's first hole;
//! - `--stall-sentinels`: two sentinels hung (SIGSTOP) through each kill or failover of the
//!   group's master, so that no failover runs its course: (sn) fires.

#[path = "../support/mod.rs"]
mod support;

mod checker;
mod client;
mod election;
mod fenced;
mod fresh;
mod history;
mod keys;
mod kinds;
mod relay;
mod schedule;
mod sentinel;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use checker::{
    Options, Verdict, check, check_coverage, checker_catches_made_up_violations, fault_table,
    lock_bound_ms, ms, read_logs, summarize,
};
use client::{child, parse_child};
use relay::Relay;
use schedule::{Lab, describe, drive, plans_short, schedule};
use support::{Cluster, RedisCluster, RedisNode, eventually};

/// Lock nodes in this run's configuration: five, or three with `--cluster3` (set by
/// [`Flags::apply`], in the parent per configuration and in each client process).
static NODE_COUNT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(5);

/// Whether the clients without grace set `min_replicas` (`--min-replicas`, cluster
/// configurations only; set by [`Flags::apply`]).
static REPLICATED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn replicated() -> bool {
    REPLICATED.load(std::sync::atomic::Ordering::Relaxed)
}

fn nodes() -> usize {
    NODE_COUNT.load(std::sync::atomic::Ordering::Relaxed)
}

/// In the cluster configurations, the lock node that is a Redis Cluster: the last one.
fn cluster_node() -> usize {
    nodes() - 1
}
const CLIENTS: usize = 3;
const THREADS: usize = 3;
const RESOURCES: usize = 3;
const TTL_MIN_MS: u64 = 250;
const TTL_MAX_MS: u64 = 500;
const NODE_TIMEOUT: Duration = Duration::from_millis(50);
const RETRY_COUNT: u32 = 3;
const RETRY_DELAY: Duration = Duration::from_millis(40);
const RETRY_JITTER: Duration = Duration::from_millis(20);
/// How long a cancellable wait waits at most.
const WAIT_MS: u64 = 300;
/// A cancelled wait returns within this long of its cancel firing (plus the time its process
/// was stalled); the goal is 50 ms, the bound generous for a noisy machine.
const CANCEL_BOUND_MS: u64 = 1_000;
/// A holder writes only with at least this much validity left, so that the SET lands well
/// inside the lock even if the thread is descheduled for a while on a busy machine.
const MIN_VALIDITY_TO_WRITE: Duration = Duration::from_millis(100);
/// Slack on top of each call's computed bound: a hang is unbounded, scheduling noise is not.
/// Stalls of the client process (measured by its stall probes) are added on top.
const CALL_MARGIN_MS: u64 = 1_000;
/// The stall probes sleep this long in a loop; a wake-up later than `STALL_MIN` is a stall.
const PROBE_SLEEP: Duration = Duration::from_millis(2);
const STALL_MIN_NS_MS: u64 = 10;
const STALL_MIN_NS: u64 = STALL_MIN_NS_MS * MS;
/// A crashed node stays down at least this long: longer than any TTL (see the module docs).
const MIN_DOWN_AFTER_KILL_MS: u64 = TTL_MAX_MS + 200;
/// Restart phases and quick-restart phases alternate this often (see the module docs).
const PHASE_MS: u64 = 10_000;
/// No quick restart within this long after a quick phase began: every call of a client without
/// grace (which the phase before used) has returned by then, stalls of a second included.
const GUARD_IN_MS: u64 = 2_000;
/// Nor within this long before it ends: a lock the restarted node forgot expires within the
/// largest TTL, and a timed restart may wait up to a second for its moment.
const GUARD_OUT_MS: u64 = TTL_MAX_MS + 2_000;
/// How long the clock guard keeps a node whose clock jumped out of acquire quorums: longer
/// than the largest TTL, so that every key the jump shortened reaches its original expiry.
const CLOCK_QUARANTINE: Duration = Duration::from_millis(TTL_MAX_MS + 1_000);
const SHORT_CHAOS_MS: u64 = 40_000;
const WARMUP_MS: u64 = 2_000;
/// Clients keep working this long after the last fault healed.
const TAIL_MS: u64 = 5_000;
const MS: u64 = 1_000_000;

/// Nanoseconds on `CLOCK_MONOTONIC`: one clock for every process on the machine (it is also
/// what `std::time::Instant`, and so `Lock::validity`, counts with on Linux).
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_MONOTONIC)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// What a process's stall probes saw.
pub struct Stalls {
    /// Every probe's stalls, merged: what the checker adds to bounds.
    pub all: Vec<(u64, u64)>,
    /// The stalls of `all` that came from the pinned probes only (the free probe saw less than
    /// half of each), merged across cores, as (first core, from, to): for the totals and the
    /// notes.
    pub one_core: Vec<(usize, u64, u64)>,
    /// The stalls of `all` that came from the memory-map probe (the free probe saw less than
    /// half of each): the process could not change its memory map.
    pub map: Vec<(u64, u64)>,
}

/// The stall probes: one thread that may run on any core, and one pinned to each core this
/// process may use (up to `MAX_PINNED_PROBES` cores), each sleeping `PROBE_SLEEP` in a loop
/// until `stop` is set and giving every late wake-up, as (expected, woke). When the machine
/// does not run a process for a while, its calls (or, for the parent, the relays' traffic)
/// take longer by as much: the checker adds these stalls to each call's bound and to what
/// excuses a key left late.
///
/// The free probe alone misses a core that runs nothing for a while (a virtual CPU that the
/// host does not run: its steal time grows): the free probe runs on the other core, while a
/// thread of the process whose wake-up is due on the stopped core (a timer, an answer) waits
/// without being runnable, so its own `schedstat` shows no wait for a core either. The probe
/// pinned to that core wakes late without having waited for the core itself: such a stall
/// counts. A pinned probe that was late because it waited its turn on a crowded core (its
/// `schedstat` wait covers half the lateness or more) does not count: a thread of the process
/// queued there waits as runnable, which its own `schedstat` shows, and the others run on.
///
/// Nor does a sleeping probe see the kernel's lock on the process's memory map held for
/// seconds: a thread that changes the map (`mprotect` from the allocator growing a heap, a
/// thread starting or ending) waits in the kernel, in state `D`, behind the holder, which
/// itself waits for a lock that someone the crowded machine does not run holds; every thread
/// that changes the map meanwhile queues behind them (the slow-call snapshot caught callers so
/// in `do_mprotect_pkey`, and a node worker holding the map in `vma_prepare`). Another probe,
/// with `with_map` (the client processes), changes the map after each sleep ([`run_map`]).
fn stall_probe(stop: &std::sync::atomic::AtomicU64, with_map: bool) -> Stalls {
    /// The loop; pinned, a late wake-up counts only when the probe itself did not wait for its
    /// core for half of it.
    fn run(stop: &std::sync::atomic::AtomicU64, pinned: bool) -> Vec<(u64, u64)> {
        let schedstat = std::fs::File::open("/proc/thread-self/schedstat").ok();
        let waited = || schedstat_from(schedstat.as_ref()).1;
        let mut stalls = Vec::new();
        let mut last = now_ns();
        let mut waited_before = if pinned { waited() } else { 0 };
        while stop.load(std::sync::atomic::Ordering::Relaxed) == 0 {
            std::thread::sleep(PROBE_SLEEP);
            let now = now_ns();
            let expected = last + PROBE_SLEEP.as_nanos() as u64;
            let waited_now = if pinned { waited() } else { 0 };
            let late = now.saturating_sub(expected);
            if late > STALL_MIN_NS
                && (!pinned || waited_now.saturating_sub(waited_before) * 2 < late)
            {
                stalls.push((expected, now));
            }
            last = now;
            waited_before = waited_now;
        }
        stalls
    }
    let cores = allowed_cores();
    let cores = if cores.len() <= MAX_PINNED_PROBES {
        cores
    } else {
        Vec::new()
    };
    std::thread::scope(|scope| {
        let pinned: Vec<_> = cores
            .iter()
            .map(|&core| {
                std::thread::Builder::new()
                    .name(format!("stall-probe-{core}"))
                    .spawn_scoped(scope, move || {
                        if pin_to(core) {
                            (core, run(stop, true))
                        } else {
                            eprintln!("chaos: the stall probe of core {core} could not pin itself to it: that core goes unwatched");
                            (core, Vec::new())
                        }
                    })
                    .expect("spawn a stall probe")
            })
            .collect();
        let map = with_map.then(|| {
            std::thread::Builder::new()
                .name("stall-probe-mm".to_owned())
                .spawn_scoped(scope, || run_map(stop))
                .expect("spawn a stall probe")
        });
        let free = run(stop, false);
        let pinned: Vec<(usize, Vec<(u64, u64)>)> = pinned
            .into_iter()
            .map(|h| h.join().expect("stall probe panicked"))
            .collect();
        let map = map.map_or_else(Vec::new, |h| h.join().expect("stall probe panicked"));
        combine(&free, &pinned, &map)
    })
}

/// A thread's `schedstat`: ns run, ns waited for a core, and times it was scheduled in; zeros
/// where the kernel does not say.
fn parse_schedstat(text: &str) -> (u64, u64, u64) {
    let mut f = text
        .split_whitespace()
        .map(|v| v.parse::<u64>().unwrap_or(0));
    (
        f.next().unwrap_or(0),
        f.next().unwrap_or(0),
        f.next().unwrap_or(0),
    )
}

/// The `schedstat` at `path` (see [`parse_schedstat`]).
pub fn schedstat_of(path: &std::path::Path) -> (u64, u64, u64) {
    parse_schedstat(&std::fs::read_to_string(path).unwrap_or_default())
}

/// The `schedstat` read again through `file`, kept open by a thread that reads its own often
/// (`/proc/thread-self/schedstat`, opened by that thread); zeros without it.
fn schedstat_from(file: Option<&std::fs::File>) -> (u64, u64, u64) {
    use std::os::unix::fs::FileExt;
    let mut buf = [0u8; 96];
    let n = file.and_then(|f| f.read_at(&mut buf, 0).ok()).unwrap_or(0);
    parse_schedstat(std::str::from_utf8(&buf[..n]).unwrap_or_default())
}

/// The memory-map probe (see [`stall_probe`]): the middle page of a region of its own changes
/// its protection twice after each sleep (each change takes the lock on the process's memory
/// map for writing, and nothing else that anyone else holds); gives each pair of changes that
/// took over `STALL_MIN`, as (start, end), when the probe did not wait for its core for half of
/// it and the process did not run for half of it either (its CPU time): a process that runs
/// while its map is locked (a thread of its own changing the map at length) is not excused.
fn run_map(stop: &std::sync::atomic::AtomicU64) -> Vec<(u64, u64)> {
    let Ok(schedstat) = std::fs::File::open("/proc/thread-self/schedstat") else {
        eprintln!("chaos: the memory-map probe cannot read its schedstat: it records nothing");
        return Vec::new();
    };
    // SAFETY: `sysconf` has no preconditions.
    let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    // A shared anonymous mapping has a file of its own: it never merges with another mapping,
    // so changing it takes no lock of any other mapping (a private one next to the heap would
    // merge with it, and take the heap's locks).
    // SAFETY: no `MAP_FIXED`, so no existing mapping is touched; the region is this probe's.
    let region = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            3 * page,
            libc::PROT_NONE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if region == libc::MAP_FAILED {
        eprintln!("chaos: the memory-map probe cannot map its region: it records nothing");
        return Vec::new();
    }
    let middle = region
        .cast::<u8>()
        .wrapping_add(page)
        .cast::<libc::c_void>();
    let process_cpu = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec to write.
        unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
        ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
    };
    let mut stalls = Vec::new();
    while stop.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        std::thread::sleep(PROBE_SLEEP);
        let waited_before = schedstat_from(Some(&schedstat)).1;
        let cpu_before = process_cpu();
        let start = now_ns();
        // SAFETY: the middle page of the region mapped above, which nothing else uses; the
        // page is never accessed.
        unsafe {
            libc::mprotect(middle, page, libc::PROT_READ);
            libc::mprotect(middle, page, libc::PROT_NONE);
        }
        let end = now_ns();
        let took = end - start;
        let waited = schedstat_from(Some(&schedstat))
            .1
            .saturating_sub(waited_before);
        let ran = process_cpu().saturating_sub(cpu_before);
        if took > STALL_MIN_NS && waited * 2 < took && ran * 2 < took {
            stalls.push((start, end));
        }
    }
    // SAFETY: the region mapped above, no longer used.
    unsafe { libc::munmap(region, 3 * page) };
    stalls
}

/// Past this many cores the stall probes are not pinned (a probe per core costs a wake-up
/// every `PROBE_SLEEP` each).
const MAX_PINNED_PROBES: usize = 8;

/// Merges the free probe's stalls, the pinned probes' (by core) and the memory-map probe's
/// into [`Stalls`].
fn combine(free: &[(u64, u64)], pinned: &[(usize, Vec<(u64, u64)>)], map: &[(u64, u64)]) -> Stalls {
    use crate::checker::{merged, overlap};
    // Seen by the free probe for less than half its length.
    let its_own = |&(from, to): &(u64, u64)| overlap(free, from, to) * 2 < to - from;
    let mut one_core: Vec<(usize, u64, u64)> = pinned
        .iter()
        .flat_map(|(core, stalls)| {
            stalls
                .iter()
                .filter(|s| its_own(s))
                .map(move |&(f, t)| (*core, f, t))
        })
        .collect();
    one_core.sort_unstable_by_key(|&(core, from, to)| (from, to, core));
    let mut by_first_core: Vec<(usize, u64, u64)> = Vec::new();
    for (core, from, to) in one_core {
        match by_first_core.last_mut() {
            Some(last) if from <= last.2 => last.2 = last.2.max(to),
            _ => by_first_core.push((core, from, to)),
        }
    }
    Stalls {
        all: merged(
            free.iter()
                .chain(map)
                .chain(pinned.iter().flat_map(|(_, s)| s))
                .copied()
                .collect(),
        ),
        one_core: by_first_core,
        map: map.iter().copied().filter(its_own).collect(),
    }
}

/// The cores this thread may run on (`sched_getaffinity`, inherited by the probes), below
/// `CPU_SETSIZE`; none if that fails.
fn allowed_cores() -> Vec<usize> {
    // SAFETY: a zeroed `cpu_set_t` is a valid empty set, the call writes at most its size, and
    // `CPU_ISSET` is asked only about cores below `CPU_SETSIZE`.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&core| libc::CPU_ISSET(core, &set))
            .collect()
    }
}

/// Pins the calling thread to `core` (below `CPU_SETSIZE`, from [`allowed_cores`]); whether
/// that worked.
fn pin_to(core: usize) -> bool {
    // SAFETY: as in `allowed_cores`; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// The stall probes' merging, on made-up stalls.
fn stall_probes_combine_as_documented() {
    let free = [(100, 200)];
    let pinned = vec![
        // Core 0: within the free probe's stall, and a stall of its own.
        (0, vec![(120, 180), (1_000, 1_900)]),
        // Core 1: the same stall of its own (both cores), and one the free probe saw a
        // quarter of.
        (1, vec![(1_100, 1_950), (150, 350)]),
    ];
    // The memory map: one stall of its own, one within the free probe's.
    let map = [(2_000, 2_500), (110, 190)];
    let s = combine(&free, &pinned, &map);
    assert_eq!(
        s.all,
        vec![(100, 350), (1_000, 1_950), (2_000, 2_500)],
        "merged stalls"
    );
    assert_eq!(s.map, vec![(2_000, 2_500)], "the memory map's own stalls");
    assert_eq!(
        s.one_core,
        vec![(1, 150, 350), (0, 1_000, 1_950)],
        "stalls the free probe saw less than half of, once each"
    );
}

/// The responsiveness probe of one lock server (a standalone node, or one process of a cluster
/// node), on a connection of its own: a `PING` every `NODE_PROBE_EVERY` until `stop` is set,
/// giving every one answered later than `STALL_MIN_NS`, as (sent, answered). A server the
/// machine does not get to run answers every client that late: the checker counts these with
/// the stalls of the client processes (rule (f)). A `PING` that fails after its 1 s read
/// timeout counts until then, so that a server starved for longer shows too (for a node down
/// or stopped by the driver, that adds nothing to the outage the checker knows already).
fn node_probe(port: u16, stop: &std::sync::atomic::AtomicU64) -> Vec<(u64, u64)> {
    let mut stalls = Vec::new();
    let mut conn: Option<redis::Connection> = None;
    while stop.load(std::sync::atomic::Ordering::Relaxed) == 0 {
        std::thread::sleep(NODE_PROBE_EVERY);
        if conn.is_none() {
            conn = redis::Client::open(format!("redis://127.0.0.1:{port}"))
                .and_then(|c| c.get_connection_with_timeout(Duration::from_millis(200)))
                .and_then(|c| {
                    c.set_read_timeout(Some(Duration::from_secs(1)))?;
                    Ok(c)
                })
                .ok();
        }
        let Some(c) = conn.as_mut() else { continue };
        let sent = now_ns();
        if redis::cmd("PING").query::<()>(c).is_err() {
            conn = None;
        }
        let answered = now_ns();
        if answered > sent + STALL_MIN_NS {
            stalls.push((sent, answered));
        }
    }
    stalls
}

/// How often the responsiveness probe pings each lock server.
const NODE_PROBE_EVERY: Duration = Duration::from_millis(5);

fn sleep_until(t_ns: u64) {
    let now = now_ns();
    if t_ns > now {
        std::thread::sleep(Duration::from_nanos(t_ns - now));
    }
}

/// SplitMix64: a seeded generator whose sequence depends on nothing but the seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    fn chance(&mut self, p: f64) -> bool {
        ((self.next() >> 11) as f64 / (1u64 << 53) as f64) < p
    }
}

/// The ways to break the run on purpose, to watch the rules fire (see the module docs), and
/// what the clients are built with; passed to the client processes.
#[derive(Debug, Clone, Copy)]
pub struct Flags {
    /// `--eager-restarts`: quick restarts in every phase, also for clients without grace.
    pub eager: bool,
    /// `--grace-ms N`: the restart grace of the quick phases' clients (default: the largest TTL).
    pub grace_ms: u64,
    /// `--unchecked-storage`: the fenced storage (and the election's) checks no token (term).
    pub unchecked_storage: bool,
    /// `--no-clock-guard`: clients without the clock guard.
    pub no_clock_guard: bool,
    /// The configuration, not a way to break it: the last lock node is a Redis Cluster
    /// with replicas, and the schedule fails its masters over (see the module docs).
    pub cluster: bool,
    /// With `cluster`: three lock nodes instead of five (`--cluster3`), the last a cluster.
    pub three: bool,
    /// With `cluster`: the clients without grace set `min_replicas(1)` (`--min-replicas`).
    pub min_replicas: bool,
    /// Likewise: the last lock node (of five) is a Sentinel group (`sentinel.rs`).
    pub sentinel: bool,
    /// `--fresh-grace-ms N`: the fresh clients of the quick phases use a restart grace of N ms
    /// (0: none), and every `SENTINEL FAILOVER` comes with a client cut off from two standalone
    /// nodes, its locks resting on the old master.
    pub fresh_grace_ms: Option<u64>,
    /// `--stall-sentinels`: two sentinels hung through each fault of the group's master, so
    /// that no failover runs its course.
    pub stall_sentinels: bool,
}

impl Flags {
    fn arg(&self) -> String {
        format!(
            "{},{},{},{},{},{},{},{},{},{}",
            u8::from(self.eager),
            self.grace_ms,
            u8::from(self.unchecked_storage),
            u8::from(self.no_clock_guard),
            u8::from(self.cluster),
            u8::from(self.three),
            u8::from(self.min_replicas),
            u8::from(self.sentinel),
            self.fresh_grace_ms
                .map_or("-".to_owned(), |g| g.to_string()),
            u8::from(self.stall_sentinels)
        )
    }

    pub fn parse(arg: &str) -> Flags {
        let f: Vec<&str> = arg.split(',').collect();
        Flags {
            eager: f[0] == "1",
            grace_ms: f[1].parse().expect("grace"),
            unchecked_storage: f[2] == "1",
            no_clock_guard: f[3] == "1",
            cluster: f[4] == "1",
            three: f[5] == "1",
            min_replicas: f[6] == "1",
            sentinel: f[7] == "1",
            fresh_grace_ms: f[8].parse().ok(),
            stall_sentinels: f[9] == "1",
        }
    }

    /// Sets the number of lock nodes ([`nodes`]) for this configuration.
    pub fn apply(&self) {
        NODE_COUNT.store(
            if self.three { 3 } else { 5 },
            std::sync::atomic::Ordering::Relaxed,
        );
        REPLICATED.store(
            self.cluster && self.min_replicas,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The restart grace of the quick phases' clients unless broken on purpose: the largest
    /// TTL, plus the watch's `D` where a Sentinel group's live master fails over (A8).
    fn default_grace_ms(&self) -> u64 {
        if self.sentinel {
            TTL_MAX_MS + sentinel::SENTINEL_D_MS
        } else {
            TTL_MAX_MS
        }
    }

    /// The configuration's name, as on the command line.
    fn name(&self) -> &'static str {
        match (self.cluster, self.three, self.sentinel) {
            (true, false, _) => "cluster",
            (true, true, _) => "cluster3",
            (false, _, true) => "sentinel",
            (false, _, false) => "standalone",
        }
    }

    /// What a replay needs on its command line besides the seed and the length.
    fn command_line(&self) -> String {
        let replicated = if self.cluster && self.min_replicas {
            " --min-replicas"
        } else {
            ""
        };
        self.breaks() + " --" + self.name() + replicated
    }

    /// The flags that break the run on purpose, as on the command line.
    fn breaks(&self) -> String {
        let mut s = String::new();
        if self.eager {
            s += " --eager-restarts";
        }
        if self.grace_ms != self.default_grace_ms() {
            s += &format!(" --grace-ms {}", self.grace_ms);
        }
        if let Some(g) = self.fresh_grace_ms {
            s += &format!(" --fresh-grace-ms {g}");
        }
        if self.stall_sentinels {
            s += " --stall-sentinels";
        }
        if self.unchecked_storage {
            s += " --unchecked-storage";
        }
        if self.no_clock_guard {
            s += " --no-clock-guard";
        }
        s
    }

    fn broken(&self) -> bool {
        !self.breaks().is_empty()
    }
}

/// Builds the clock shim (`tests/support/clockshift.c`) into `dir` with the system's C compiler.
fn build_shim(dir: &Path) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/clockshift.c");
    let out = dir.join("clockshift.so");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_owned());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-o"])
        .arg(&out)
        .arg(&source)
        .status()
        .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
    assert!(status.success(), "building {} failed", source.display());
    out
}

fn resource(i: usize) -> String {
    format!("chaos:r{i}")
}

fn counter_key(resource: &str) -> String {
    format!("{resource}:count")
}

// ---------------------------------------------------------------------------------------------
// The parent

/// A lock node's client connections: (command connections, subscriber connections). A
/// subscriber is in pub/sub mode or last (un)subscribed: one with no subscription left is
/// "normal" to Redis again.
fn connections(node: &RedisNode) -> (usize, usize) {
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut node.conn())
        .expect("CLIENT LIST");
    let mut counts = (0, 0);
    for line in list.lines().filter(|l| !l.trim().is_empty()) {
        let field = |name: &str| {
            line.split_whitespace()
                .find_map(|f| f.strip_prefix(name))
                .unwrap_or("")
        };
        // A cluster node's replication links (its replica's, S; its master's, M) are not ours,
        // nor a Sentinel group's sentinels' links (named `sentinel-<id>-cmd` and `-pubsub`).
        if field("flags=").contains(['S', 'M']) || field("name=").starts_with("sentinel-") {
            continue;
        }
        let subscriber = field("flags=").contains('P')
            || matches!(field("cmd="), "subscribe" | "unsubscribe" | "psubscribe");
        if subscriber {
            counts.1 += 1;
        } else {
            counts.0 += 1;
        }
    }
    counts
}

/// Kills the client processes, even when the test fails.
struct Children(Vec<(Child, Option<ChildStdin>)>);

impl Drop for Children {
    fn drop(&mut self) {
        for (child, stdin) in &mut self.0 {
            drop(stdin.take());
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Copies the sentinels' and the group's servers' logs and writes the sentinels' events (times
/// from the run's start) into the log directory, kept if the run fails.
fn keep_sentinel_logs(
    group: &sentinel::Group,
    events: &[sentinel::SentinelEvent],
    origin: u64,
    dir: &Path,
) {
    for s in &group.sentinels {
        let _ = std::fs::copy(s.log_path(), dir.join(format!("sentinel-{}.log", s.port)));
    }
    for n in &group.nodes {
        let _ = std::fs::copy(n.log_path(), dir.join(format!("server-{}.log", n.port)));
    }
    let lines: String = events
        .iter()
        .map(|e| {
            format!(
                "{} {} {} {}\n",
                ms(e.at, origin),
                e.sentinel,
                e.channel,
                e.payload
            )
        })
        .collect();
    let _ = std::fs::write(dir.join("sentinel-events.log"), lines);
}

/// Removes the log directory, unless the run failed (`keep`).
struct TempDir(PathBuf, bool);

impl Drop for TempDir {
    fn drop(&mut self) {
        if self.1 {
            println!("client logs kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

fn run(seed: u64, chaos_ms: u64, flags: Flags) -> bool {
    let run_start = now_ns();
    flags.apply();
    checker_catches_made_up_violations();
    stall_probes_combine_as_documented();
    kernel_records_parse_as_documented();
    kinds::checker_catches_made_up_violations();
    fenced::checker_catches_made_up_violations();
    election::checker_catches_made_up_violations();
    history::checker_catches_made_up_violations();
    sentinel::checker_catches_made_up_violations();
    // Every plan injects every fault class rule (cov) wants: 2,000 seeds' plans checked.
    for (what, lacking) in plans_short(2_000, SHORT_CHAOS_MS, &flags).0 {
        assert!(
            lacking.is_empty(),
            "plans without {what}: seeds {lacking:?}"
        );
    }
    let faults = schedule(seed, chaos_ms, &flags);
    println!(
        "chaos: seed {seed} ({} s of faults; replay with: cargo test --release --test chaos -- --seed {seed}{}{})",
        chaos_ms / 1000,
        if chaos_ms == SHORT_CHAOS_MS {
            String::new()
        } else {
            format!(" --minutes {}", chaos_ms / 60_000)
        },
        flags.command_line()
    );
    if flags.broken() {
        println!(
            "BROKEN ON PURPOSE ({}): the checker should find violations",
            flags.breaks().trim()
        );
    }
    if flags.cluster {
        println!(
            "{} configuration: n0-n{} standalone, n{} a Redis Cluster of 3 masters with a replica each",
            flags.name(),
            cluster_node() - 1,
            cluster_node()
        );
    }
    if flags.sentinel {
        println!(
            "sentinel configuration: n0-n{} standalone, n{} a Sentinel group of a master, 2 replicas and 3 sentinels (quorum 2, down-after {} ms, failover-timeout 3000 ms)",
            cluster_node() - 1,
            cluster_node(),
            crate::support::SENTINEL_DOWN_AFTER_MS
        );
    }
    println!(
        "{} lock nodes, {CLIENTS} client processes × {THREADS} threads, {RESOURCES} resources, TTL {TTL_MIN_MS}-{TTL_MAX_MS} ms, node_timeout {} ms, retries {RETRY_COUNT} × ({} ± {}) ms, restart grace {} ms in quick phases, clock quarantine {} ms",
        nodes(),
        NODE_TIMEOUT.as_millis(),
        RETRY_DELAY.as_millis(),
        RETRY_JITTER.as_millis(),
        flags.grace_ms,
        CLOCK_QUARANTINE.as_millis()
    );
    let phases: Vec<String> = (0..chaos_ms.div_ceil(PHASE_MS))
        .map(|k| {
            let quick = schedule::quick_phase(seed, (k * PHASE_MS) as i64);
            format!(
                "{}s {}",
                k * PHASE_MS / 1000,
                if quick { "quick" } else { "delayed" }
            )
        })
        .collect();
    println!("phases: {}", phases.join(", "));
    println!("schedule ({} faults):", faults.len());
    for f in &faults {
        println!("  {}", describe(f));
    }

    let mut dir = TempDir(
        std::env::temp_dir().join(format!(
            "redlock-chaos-{}-{}",
            std::process::id(),
            flags.name()
        )),
        false,
    );
    std::fs::create_dir_all(&dir.0).expect("log dir");
    // Every lock node runs under the clock shim, its offset in a file of its own.
    let shim = build_shim(&dir.0);
    // In the cluster configurations the last lock node is a Redis Cluster: each of its
    // processes runs under the shim too, with an offset file of its own. In the Sentinel
    // configuration it is a group whose sentinels and data nodes each client reaches through
    // relays of its own, which the driver cuts while the group switches.
    let standalone = if flags.cluster || flags.sentinel {
        cluster_node()
    } else {
        nodes()
    };
    let clock_files: Vec<PathBuf> = (0..standalone)
        .map(|n| dir.0.join(format!("clock-n{n}")))
        .collect();
    let cluster_clock_files: Vec<PathBuf> = (0..if flags.cluster { 6 } else { 0 })
        .map(|i| dir.0.join(format!("clock-n{}-{i}", cluster_node())))
        .collect();
    for file in &cluster_clock_files {
        std::fs::write(file, "0").expect("clock file");
    }
    // With `--min-replicas` the clients without grace set `min_replicas(1)`, so each
    // standalone node has a replica too (not faulted; a master restarted empty resyncs it at
    // once), else those clients would find no quorum.
    let master_args: &[&str] = if replicated() {
        &crate::support::DATA_ARGS
    } else {
        &[]
    };
    let nodes: Vec<RedisNode> = clock_files
        .iter()
        .map(|file| {
            std::fs::write(file, "0").expect("clock file");
            RedisNode::start_with_env(
                master_args,
                &[
                    ("LD_PRELOAD", shim.to_str().expect("utf-8 path")),
                    ("CLOCKSHIFT_FILE", file.to_str().expect("utf-8 path")),
                ],
            )
        })
        .collect();
    let _replicas: Vec<RedisNode> = nodes
        .iter()
        .filter(|_| replicated())
        .map(|n| RedisNode::start_with(&["--replicaof", "127.0.0.1", &n.port.to_string()]))
        .collect();
    let mut cluster = Cluster { nodes };
    // A master that lost its replica (killed, or demoted and resynced) starts the full
    // resync at once, rather than after the default 5 s wait for more replicas: the cluster
    // is whole again, with a replica behind each master, before the next fault.
    let mut redis_cluster = flags.cluster.then(|| {
        RedisCluster::start_with_env(3, 1, &crate::support::DATA_ARGS, |i| {
            vec![
                ("LD_PRELOAD".to_owned(), shim.display().to_string()),
                (
                    "CLOCKSHIFT_FILE".to_owned(),
                    cluster_clock_files[i].display().to_string(),
                ),
            ]
        })
    });
    let mut group = flags.sentinel.then(sentinel::Group::start);
    let sentinel_watch = group.as_ref().map(sentinel::Watch::start);
    let sentinel_relays: Vec<Vec<Relay>> = (0..CLIENTS)
        .map(|_| {
            group.as_ref().map_or(Vec::new(), |g| {
                g.sentinels.iter().map(|s| Relay::start(s.port)).collect()
            })
        })
        .collect();
    // The sentinels name the group's data nodes by their own addresses: each client process
    // gets a relay per data node and maps that node's address to it (the hidden
    // `Builder::address_map_for_tests`, through which every connection to a master the
    // sentinels name goes). A data node keeps its port whatever its role, so the relay to the
    // old master is known at each fault: the driver cuts one client off from it there.
    let group_relays: Vec<Vec<Relay>> = (0..CLIENTS)
        .map(|_| {
            group.as_ref().map_or(Vec::new(), |g| {
                g.nodes.iter().map(|n| Relay::start(n.port)).collect()
            })
        })
        .collect();
    let data = RedisNode::start();
    let relays: Vec<Vec<Relay>> = (0..CLIENTS)
        .map(|_| cluster.nodes.iter().map(|n| Relay::start(n.port)).collect())
        .collect();
    // The cluster's masters announce their own addresses, so a relay in front of a seed would
    // not stand between a client and the cluster: each client process gets a relay per cluster
    // process instead, and maps that process's address to it (the hidden
    // `Builder::address_map_for_tests`), for seeds, `CLUSTER SLOTS`, `MOVED` and `ASK`
    // alike. The driver cuts one client off from one master through it.
    let cluster_relays: Vec<Vec<Relay>> = (0..CLIENTS)
        .map(|_| {
            redis_cluster
                .iter()
                .flat_map(|rc| &rc.nodes)
                .map(|n| Relay::start(n.port))
                .collect()
        })
        .collect();
    let logs: Vec<PathBuf> = (0..CLIENTS)
        .map(|i| dir.0.join(format!("client-{i}.log")))
        .collect();

    let origin = now_ns();
    let chaos_start = origin + WARMUP_MS * MS;
    let planned_end = faults
        .last()
        .map_or(0, |f| f.at_ms + f.steps.iter().map(|(d, _)| d).sum::<u64>());
    // Timed restarts and pauses waiting for a write run late: the tail is counted from the
    // planned end, generously.
    let end_ns = chaos_start + (planned_end + TAIL_MS + 3_000) * MS;

    let exe = std::env::current_exe().expect("current_exe");
    let (lines_tx, lines) = crossbeam_channel::unbounded::<(usize, String)>();
    let (writes_tx, writes) = crossbeam_channel::unbounded::<(usize, String, u64)>();
    let mut children = Children(Vec::new());
    for (i, log) in logs.iter().enumerate() {
        let mut urls: Vec<String> = relays[i].iter().map(Relay::url).collect();
        let mut direct = cluster.urls();
        if let Some(rc) = &redis_cluster {
            urls.push(rc.url());
            direct.push(rc.url());
        }
        // `port=relay port;…`: the addresses of the cluster's processes, or of the Sentinel
        // group's data nodes, that this client reaches through its relays.
        let map: Vec<String> = redis_cluster
            .iter()
            .flat_map(|rc| &rc.nodes)
            .zip(&cluster_relays[i])
            .chain(group.iter().flat_map(|g| &g.nodes).zip(&group_relays[i]))
            .map(|(n, r)| format!("{}={}", n.port, r.port))
            .collect();
        if let Some(g) = &group {
            let addrs: Vec<String> = sentinel_relays[i]
                .iter()
                .map(|r| format!("127.0.0.1:{}", r.port))
                .collect();
            urls.push(sentinel::Group::url(&addrs));
            direct.push(sentinel::Group::url(&g.sentinel_addrs()));
        }
        let mut child = Command::new(&exe)
            .arg("--child")
            .arg(i.to_string())
            .arg(urls.join(","))
            .arg(direct.join(","))
            .arg(data.url())
            .arg(chaos_start.to_string())
            .arg(end_ns.to_string())
            .arg(seed.to_string())
            .arg(log)
            .arg(flags.arg())
            .arg(if map.is_empty() {
                "-".to_owned()
            } else {
                map.join(";")
            })
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start a client process");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, wtx) = (lines_tx.clone(), writes_tx.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                // "W client kind when": a holder about to write, for the driver's pauses.
                let f: Vec<&str> = line.split_whitespace().collect();
                if f.first() == Some(&"W") && f.len() == 4 {
                    let when = f[3].parse().unwrap_or(0);
                    let _ = wtx.send((i, f[2].to_owned(), when));
                } else {
                    let _ = tx.send((i, line));
                }
            }
        });
        let stdin = child.stdin.take();
        children.0.push((child, stdin));
    }
    drop(lines_tx);
    drop(writes_tx);

    // The relays run in this process: when it does not get to run, every client's traffic
    // waits, as on a slow network.
    let probe_end = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let probe = {
        let probe_end = std::sync::Arc::clone(&probe_end);
        // The relays copy through buffers of their own and do not change the memory map: no
        // memory-map probe, whose stalls would count for every client.
        std::thread::spawn(move || stall_probe(&probe_end, false))
    };
    // Each lock server's responsiveness, by lock node; stopped before rule (d) counts the
    // servers' connections.
    let node_probe_end = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let node_probes: Vec<_> = cluster
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (i, n.port))
        .chain(
            redis_cluster
                .iter()
                .flat_map(|rc| &rc.nodes)
                .map(|n| (cluster_node(), n.port)),
        )
        .map(|(i, port)| {
            let stop = std::sync::Arc::clone(&node_probe_end);
            (i, std::thread::spawn(move || node_probe(port, &stop)))
        })
        .collect();
    // The Sentinel group's servers likewise, kept apart: rule (sn) reads them.
    let group_probes: Vec<_> = group
        .iter()
        .flat_map(|g| &g.nodes)
        .map(|n| {
            let stop = std::sync::Arc::clone(&node_probe_end);
            let port = n.port;
            (port, std::thread::spawn(move || node_probe(port, &stop)))
        })
        .collect();
    // Fresh clients, from the start of the chaos phase until the planned end of the faults.
    let (fresh_tx, fresh_rx) = crossbeam_channel::unbounded();
    let fresh_hold = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let spawner = {
        let mut urls = cluster.urls();
        if let Some(rc) = &redis_cluster {
            urls.push(rc.url());
        }
        if let Some(g) = &group {
            urls.push(sentinel::Group::url(&g.sentinel_addrs()));
        }
        fresh::spawner(
            fresh::Spawn {
                exe: exe.clone(),
                urls,
                data: data.url(),
                chaos_start_ns: chaos_start,
                until_ns: chaos_start + planned_end * MS,
                seed,
                dir: dir.0.clone(),
                flags,
            },
            fresh_rx,
            std::sync::Arc::clone(&fresh_hold),
        )
    };
    let lab = Lab {
        clock_files,
        cluster_clock_files,
        relays,
        cluster_relays,
        pids: children.0.iter().map(|(c, _)| c.id() as i32).collect(),
        writes,
        seed,
        eager: flags.eager,
        sentinel_relays,
        group_relays,
        fresh: fresh_tx,
        fresh_hold,
        stall_sentinels: flags.stall_sentinels,
    };
    let mut record = drive(
        &mut cluster,
        redis_cluster.as_mut(),
        group.as_mut(),
        &lab,
        &faults,
        chaos_start,
    );
    let last_heal = checker::last_heal(&record);
    println!("last fault healed at {}", ms(last_heal, origin));
    // The clients run until told: the planned end, or, when the schedule ran late (failovers
    // and restarts wait on the servers, which a loaded machine slows), the same tail after the
    // last heal, so that rule (d) sees them recover. They are told at once, before the fresh
    // clients are waited for; an end that has passed by then stops them at their next call, and
    // the time they have to finish counts from now.
    let end_ns = end_ns.max(last_heal + (TAIL_MS + 3_000) * MS);
    let told_ns = now_ns();
    for (_, stdin) in &mut children.0 {
        if let Some(stdin) = stdin {
            let _ = writeln!(stdin, "END {end_ns}").and_then(|()| stdin.flush());
        }
    }
    let fresh_runs = spawner.join().expect("the fresh clients' spawner panicked");

    let mut verdict = Verdict {
        violations: Vec::new(),
    };
    let mut ready = [false; CLIENTS];
    let ready_deadline = end_ns.max(told_ns) + (lock_bound_ms() + 25_000) * MS;
    while !ready.iter().all(|&r| r) {
        let left = ready_deadline.saturating_sub(now_ns());
        match lines.recv_timeout(Duration::from_nanos(left)) {
            Ok((i, line)) if line.trim() == "READY" => ready[i] = true,
            Ok((i, line)) => println!("client {i}: {line}"),
            Err(_) => break,
        }
    }
    for (i, r) in ready.iter().enumerate() {
        if !r {
            verdict.fail(format!(
                "(c) client {i} did not finish: a call hung or the process died"
            ));
        }
    }
    node_probe_end.store(1, std::sync::atomic::Ordering::Relaxed);
    let node_stalls: Vec<(usize, Vec<(u64, u64)>)> = node_probes
        .into_iter()
        .map(|(node, probe)| (node, probe.join().expect("node probe panicked")))
        .collect();
    let group_stalls: Vec<(u16, u64, u64)> = group_probes
        .into_iter()
        .flat_map(|(port, probe)| {
            let stalls = probe.join().expect("node probe panicked");
            stalls.into_iter().map(move |(from, to)| (port, from, to))
        })
        .collect();

    if !verdict.violations.is_empty() {
        print_timeline(&record, origin);
        for v in &verdict.violations {
            println!("VIOLATION {v}");
        }
        print_kernel_stalls(run_start);
        // The logs of a client that did not finish are what can tell why.
        dir.1 = true;
        return false;
    }

    // (d) Connections: on each lock node one worker connection per Redlock client (two per
    // client process: with and without grace), plus the one counting, and at most one
    // subscriber connection per Redlock client (its waiters share it; it stays, idle, for the
    // next waiter). Closed sockets (the key probes', and the relays' once both ends closed)
    // leave the list once the server has seen them close.
    // With `--min-replicas`, plus the `WAIT` lane of the client with `min_replicas`.
    let per_process = if replicated() { 3 } else { 2 };
    for (i, node) in cluster.nodes.iter().enumerate() {
        let mut seen = (0, 0);
        if !eventually(Duration::from_secs(5), || {
            seen = connections(node);
            seen.0 == CLIENTS * per_process + 1 && seen.1 <= CLIENTS * per_process
        }) {
            verdict.fail(format!(
                "(d) lock node n{i} has {} command and {} subscriber connections, expected {} \
                 (one per Redlock client plus this check) and at most {}",
                seen.0,
                seen.1,
                CLIENTS * per_process + 1,
                CLIENTS * per_process
            ));
        }
    }
    // (d) on the cluster node: each Redlock client has one worker connection per master of its
    // slot map, so the cluster's processes have one per master and Redlock client in all, plus
    // the two of this check on each, and none has more than one per Redlock client (a worker
    // that followed a failover closed its connection to the old master). A worker whose batches
    // went to no slot of a failed-over master since its failover keeps its connection to the
    // old master, now a replica, until a `MOVED` or an idle master's confirmation refreshes its
    // map (`src/topology/cluster/link.rs`; safe: the old master answers its next batch there with `MOVED`),
    // so which process holds it is not fixed, only the sum. At most one subscriber per Redlock
    // client on the whole cluster (its subscriber listens on any one node). And every client
    // connection to a cluster process goes through the relay of its client process (the
    // address map): the relays carry them all, each client's at least its workers'.
    if let Some(rc) = &redis_cluster {
        let mut seen = Vec::new();
        let masters = (0..rc.nodes.len()).filter(|&i| rc.is_master(i)).count();
        let relayed = |j: usize| -> Vec<usize> {
            lab.cluster_relays
                .iter()
                .map(|per_client| per_client[j].connections())
                .collect()
        };
        // Per client process, its relays' connections to every cluster process.
        let per_client = |seen: &[(bool, (usize, usize), Vec<usize>)]| -> Vec<usize> {
            (0..CLIENTS)
                .map(|k| seen.iter().map(|(_, _, r)| r[k]).sum())
                .collect()
        };
        // The two of this check on each process: the counting one, and the one `is_master`
        // keeps for `INFO`.
        if !eventually(Duration::from_secs(5), || {
            seen = (0..rc.nodes.len())
                .map(|i| (rc.is_master(i), connections(&rc.nodes[i]), relayed(i)))
                .collect();
            let workers: usize = seen.iter().map(|(_, c, _)| c.0.saturating_sub(2)).sum();
            seen.iter().all(|(_, c, r)| {
                (2..=CLIENTS * per_process + 2).contains(&c.0)
                    && r.iter().sum::<usize>() == c.0 + c.1 - 2
            }) && workers == masters * CLIENTS * per_process
                && per_client(&seen)
                    .iter()
                    .all(|&n| n >= masters * per_process)
                && seen.iter().map(|(_, c, _)| c.1).sum::<usize>() <= CLIENTS * per_process
        }) {
            let each: Vec<String> = seen
                .iter()
                .zip(&rc.nodes)
                .map(|((m, c, r), node)| {
                    format!(
                        "{} {}: {} command, {} subscriber, through each client's relay {r:?}",
                        if *m { "master" } else { "replica" },
                        node.port,
                        c.0,
                        c.1
                    )
                })
                .collect();
            verdict.fail(format!(
                "(d) cluster node n{}: {}; expected {} worker connections in all ({masters} \
                 masters, one per Redlock client each), 2 more on each process (this check's), \
                 at most {} subscribers in all, and every client connection through the \
                 client's relay ({} or more a client)",
                cluster_node(),
                each.join("; "),
                masters * CLIENTS * per_process,
                CLIENTS * per_process,
                masters * per_process
            ));
        }
    }
    // (d) on the Sentinel group: the master every sentinel names has one worker connection per
    // Redlock client, plus this check's; a replica (an old master among them) this check's
    // only: every worker followed the switch. At most one subscriber per Redlock client on
    // the whole group (an idle one follows at its next subscription). Fresh clients have all
    // exited: none of theirs is left anywhere. And every client connection to a data node
    // goes through the relay of its client process (the address map; one that did not would
    // escape the cut of the old master): the relays carry them all, each client's relay to the
    // master at least its workers'.
    if let Some(g) = &group {
        let mut seen = Vec::new();
        let mut master = None;
        let expected = |m: bool| if m { CLIENTS * per_process + 1 } else { 1 };
        if !eventually(Duration::from_secs(5), || {
            master = g.master();
            seen = g
                .nodes
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    let relayed: Vec<usize> = lab
                        .group_relays
                        .iter()
                        .map(|per_client| per_client[i].connections())
                        .collect();
                    (Some(i) == master, n.port, connections(n), relayed)
                })
                .collect();
            master.is_some()
                && seen.iter().all(|(m, _, c, r)| {
                    c.0 == expected(*m)
                        && r.iter().sum::<usize>() == c.0 + c.1 - 1
                        && (!*m || r.iter().all(|&n| n >= per_process))
                })
                && seen.iter().map(|(_, _, c, _)| c.1).sum::<usize>() <= CLIENTS * per_process
        }) {
            let each: Vec<String> = seen
                .iter()
                .map(|(m, port, c, r)| {
                    format!(
                        "{} {port}: {} command (expected {}), {} subscriber, through each \
                         client's relay {r:?}",
                        if *m { "master" } else { "replica" },
                        c.0,
                        expected(*m),
                        c.1
                    )
                })
                .collect();
            verdict.fail(format!(
                "(d) Sentinel node n{} (the sentinels agree on a master: {}): {}; at \
                 most {} subscribers in all, and every client connection through the client's \
                 relay ({per_process} or more to the master)",
                cluster_node(),
                master.is_some(),
                each.join("; "),
                CLIENTS * per_process
            ));
        }
    }
    // Client threads closed their data connections when they ended: only the counting one is left.
    let mut seen = 0;
    if !eventually(Duration::from_secs(5), || {
        seen = data.clients("");
        seen == 1
    }) {
        verdict.fail(format!(
            "(d) data node has {seen} client connections after the client threads ended, \
             expected 1 (this check's)"
        ));
    }

    for (child, stdin) in &mut children.0 {
        drop(stdin.take());
        let status = child.wait().expect("wait for a client process");
        if !status.success() {
            verdict.fail(format!("client process exited with {status}"));
        }
    }

    // (d) Every fresh client exited on its own, having written its log.
    let mut logs = logs;
    for run in &fresh_runs {
        if run.hung {
            verdict.fail(format!(
                "(c) fresh client {} (started {}) did not finish: still running {} s after the \
                 last fresh client could start, killed (its log is lost: a write it made is \
                 missing from the counts of rules (b) and (pc))",
                run.id,
                ms(run.started, origin),
                fresh::EXIT_WITHIN_MS / 1_000
            ));
        } else if run.ok && run.log.exists() {
            logs.push(run.log.clone());
        } else {
            verdict.fail(format!(
                "(d) fresh client {} (started {}) failed or left no log",
                run.id,
                ms(run.started, origin)
            ));
        }
    }
    probe_end.store(1, std::sync::atomic::Ordering::Relaxed);
    let mut logs = read_logs(&logs);
    // A cluster node's count of connections off: what each client's links last read as the
    // masters (its final status), to tell a link short of a master from one that kept an old one.
    for v in &mut verdict.violations {
        if v.starts_with("(d) cluster node") {
            for (client, status) in &logs.status {
                v.push_str(&format!("; client {client}'s nodes: {}", status.detail));
            }
        }
    }
    logs.relay_stalls = probe.join().expect("stall probe panicked").all;
    logs.group_stalls = group_stalls;
    for (node, stalls) in node_stalls {
        logs.node_stalls.entry(node).or_default().extend(stalls);
    }
    let mut counters = BTreeMap::new();
    for r in 0..RESOURCES {
        let res = resource(r);
        let value: Option<u64> = redis::cmd("GET")
            .arg(counter_key(&res))
            .query(&mut data.conn())
            .expect("GET counter");
        counters.insert(res, value.unwrap_or(0));
    }
    let options = Options {
        eager: flags.eager,
        replicated: replicated(),
    };
    let stats = check(&logs, &record, &counters, origin, &options, &mut verdict);
    let rw_counter: Option<u64> = redis::cmd("GET")
        .arg(counter_key(kinds::RW_RESOURCE))
        .query(&mut data.conn())
        .expect("GET counter");
    let kind_stats = kinds::check(
        &logs,
        &record.outages,
        rw_counter.unwrap_or(0),
        origin,
        &mut verdict,
    );
    let storage = fenced::Storage::read(&mut data.conn());
    let fenced_stats = fenced::check(&logs, &storage, &record.pauses, origin, &mut verdict);
    let fenced_counter = storage.counter;
    let storage = election::read_storage(&mut data.conn());
    let election_stats = election::check(&logs, &storage, &record.pauses, origin, &mut verdict);
    let mut finals = history::Finals {
        counters: counters.clone(),
        fenced: fenced_counter,
        election: storage.counter,
    };
    finals
        .counters
        .insert(kinds::RW_RESOURCE.to_owned(), rw_counter.unwrap_or(0));
    history::check(&logs, &finals, origin, &dir.0, chaos_ms, &mut verdict);
    if let (Some(watch), Some(g)) = (sentinel_watch, &group) {
        record.sentinel_events = watch.finish();
        keep_sentinel_logs(g, &record.sentinel_events, origin, &dir.0);
    }
    sentinel::check(&logs, &record, flags.eager, origin, &mut verdict);
    let fresh_stats = fresh::stats(&logs, &record, &fresh_runs);
    check_coverage(&logs, &record, flags.cluster, &mut verdict);
    fresh::check_coverage(&fresh_stats, &record, flags.sentinel, &mut verdict);
    if logs.holds.iter().filter(|h| h.wrote.is_some()).count() == 0 {
        verdict.fail("no holder wrote anything: the run tested nothing".into());
    }
    summarize(&logs, &record, &stats);
    kinds::summarize(&logs, &kind_stats);
    fenced::summarize(&fenced_stats);
    election::summarize(&election_stats);
    print_table(
        &logs,
        &record,
        &stats,
        &fenced_stats,
        &election_stats,
        &fresh_stats,
        &verdict,
        seed,
        chaos_ms,
        flags,
    );
    if !verdict.violations.is_empty() {
        print_timeline(&record, origin);
    }
    for v in &verdict.violations {
        println!("VIOLATION {v}");
    }
    if !verdict.violations.is_empty() {
        print_kernel_stalls(run_start);
    }
    dir.1 = !verdict.violations.is_empty();
    verdict.violations.is_empty()
}

/// The kernel's own reports, since `since_ns`, of threads it could not run (a workqueue lockup,
/// an RCU stall, a soft lockup, a hung task), printed with a failed run's violations: a machine
/// whose kernel stalls for seconds delays every process's calls, and the run's verdict is read
/// against that. They change no verdict. Nothing is printed when the log cannot be read.
fn print_kernel_stalls(since_ns: u64) {
    for (at_ns, text) in kernel_stalls(since_ns) {
        println!(
            "MACHINE the kernel reported, {:.1} s after this run started: {text}",
            at_ns.saturating_sub(since_ns) as f64 / 1e9
        );
    }
}

/// The matching records of `/dev/kmsg` (`prio,seq,µs since boot,flags;text`). Their times are
/// the kernel's `local_clock`, within a millisecond of [`now_ns`]'s `CLOCK_MONOTONIC` on the
/// test machine (not in a container with a time namespace of its own).
fn kernel_stalls(since_ns: u64) -> Vec<(u64, String)> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(mut kmsg) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    else {
        return Vec::new();
    };
    let mut found = Vec::new();
    // One record per read; a read fails with EAGAIN at the end (EPIPE: a record was overwritten
    // while reading, and the next read goes on).
    let mut buf = vec![0u8; 8192];
    loop {
        let n = match kmsg.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(_) => break,
        };
        if let Some((at_ns, text)) = kernel_stall(&String::from_utf8_lossy(&buf[..n]))
            && at_ns >= since_ns
        {
            found.push((at_ns, text));
        }
    }
    found
}

/// One `/dev/kmsg` record's time (ns) and first line, when the kernel itself (facility 0: its
/// first field under 8; not a line a program wrote) reports a stall.
fn kernel_stall(record: &str) -> Option<(u64, String)> {
    const MARKS: [&str; 8] = [
        "workqueue lockup",
        "detected stalls",
        "detected expedited stalls",
        "self-detected stall",
        "kthread starved",
        "soft lockup",
        "hard LOCKUP",
        "blocked for more than",
    ];
    let (head, text) = record.split_once(';')?;
    let mut fields = head.split(',');
    let prio: u32 = fields.next()?.parse().ok()?;
    let at_us: u64 = fields.nth(1)?.parse().ok()?;
    if prio >= 8 {
        return None;
    }
    let text = text.lines().next().unwrap_or("").trim();
    MARKS
        .iter()
        .any(|m| text.contains(m))
        .then(|| (at_us * 1_000, text.to_owned()))
}

/// [`kernel_stall`] on the records of the lockups seen on the test machine, and on others.
fn kernel_records_parse_as_documented() {
    let lockup = "4,81234,65384128370,-;BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 \
                  nice=0 stuck for 42s!\n";
    assert_eq!(
        kernel_stall(lockup),
        Some((
            65_384_128_370_000,
            "BUG: workqueue lockup - pool cpus=1 node=0 flags=0x0 nice=0 stuck for 42s!".into()
        ))
    );
    let rcu = "6,9,1000,-;rcu: rcu_preempt kthread starved for 14752 jiffies! g10400421\n \
               SUBSYSTEM=rcu\n";
    assert_eq!(kernel_stall(rcu).map(|r| r.0), Some(1_000_000));
    assert_eq!(kernel_stall("6,10,2000,-;redlock-probe-marker\n"), None);
    // The same words from a program (facility 1, user).
    assert_eq!(
        kernel_stall("12,11,3000,-;BUG: workqueue lockup - stuck for 42s!\n"),
        None
    );
    assert_eq!(kernel_stall("not a record"), None);
}

/// What the driver really did and when, to read violations against.
fn print_timeline(record: &schedule::Record, origin: u64) {
    let mut events: Vec<(u64, String)> = Vec::new();
    for o in &record.outages {
        let who = o.client.map_or(String::new(), |c| format!(" for c{c}"));
        events.push((
            o.down_ns,
            format!(
                "{:?} n{}{who} until {}",
                o.action,
                o.node,
                ms(o.up_ns, origin)
            ),
        ));
    }
    for r in &record.restarts {
        events.push((
            r.killed,
            format!(
                "{} restart of n{}: killed, new process spawned at x.{:03} s of its clock",
                if r.quick { "quick" } else { "delayed" },
                r.node,
                r.permille
            ),
        ));
    }
    for f in &record.failovers {
        let at = |t: Option<u64>| t.map_or("never".to_owned(), |t| ms(t, origin));
        events.push((
            f.start,
            format!(
                "{:?} of cluster master {} (replica {}): promoted at {}, back at {}, a replica at {}, cluster healthy at {}",
                f.action,
                f.master,
                f.replica,
                at(f.promoted),
                at(f.back),
                at(f.demoted),
                at(f.healthy)
            ),
        ));
    }
    for g in &record.group {
        let at = |t: Option<u64>| t.map_or("never".to_owned(), |t| ms(t, origin));
        events.push((
            g.start,
            format!(
                "{} (master {}, node faulted {}): a sentinel switched at {}, all at {}, back at {}, a replica at {}, group whole at {}",
                sentinel::describe(&g.step),
                g.master,
                g.victim,
                at(g.first_switch),
                at(g.switched.map(|s| s.0)),
                at(g.back),
                at(g.demoted),
                at(g.healthy)
            ),
        ));
    }
    for &(at, node, offset) in &record.shifts {
        events.push((at, format!("clock of n{node} set to +{offset} ms")));
    }
    for p in &record.pauses {
        events.push((
            p.from,
            format!(
                "SIGSTOP c{} until {}{}",
                p.client,
                ms(p.to, origin),
                p.at_write
                    .map_or(String::new(), |k| format!(" (at a {k} write)"))
            ),
        ));
    }
    events.sort();
    println!("timeline (what the driver did):");
    for (at, what) in events {
        println!("  {}  {what}", ms(at, origin));
    }
}

/// The run's summary as markdown, to paste into `docs/guarantees.md`: faults by class,
/// acquisitions by kind, violations, keys left, known-limit events.
#[allow(clippy::too_many_arguments)]
fn print_table(
    logs: &checker::Logs,
    record: &schedule::Record,
    stats: &checker::Stats,
    fenced: &fenced::Stats,
    election: &election::Stats,
    fresh: &fresh::Stats,
    verdict: &Verdict,
    seed: u64,
    chaos_ms: u64,
    flags: Flags,
) {
    println!();
    println!(
        "summary: `cargo test --release --test chaos -- --seed {seed}{}{}`",
        if chaos_ms == SHORT_CHAOS_MS {
            String::new()
        } else {
            format!(" --minutes {}", chaos_ms / 60_000)
        },
        flags.command_line()
    );
    println!();
    println!("| fault class | injected |");
    println!("| --- | --- |");
    for (class, n) in fault_table(record, logs) {
        println!("| {class} | {n} |");
    }
    println!();
    let acquired = |f: &dyn Fn(&checker::Call) -> bool| {
        logs.calls
            .iter()
            .filter(|c| {
                matches!(c.op.as_str(), "lock" | "try_lock" | "wait" | "overask")
                    && c.outcome == "ok"
                    && !c.resource.starts_with("chaos:final")
                    && f(c)
            })
            .count()
    };
    let mutex = acquired(&|c| c.resource.starts_with("chaos:r"));
    let role = |r: &str| logs.kinds.iter().filter(|h| h.role == r).count();
    let cancelled = |res: &str| {
        logs.waits
            .iter()
            .filter(|w| w.resource.starts_with(res) && w.outcome == "cancelled")
            .count()
    };
    println!("| acquisitions by kind | count |");
    println!("| --- | --- |");
    println!(
        "| mutex (plain and reentrant) | {mutex} ({} cancelled waits) |",
        cancelled("chaos:r")
    );
    println!(
        "| fenced | {} ({} ordered pairs checked) |",
        fenced.holds, fenced.ordered_pairs
    );
    println!(
        "| leader election: leaderships (campaigns) | {} ({} campaigns, {} cancelled; {} ordered pairs checked) |",
        election.leaderships, election.campaigns, election.cancelled, election.ordered_pairs
    );
    println!(
        "| read-write: read / write / plain | {} / {} / {} ({} cancelled waits) |",
        role("read"),
        role("write"),
        role("plain"),
        cancelled(kinds::RW_RESOURCE)
    );
    println!(
        "| semaphore permits (L = {}) | {} ({} cancelled waits) |",
        kinds::PERMITS,
        role("permit"),
        cancelled(kinds::SEM_RESOURCE)
    );
    println!(
        "| with restart grace / without | {} / {} |",
        acquired(&|c| c.variant == "g"),
        acquired(&|c| c.variant == "n")
    );
    println!(
        "| fresh clients: started (during a failover) / acquisitions of attempts (with grace) / leader calls, answers and reports checked by el4 | {} ({}) / {} of {} ({}) / {}, {} |",
        fresh.started,
        fresh.during_failover,
        fresh.acquired,
        fresh.attempts,
        fresh.acquired_with_grace,
        fresh.leader_calls,
        fresh.reports
    );
    println!();
    let leaked = logs
        .sightings
        .iter()
        .filter(|s| checker::judge(s, &record.outages, logs) == checker::KeyFate::Leak)
        .count();
    println!("| outcome | count |");
    println!("| --- | --- |");
    println!("| violations | {} |", verdict.violations.len());
    println!(
        "| keys left after a finished call (leaks) | {leaked} (of {} calls probed) |",
        logs.probes.values().map(|p| p.0).sum::<u64>()
    );
    println!(
        "| known limit: unfenced writes made late by a pause or a starved machine, counters broken | {} late ({} after a driver pause, {} starved), {} counter(s) broken |",
        stats.late_paused + stats.late_starved,
        stats.late_paused,
        stats.late_starved,
        stats.known_limit.len()
    );
    println!(
        "| fenced writes made late, rejected by the storage | {} of {} late ({} after a driver pause) |",
        fenced.late_rejected, fenced.late, fenced.late_paused
    );
    println!(
        "| leaders' writes made late, rejected by the term-checking storage | {} of {} late ({} after a driver pause); {} stale reads and {} stale writes rejected in all |",
        election.late_rejected,
        election.late,
        election.late_paused,
        election.rejected_reads,
        election.rejected_writes
    );
    println!();
}

/// Whether `arg` is one of libtest's flags, which `cargo test -- …` and test runners pass to
/// every test binary (the value of those that take one follows as a separate argument, or
/// after `=`).
fn is_libtest_flag(arg: &str) -> bool {
    const FLAGS: &[&str] = &[
        "--include-ignored",
        "--ignored",
        "--force-run-in-process",
        "--exclude-should-panic",
        "--test",
        "--bench",
        "--list",
        "--logfile",
        "--nocapture",
        "--no-capture",
        "--test-threads",
        "--skip",
        "--quiet",
        "-q",
        "--exact",
        "--color",
        "--format",
        "--show-output",
        "-Z",
        "--report-time",
        "--ensure-time",
        "--shuffle",
        "--shuffle-seed",
        "--fail-fast",
    ];
    let name = arg.split_once('=').map_or(arg, |(name, _)| name);
    FLAGS.contains(&name)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        child(parse_child(&args[1..]));
        return;
    }
    if args.first().map(String::as_str) == Some("--fresh") {
        fresh::child(&args[1..]);
        return;
    }
    let mut seed = None;
    let mut minutes = None;
    let mut flags = Flags {
        eager: false,
        grace_ms: TTL_MAX_MS,
        unchecked_storage: false,
        no_clock_guard: false,
        cluster: false,
        three: false,
        min_replicas: false,
        sentinel: false,
        fresh_grace_ms: None,
        stall_sentinels: false,
    };
    let mut grace_ms = None;
    // Which configurations, as (cluster, three, sentinel): the short profile's three (the
    // default, in CI), or one.
    let mut configs = vec![
        (false, false, false),
        (true, true, false),
        (false, false, true),
    ];
    let mut plan = false;
    let mut plan_coverage = None;
    let mut libtest = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seed" => {
                seed = it.next().and_then(|s| s.parse::<u64>().ok()).or_else(|| {
                    eprintln!("--seed needs a number");
                    std::process::exit(2)
                })
            }
            "--minutes" => {
                minutes = it.next().and_then(|s| s.parse::<u64>().ok()).or_else(|| {
                    eprintln!("--minutes needs a number");
                    std::process::exit(2)
                })
            }
            "--eager-restarts" => flags.eager = true,
            "--grace-ms" => {
                grace_ms = Some(
                    it.next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .unwrap_or_else(|| {
                            eprintln!("--grace-ms needs a number");
                            std::process::exit(2)
                        }),
                )
            }
            "--fresh-grace-ms" => {
                flags.fresh_grace_ms = Some(
                    it.next()
                        .and_then(|s| s.parse::<u64>().ok())
                        .unwrap_or_else(|| {
                            eprintln!("--fresh-grace-ms needs a number");
                            std::process::exit(2)
                        }),
                )
            }
            "--stall-sentinels" => flags.stall_sentinels = true,
            "--unchecked-storage" => flags.unchecked_storage = true,
            "--no-clock-guard" => flags.no_clock_guard = true,
            "--standalone" => configs = vec![(false, false, false)],
            "--cluster" => configs = vec![(true, false, false)],
            "--cluster3" => configs = vec![(true, true, false)],
            "--min-replicas" => flags.min_replicas = true,
            "--sentinel" => configs = vec![(false, false, true)],
            // The schedule only, to see what a seed would do.
            "--plan" => plan = true,
            // Of N seeds' plans, how many lack each fault class rule (cov) wants.
            "--plan-coverage" => {
                let seeds = it
                    .next()
                    .and_then(|s| s.parse::<u64>().ok())
                    .unwrap_or_else(|| {
                        eprintln!("--plan-coverage needs a number of seeds");
                        std::process::exit(2)
                    });
                plan_coverage = Some(seeds);
            }
            // libtest's own arguments, passed along by `cargo test -- ...` to every test
            // binary: run only when they select this one test, `chaos`.
            s if !s.starts_with('-') || is_libtest_flag(s) => libtest.push(arg.clone()),
            // A misspelt flag of ours would otherwise become a filter that selects nothing,
            // and the run would "pass" having done nothing.
            s => {
                eprintln!(
                    "chaos: unknown flag {s:?}; its own are --seed N, --minutes N, --plan, \
                     --plan-coverage N, --standalone, --cluster, --cluster3, --sentinel, \
                     --min-replicas, --eager-restarts, --grace-ms N, --fresh-grace-ms N, \
                     --stall-sentinels, --unchecked-storage, --no-clock-guard (and libtest's)"
                );
                std::process::exit(2)
            }
        }
    }
    let selection = support::TestArgs::parse(&libtest);
    if selection.list {
        if selection.selects("chaos") {
            println!("chaos: test");
        }
        return;
    }
    if !selection.selects("chaos") {
        println!("chaos: filtered out");
        return;
    }
    let seed = seed.unwrap_or_else(|| now_ns() ^ (u64::from(std::process::id()) << 32));
    let chaos_ms = minutes.map_or(SHORT_CHAOS_MS, |m| m.max(1) * 60_000);
    let mut failed = Vec::new();
    for (cluster, three, sentinel) in configs {
        let mut flags = Flags {
            cluster,
            three,
            sentinel,
            ..flags
        };
        flags.apply();
        flags.grace_ms = grace_ms.unwrap_or_else(|| flags.default_grace_ms());
        if let Some(seeds) = plan_coverage {
            let (short, redrawn) = plans_short(seeds, chaos_ms, &flags);
            println!(
                "{} configuration: of {seeds} plans ({redrawn} drawn again), lacking each class:",
                flags.name()
            );
            for (what, lacking) in short {
                let some: Vec<String> = lacking.iter().take(3).map(u64::to_string).collect();
                println!("  {:>5}  {what} (seeds {})", lacking.len(), some.join(", "));
            }
            continue;
        }
        if plan {
            for f in schedule(seed, chaos_ms, &flags) {
                println!("{}", describe(&f));
            }
            continue;
        }
        let started = std::time::Instant::now();
        let ok = run(seed, chaos_ms, flags);
        println!(
            "chaos ({} configuration): {} in {:.1} s",
            flags.name(),
            if ok { "ok" } else { "FAILED" },
            started.elapsed().as_secs_f64()
        );
        if !ok {
            failed.push(flags.command_line());
        }
    }
    if !failed.is_empty() {
        eprintln!("chaos: FAILED (seed {seed}; {})", failed.join(";"));
        std::process::exit(1);
    }
    println!("chaos: ok (seed {seed})");
}
