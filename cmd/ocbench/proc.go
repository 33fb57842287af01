// The server process's memory and CPU, read from /proc/<pid> (-pid).

package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

func (b *bench) rss() int64 {
	if b.o.pid == 0 {
		return 0
	}
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", b.o.pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(f), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(l)[1], 10, 64)
			return v
		}
	}
	return 0
}

// cpu is the server's user+system CPU time so far (/proc/<pid>/stat), 0
// without -pid. Linux reports it in clock ticks of 10 ms.
func (b *bench) cpu() time.Duration {
	if b.o.pid == 0 {
		return 0
	}
	f, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.o.pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(f, ')')
	if i < 0 {
		return 0
	}
	fs := strings.Fields(string(f[i+1:])) // fs[0] is field 3 (state)
	if len(fs) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(fs[11], 10, 64)
	st, _ := strconv.ParseInt(fs[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// cpuPerPrompt records and prints the server CPU spent per prompt since c0.
func (b *bench) cpuPerPrompt(key, what string, c0 time.Duration, prompts int) {
	if b.o.pid == 0 || prompts == 0 {
		return
	}
	v := ms(b.cpu()-c0) / float64(prompts)
	b.summary[key] = v
	b.printf("%s: server CPU %.2f ms per prompt (%d prompts)\n", what, v, prompts)
}

func (b *bench) sampleRSS(key, what string) {
	if b.o.pid == 0 {
		return
	}
	v := b.rss()
	b.summary[key] = v
	b.printf("RSS %s: %d kB (%.1f MB)\n", what, v, float64(v)/1024)
}
