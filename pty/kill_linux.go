package pty

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
	"time"
)

// killSession sends sig to every live process of session sid (the
// process table's session field), whatever process group it is in: an
// interactive shell puts each job in a group of its own. For SIGKILL it
// goes on until none is left (one may fork meanwhile), for a bounded time.
func killSession(sid int, sig syscall.Signal) {
	_ = syscall.Kill(-sid, sig)
	for range 100 {
		pids := sessionMembers(sid)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, sig)
		}
		if sig != syscall.SIGKILL {
			return
		}
		time.Sleep(2 * time.Millisecond) // the killed ones become zombies
	}
}

// sessionMembers lists the processes of session sid that have not exited
// (a zombie waits only for its parent to reap it).
func sessionMembers(sid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp session ...; comm may hold spaces
		// and parentheses, so fields start after the last ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		f := bytes.Fields(b[i+1:])
		if len(f) < 4 {
			continue
		}
		if s := string(f[0]); s == "Z" || s == "X" {
			continue
		}
		if n, err := strconv.Atoi(string(f[3])); err == nil && n == sid {
			out = append(out, pid)
		}
	}
	return out
}
