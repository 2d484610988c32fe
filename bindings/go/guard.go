package redlock

// #include <stdlib.h>
// #include "redlock.h"
import "C"

import "time"

// setGuardC applies the clock guard and server probe options (zero values: the defaults).
func (o Options) setGuardC(opts *C.redlock_options) error {
	if o.ClockJumpThreshold < 0 {
		return invalidArgument("ClockJumpThreshold %v is negative", o.ClockJumpThreshold)
	}
	if o.ClockQuarantine < 0 {
		return invalidArgument("ClockQuarantine %v is negative", o.ClockQuarantine)
	}
	if o.DisableClockGuard && o.ClockJumpThreshold != 0 {
		return invalidArgument("ClockJumpThreshold has no effect with DisableClockGuard")
	}
	if o.DisableClockGuard {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_clock_guard(opts, false, e)
		}); err != nil {
			return err
		}
	}
	if o.ClockJumpThreshold != 0 {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_clock_jump_threshold_ms(opts, optionMillis(o.ClockJumpThreshold), e)
		}); err != nil {
			return err
		}
	}
	if o.ClockQuarantine != 0 {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_clock_quarantine_ms(opts, optionMillis(o.ClockQuarantine), e)
		}); err != nil {
			return err
		}
	}
	if o.StrictServers {
		if err := set(func(e **C.redlock_error) C.enum_redlock_status {
			return C.redlock_options_set_strict_servers(opts, true, e)
		}); err != nil {
			return err
		}
	}
	return nil
}

// fillGuardStatus reads the clock guard's and server probe's fields of a C node status.
func fillGuardStatus(s *NodeStatus, raw *C.redlock_node_status) {
	optional := func(p *C.char) string {
		if p == nil {
			return ""
		}
		return C.GoString(p)
	}
	s.ServerVersion = optional(C.redlock_node_status_server_version(raw))
	s.Persistence = optional(C.redlock_node_status_persistence(raw))
	n := int(C.redlock_node_status_warning_count(raw))
	for i := 0; i < n; i++ {
		s.Warnings = append(s.Warnings, optional(C.redlock_node_status_warning(raw, C.size_t(i))))
	}
	var offset C.int64_t
	if C.redlock_node_status_clock_offset_ms(raw, &offset) {
		s.ClockOffset = time.Duration(offset) * time.Millisecond
		s.ClockOffsetKnown = true
	}
	s.QuarantineRemaining = time.Duration(C.redlock_node_status_quarantine_remaining_ms(raw)) * time.Millisecond
	s.QuarantineReason = optional(C.redlock_node_status_quarantine_reason(raw))
}
