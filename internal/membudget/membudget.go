// Package membudget finds how much memory this process may use: the
// memory cgroup's limit when there is one (cgroup v2's memory.max, or v1's
// memory.limit_in_bytes), else the kernel's MemAvailable estimate.
package membudget

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// unlimited is the smallest cgroup v1 limit read as no limit: v1 writes
// "no limit" as the largest page-aligned int64.
const unlimited = 1 << 60

// Memory is how much memory the process may use and where that figure
// comes from.
type Memory struct {
	Bytes  int64
	Source string // "cgroup v2 memory.max", "cgroup v1 memory.limit_in_bytes" or "MemAvailable"
}

// Available returns the memory this process may use, read from the /proc
// and /sys trees under root ("/" for the running system): the tightest
// memory cgroup limit of the process's cgroup and its ancestors, else
// MemAvailable of /proc/meminfo.
func Available(root string) (Memory, error) {
	if lim, src, ok := CgroupLimit(root); ok {
		return Memory{Bytes: lim, Source: src}, nil
	}
	b, err := os.ReadFile(filepath.Join(root, "proc", "meminfo"))
	if err != nil {
		return Memory{}, fmt.Errorf("membudget: %w", err)
	}
	n, err := MemAvailable(string(b))
	if err != nil {
		return Memory{}, fmt.Errorf("membudget: %s: %w", filepath.Join(root, "proc", "meminfo"), err)
	}
	return Memory{Bytes: n, Source: "MemAvailable"}, nil
}

// MemAvailable returns the MemAvailable figure of the contents of
// /proc/meminfo, in bytes.
func MemAvailable(meminfo string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(meminfo))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("MemAvailable: %w", err)
		}
		if len(f) > 1 && f[1] == "kB" {
			n *= 1024
		}
		return n, nil
	}
	return 0, errors.New("no MemAvailable line")
}

// Cgroups returns the process's cgroup v2 path and cgroup v1 memory
// controller path from the contents of /proc/self/cgroup ("" for those
// absent).
func Cgroups(procSelfCgroup string) (v2, v1 string) {
	for _, line := range strings.Split(procSelfCgroup, "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, p, ok := strings.Cut(rest, ":")
		if !ok {
			continue
		}
		if id == "0" && ctrls == "" {
			v2 = p
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c == "memory" {
				v1 = p
			}
		}
	}
	return v2, v1
}

// CgroupLimit returns the tightest memory limit of the process's memory
// cgroup and its ancestors under root, and which file it came from; ok is
// false when no limit is set or no cgroup is found. The v1 memory
// controller is read first, as these machines mount it: when it is
// mounted, it is the one that limits.
func CgroupLimit(root string) (limit int64, source string, ok bool) {
	b, err := os.ReadFile(filepath.Join(root, "proc", "self", "cgroup"))
	if err != nil {
		return 0, "", false
	}
	v2, v1 := Cgroups(string(b))
	if v1 != "" {
		if lim, ok := tightest(filepath.Join(root, "sys", "fs", "cgroup", "memory"), v1, "memory.limit_in_bytes"); ok {
			return lim, "cgroup v1 memory.limit_in_bytes", true
		}
	}
	if v2 != "" {
		if lim, ok := tightest(filepath.Join(root, "sys", "fs", "cgroup"), v2, "memory.max"); ok {
			return lim, "cgroup v2 memory.max", true
		}
	}
	return 0, "", false
}

// tightest returns the smallest limit in file of the cgroup at cg under
// mount and of its ancestors. A container whose own cgroup is mounted as
// the root sees its path missing under mount; the mount's root then
// holds its limit.
func tightest(mount, cg, file string) (int64, bool) {
	best, found := int64(0), false
	for p := path.Clean("/" + cg); ; p = path.Dir(p) {
		if lim, ok := readLimit(filepath.Join(mount, filepath.FromSlash(p), file)); ok && (!found || lim < best) {
			best, found = lim, true
		}
		if p == "/" {
			return best, found
		}
	}
}

// readLimit reads a cgroup limit file: a byte count, or "max" (v2) or a
// value past unlimited (v1) for none.
func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	return ParseLimit(string(b))
}

// ParseLimit parses the contents of a memory.max or memory.limit_in_bytes
// file; ok is false for no limit ("max", or v1's near-int64 sentinel) or
// a malformed value.
func ParseLimit(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n <= 0 || n >= unlimited {
		return 0, false
	}
	return n, true
}

// Split is how SSD streaming shares the memory: the resident weights,
// the context and session buffers, and the expert cache.
type Split struct {
	Memory   int64 // what the process may use
	Resident int64 // non-routed weights
	Context  int64 // KV cache of every session
	Session  int64 // scratch buffers
	Cache    int64 // what remains for the expert cache
}

// Fraction is the share of the process's memory the default split hands
// out; the rest is headroom for the Go heap, the tokenizer and the kernel.
const Fraction = 0.8

// Budget returns the default split of mem: Fraction of it, less the
// resident weights, the context and the session buffers, goes to the
// expert cache (0 when nothing is left).
func Budget(mem, resident, context, session int64) Split {
	s := Split{Memory: mem, Resident: resident, Context: context, Session: session}
	s.Cache = max(0, int64(Fraction*float64(mem))-resident-context-session)
	return s
}
