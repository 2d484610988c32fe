package redquorum

// #include "redlock.h"
import "C"

import (
	"math"
	"time"
)

// NodeStatus is what a client's worker last saw of one node.
type NodeStatus struct {
	// Address is host:port, never with credentials.
	Address   string
	Connected bool
	// Connects counts the connections established so far.
	Connects uint64
	// Restarts counts reconnects that found a different server run_id.
	Restarts uint64
	// RunID is the server's run_id; empty before the first connect or when INFO is denied.
	RunID string
	// Uptime is the server's uptime (whole seconds when reported, plus the time since);
	// negative when unknown.
	Uptime time.Duration
	// GraceRemaining is, with WithRestartGrace, how much longer the node does not count
	// toward acquires.
	GraceRemaining time.Duration
	// ServerVersion is the server's own version at the last connect (valkey_version on
	// Valkey, whose redis_version is the Redis it matches); empty when unknown.
	ServerVersion string
	// ServerName says which server it is, by what it says of itself: "redis", "valkey", or
	// another server's server_name; empty when unknown.
	ServerName string
	// Persistence is the node's persistence as it reported it (e.g. "no AOF, no RDB
	// snapshots"); empty when unknown. Without persistence a restart forgets locks:
	// consider WithRestartGrace.
	Persistence string
	// Warnings lists what the server probe and the clock guard found worth attention
	// (replicas of a master, an evicting maxmemory-policy, a clock that stepped back, a
	// command the ACL denies).
	Warnings []string
	// ClockOffset is the node's clock minus ours at the last TIME sample, valid when
	// ClockOffsetKnown (not when the guard is off, TIME is denied or nothing sampled yet).
	ClockOffset      time.Duration
	ClockOffsetKnown bool
	// QuarantineRemaining is how much longer the node is out of acquire quorums because
	// its clock jumped forward; QuarantineReason says why (empty when it is not).
	QuarantineRemaining time.Duration
	QuarantineReason    string
	// Master is, for a Sentinel-managed node (redis+sentinel://), the master (host:port)
	// the sentinels named at the last connect; for a Redis Cluster (redis+cluster://), its
	// masters (host:port,host:port,...); empty for a standalone node.
	Master string
	// Failovers counts the changes of master seen on a Sentinel-managed node or a Redis
	// Cluster (each starts a restart grace when WithRestartGrace is given).
	Failovers uint64
	// Errors counts requests that failed on this node: error replies, timeouts, dropped
	// connections, not sent while it was down.
	Errors uint64
}

// NodeStatus reports what the client's workers last saw of each node, in the order of
// the URLs given to New.
func (c *Client) NodeStatus() ([]NodeStatus, error) {
	var result []NodeStatus
	err := c.call(func(ptr *C.redlock_client) error {
		result = make([]NodeStatus, int(C.redlock_client_node_count(ptr)))
		for i := range result {
			var raw *C.redlock_node_status
			if err := cCall(func(cerr cErr) cStatus {
				return C.redlock_client_node_status(ptr, C.size_t(i), &raw, cerr)
			}); err != nil {
				return err
			}
			result[i] = readNodeStatus(raw)
			C.redlock_node_status_free(raw)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// readNodeStatus copies a C node status.
func readNodeStatus(raw *C.redlock_node_status) NodeStatus {
	s := NodeStatus{
		Address:             goString(C.redlock_node_status_address(raw)),
		Connected:           bool(C.redlock_node_status_connected(raw)),
		Connects:            uint64(C.redlock_node_status_connects(raw)),
		Restarts:            uint64(C.redlock_node_status_restarts(raw)),
		RunID:               goString(C.redlock_node_status_run_id(raw)),
		Uptime:              -1,
		GraceRemaining:      time.Duration(C.redlock_node_status_grace_remaining_ms(raw)) * time.Millisecond,
		ServerVersion:       goString(C.redlock_node_status_server_version(raw)),
		ServerName:          goString(C.redlock_node_status_server_name(raw)),
		Persistence:         goString(C.redlock_node_status_persistence(raw)),
		QuarantineRemaining: time.Duration(C.redlock_node_status_quarantine_remaining_ms(raw)) * time.Millisecond,
		QuarantineReason:    goString(C.redlock_node_status_quarantine_reason(raw)),
		Master:              goString(C.redlock_node_status_master(raw)),
		Failovers:           uint64(C.redlock_node_status_failovers(raw)),
		Errors:              uint64(C.redlock_node_status_errors(raw)),
	}
	if ms := C.redlock_node_status_uptime_ms(raw); ms != C.uint64_t(math.MaxUint64) {
		s.Uptime = time.Duration(ms) * time.Millisecond
	}
	for i := range int(C.redlock_node_status_warning_count(raw)) {
		s.Warnings = append(s.Warnings, goString(C.redlock_node_status_warning(raw, C.size_t(i))))
	}
	var offset C.int64_t
	if C.redlock_node_status_clock_offset_ms(raw, &offset) {
		s.ClockOffset = time.Duration(offset) * time.Millisecond
		s.ClockOffsetKnown = true
	}
	return s
}
