package identifier_test

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"pgregory.net/rapid"

	"github.com/opencode-server/opencode-server/identifier"
)

const mask48 = 1<<48 - 1

// idForm is the legacy 6-byte form: prefix, '_', 12 lowercase hex, 14 base62.
var idForm = regexp.MustCompile(`^([a-z]{3})_([0-9a-f]{12})([0-9A-Za-z]{14})$`)

// decode returns the 48-bit field of a minted ID.
func decode(t testing.TB, id string) uint64 {
	t.Helper()
	m := idForm.FindStringSubmatch(id)
	if m == nil {
		t.Fatalf("id %q does not have the form prefix_<12 hex><14 base62>", id)
	}
	v, err := strconv.ParseUint(m[2], 16, 64)
	if err != nil {
		t.Fatalf("decode %q: %v", id, err)
	}
	return v
}

// fixedClock is a settable clock safe for concurrent use.
type fixedClock struct{ ms atomic.Int64 }

func newClock(ms int64) *fixedClock {
	c := &fixedClock{}
	c.ms.Store(ms)
	return c
}
func (c *fixedClock) now() int64    { return c.ms.Load() }
func (c *fixedClock) set(ms int64)  { c.ms.Store(ms) }
func (c *fixedClock) step(ms int64) { c.ms.Add(ms) }

var allPrefixes = []identifier.Prefix{identifier.Session, identifier.Message, identifier.Part,
	identifier.Event, identifier.Permission, identifier.Question}

func TestFormat(t *testing.T) {
	const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	for _, p := range allPrefixes {
		for _, desc := range []bool{false, true} {
			name := string(p) + "/asc"
			if desc {
				name = string(p) + "/desc"
			}
			t.Run(name, func(t *testing.T) {
				const ms = 1795985850993
				g := identifier.New(func() int64 { return ms })
				for i := 1; i <= 50; i++ {
					var id string
					if desc {
						id = g.Descending(p)
					} else {
						id = g.Ascending(p)
					}
					if len(id) != len(p)+27 {
						t.Fatalf("len(%q) = %d, want %d", id, len(id), len(p)+27)
					}
					if id[:len(p)] != string(p) || id[len(p)] != '_' {
						t.Fatalf("%q does not start with %q", id, string(p)+"_")
					}
					hex := id[len(p)+1 : len(p)+13]
					for _, c := range []byte(hex) {
						if !strings.ContainsRune("0123456789abcdef", rune(c)) {
							t.Fatalf("%q: hex field %q has %q", id, hex, c)
						}
					}
					for _, c := range []byte(id[len(p)+13:]) {
						if !strings.ContainsRune(base62, rune(c)) {
							t.Fatalf("%q: random field has %q", id, c)
						}
					}
					v := uint64(ms*0x1000 + i)
					if desc {
						v = ^v
					}
					want := strconv.FormatUint(v&mask48, 16)
					want = strings.Repeat("0", 12-len(want)) + want
					if hex != want {
						t.Fatalf("id %d = %q: hex %q, want %q", i, id, hex, want)
					}
					if err := identifier.Check(p, id); err != nil {
						t.Fatalf("Check(%q, %q) = %v", p, id, err)
					}
				}
			})
		}
	}
}

// TestFormatTable pins the hex field for hand-computed values.
func TestFormatTable(t *testing.T) {
	tests := []struct {
		name string
		ms   int64
		desc bool
		want string // hex field of the first ID minted in ms
	}{
		{"zero", 0, false, "000000000001"},
		{"zero desc", 0, true, "fffffffffffe"},
		{"one ms", 1, false, "000000001001"},
		{"trace a (2026-11-29)", 1795985851018, false, strconv.FormatUint(uint64(1795985851018*0x1000+1)&mask48, 16)},
		{"last before wrap", 1<<36 - 1, false, "fffffffff001"},
		{"wrap", 1 << 36, false, "000000000001"},
		{"wrap desc", 1 << 36, true, "fffffffffffe"},
		{"2026-08-14 wrap desc", 1<<37 - 1, true, "000000000ffe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := identifier.New(func() int64 { return tt.ms })
			var id string
			if tt.desc {
				id = g.Descending(identifier.Session)
			} else {
				id = g.Ascending(identifier.Message)
			}
			want := strings.Repeat("0", 12-len(tt.want)) + tt.want
			if got := id[4:16]; got != want {
				t.Fatalf("hex of %q = %q, want %q", id, got, want)
			}
		})
	}
}

func TestPackageLevelMinting(t *testing.T) {
	for _, c := range []struct {
		id string
		p  identifier.Prefix
	}{
		{identifier.NewSession(), identifier.Session},
		{identifier.NewMessage(), identifier.Message},
		{identifier.NewPart(), identifier.Part},
		{identifier.NewEvent(), identifier.Event},
		{identifier.Ascending(identifier.Permission), identifier.Permission},
		{identifier.Descending(identifier.Question), identifier.Question},
	} {
		if m := idForm.FindStringSubmatch(c.id); m == nil || m[1] != string(c.p) {
			t.Errorf("%q is not a %s_ ID of the legacy form", c.id, c.p)
		}
	}
	// The process-wide state is shared: message then part then message are
	// increasing, and sessions decrease.
	a, b, c := identifier.NewMessage(), identifier.NewPart(), identifier.NewMessage()
	if !(decode(t, a) < decode(t, b) && decode(t, b) < decode(t, c)) {
		t.Errorf("process-wide state not shared/monotonic: %s %s %s", a, b, c)
	}
	s1, s2 := identifier.NewSession(), identifier.NewSession()
	if decode(t, s2) >= decode(t, s1) {
		t.Errorf("sessions not descending: %s then %s", s1, s2)
	}
}

func TestDescendingIsBitwiseNot(t *testing.T) {
	c := newClock(1795985850993)
	ga := identifier.New(c.now)
	gd := identifier.New(c.now)
	for i := 0; i < 5000; i++ {
		if i%7 == 0 {
			c.step(1)
		}
		a, d := decode(t, ga.Ascending(identifier.Message)), decode(t, gd.Descending(identifier.Session))
		if d != ^a&mask48 {
			t.Fatalf("step %d: descending %012x != ^ascending %012x", i, d, ^a&mask48)
		}
	}
}

func TestSingleGoroutineMillionStrictlyIncreasing(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	var ms atomic.Int64
	ms.Store(1795985850993)
	var calls int
	g := identifier.New(func() int64 {
		calls++
		// advance every 1000 calls, step back every 7777
		switch {
		case calls%7777 == 0:
			return ms.Add(-3)
		case calls%1000 == 0:
			return ms.Add(1)
		}
		return ms.Load()
	})
	var prev uint64
	var prevS string
	for i := 0; i < n; i++ {
		id := g.Ascending(identifier.Message)
		v := decode(t, id)
		if i > 0 && v <= prev {
			t.Fatalf("id %d: %012x not > %012x", i, v, prev)
		}
		if i > 0 && id <= prevS {
			t.Fatalf("id %d: %q not > %q as strings", i, id, prevS)
		}
		prev, prevS = v, id
	}
}

// TestConcurrentMillion mints 10^6 IDs from many goroutines through one
// generator: all unique, each goroutine's values strictly increasing, and the
// set of values exactly what a single goroutine would mint with the same clock.
func TestConcurrentMillion(t *testing.T) {
	const goroutines = 64
	total := 1_000_000
	if testing.Short() {
		total = 100_000
	}
	per := total / goroutines
	total = per * goroutines
	const start = 1795985850993
	g := identifier.New(func() int64 { return start }) // frozen: forces counter roll-over
	seqs := make([][]uint64, goroutines)
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			vs := make([]uint64, 0, per)
			ss := make([]string, 0, per)
			for i := 0; i < per; i++ {
				id := g.Ascending(identifier.Part)
				ss = append(ss, id)
				vs = append(vs, decodeFast(id))
			}
			seqs[w], ids[w] = vs, ss
		})
	}
	wg.Wait()

	all := make([]uint64, 0, total)
	seen := make(map[string]struct{}, total)
	for w := range goroutines {
		for i, v := range seqs[w] {
			if i > 0 && v <= seqs[w][i-1] {
				t.Fatalf("goroutine %d id %d: %012x not > %012x", w, i, v, seqs[w][i-1])
			}
			if _, dup := seen[ids[w][i]]; dup {
				t.Fatalf("duplicate id %q", ids[w][i])
			}
			seen[ids[w][i]] = struct{}{}
		}
		all = append(all, seqs[w]...)
	}
	slices.Sort(all)
	for i := 1; i < len(all); i++ {
		if all[i] == all[i-1] {
			t.Fatalf("duplicate 48-bit value %012x", all[i])
		}
	}
	// The same clock, minted sequentially, yields exactly the same values.
	ref := identifier.New(func() int64 { return start })
	for i := 0; i < total; i++ {
		if v := decodeFast(ref.Ascending(identifier.Part)); v != all[i] {
			t.Fatalf("value %d: concurrent %012x, sequential %012x", i, all[i], v)
		}
	}
}

func decodeFast(id string) uint64 {
	i := strings.IndexByte(id, '_')
	v, err := strconv.ParseUint(id[i+1:i+13], 16, 64)
	if err != nil {
		panic(err)
	}
	return v
}

func TestClockBackwardsAndFrozen(t *testing.T) {
	c := newClock(1_000_000)
	g := identifier.New(c.now)
	var prev uint64
	mint := func(step string) {
		t.Helper()
		v := decode(t, g.Ascending(identifier.Message))
		if v <= prev {
			t.Fatalf("%s: %012x not > %012x", step, v, prev)
		}
		prev = v
	}
	mint("first")
	if prev != 1_000_000*0x1000+1 {
		t.Fatalf("first value %x, want ms*0x1000+1", prev)
	}
	for i := 0; i < 10; i++ {
		mint("frozen")
	}
	c.set(999_000) // one second backwards
	for i := 0; i < 100; i++ {
		mint("backwards")
	}
	if prev>>12 != 1_000_000 {
		t.Fatalf("after backwards step, ms field = %d, want the last timestamp 1000000 kept", prev>>12)
	}
	c.set(0)
	mint("epoch")
	c.set(1_000_001)
	mint("forward")
	if prev != 1_000_001*0x1000+1 {
		t.Fatalf("forward step: value %x, want counter reset to 1 in the new ms", prev)
	}
}

func TestCounterRollsIntoNextMillisecond(t *testing.T) {
	const ms = 5_000_000
	c := newClock(ms)
	g := identifier.New(c.now)
	var vals []uint64
	for i := 0; i < 4095*2+10; i++ {
		vals = append(vals, decode(t, g.Ascending(identifier.Part)))
	}
	for i, v := range vals {
		if i > 0 && v <= vals[i-1] {
			t.Fatalf("id %d not increasing", i)
		}
		if ctr := v & 0xfff; ctr == 0 {
			t.Fatalf("id %d has counter 0", i)
		}
	}
	if vals[4094] != ms*0x1000+4095 {
		t.Fatalf("4095th value %x, want %x", vals[4094], ms*0x1000+4095)
	}
	if vals[4095] != (ms+1)*0x1000+1 {
		t.Fatalf("4096th value %x, want next ms counter 1 = %x", vals[4095], (ms+1)*0x1000+1)
	}
	if vals[8190] != (ms+2)*0x1000+1 {
		t.Fatalf("8191st value %x, want %x", vals[8190], (ms+2)*0x1000+1)
	}
	// The real clock catching up with the borrowed millisecond keeps counting.
	c.set(ms + 2)
	v := decode(t, g.Ascending(identifier.Part))
	if v != (ms+2)*0x1000+11 {
		t.Fatalf("clock reached borrowed ms: %x, want %x", v, (ms+2)*0x1000+11)
	}
	c.set(ms + 3)
	if v := decode(t, g.Ascending(identifier.Part)); v != (ms+3)*0x1000+1 {
		t.Fatalf("clock passed borrowed ms: %x, want %x", v, (ms+3)*0x1000+1)
	}
}

// traceIDs extracts IDs minted by the real OpenCode 1.18.33 from the traces
// (copied from ../shared/traces into testdata/traces).
func traceIDs(t *testing.T) map[identifier.Prefix][]string {
	t.Helper()
	files, _ := filepath.Glob("testdata/traces/*.event.sse")
	if len(files) == 0 {
		t.Fatal("no traces in testdata/traces")
	}
	re := regexp.MustCompile(`\b(ses|msg|prt|evt)_[0-9A-Za-z]{26}\b`)
	out := map[identifier.Prefix][]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllSubmatch(b, -1) {
			p := identifier.Prefix(m[1])
			if len(out[p]) < 20 && !slices.Contains(out[p], string(m[0])) {
				out[p] = append(out[p], string(m[0]))
			}
		}
	}
	return out
}

func TestCheckAcceptsTraceIDs(t *testing.T) {
	ids := traceIDs(t)
	for _, p := range []identifier.Prefix{identifier.Session, identifier.Message, identifier.Part, identifier.Event} {
		if len(ids[p]) == 0 {
			t.Fatalf("no %s_ IDs found in the traces", p)
		}
		for _, id := range ids[p] {
			if err := identifier.Check(p, id); err != nil {
				t.Errorf("Check(%s, %q) = %v", p, id, err)
			}
			if !idForm.MatchString(id) {
				t.Errorf("trace ID %q is not of our minted form (12 hex + 14 base62)", id)
			}
			if len(id) != len(p)+27 {
				t.Errorf("trace ID %q has length %d, ours have %d", id, len(id), len(p)+27)
			}
			for _, other := range allPrefixes {
				if other != p && identifier.Check(other, id) == nil {
					t.Errorf("Check(%s, %q) accepted an ID of another type", other, id)
				}
			}
		}
	}
}

func TestCheck(t *testing.T) {
	long := func(n int) string { return "msg_" + strings.Repeat("a", n-4) }
	tests := []struct {
		p    identifier.Prefix
		id   string
		want bool
	}{
		{identifier.Session, "ses_dd6e6bd8effeLKJPFpVbLMAbIK", true},
		{identifier.Message, "msg_22919428a001hfLAHytsBHTWtJ", true},
		{identifier.Message, "msg_2291a2252001TRACEDUPL01ab", true}, // client-chosen, 25 chars
		{identifier.Message, "msg_a", true},
		{identifier.Message, "msg_a-b_c", true},
		{identifier.Message, long(identifier.MaxLen), true},
		{identifier.Message, long(identifier.MaxLen + 1), false},
		{identifier.Message, long(1000), false},
		{identifier.Message, "ses_dd6e6bd8effeLKJPFpVbLMAbIK", false}, // wrong prefix
		{identifier.Session, "msg_22919428a001hfLAHytsBHTWtJ", false},
		{identifier.Message, "MSG_22919428a001hfLAHytsBHTWtJ", false},
		{identifier.Message, "msg22919428a001hfLAHytsBHTWtJ", false}, // no underscore
		{identifier.Message, "msg-22919428a001hfLAHytsBHTWtJ", false},
		{identifier.Message, "msg_", false}, // empty body
		{identifier.Message, "msg", false},
		{identifier.Message, "", false},
		{identifier.Message, "_abc", false},
		{identifier.Message, "msg_abcé", false}, // non-ASCII
		{identifier.Message, "msg_日本", false},
		{identifier.Message, "msg_ab\xff", false}, // invalid UTF-8
		{identifier.Message, "msg_ab cd", false},
		{identifier.Message, "msg_ab\x00", false},
		{identifier.Message, "msg_ab/cd", false},
		{identifier.Message, "msg_ab.cd", false},
		{identifier.Message, "msg_ab\ncd", false},
		{identifier.Message, " msg_abc", false},
		{identifier.Event, "evt_bogus", true},
	}
	for _, tt := range tests {
		name := string(tt.p) + "/" + tt.id
		if len(name) > 40 {
			name = name[:40]
		}
		t.Run(name, func(t *testing.T) {
			err := identifier.Check(tt.p, tt.id)
			if (err == nil) != tt.want {
				t.Fatalf("Check(%q, %q) = %v, want ok=%v", tt.p, tt.id, err, tt.want)
			}
			if err != nil && !errors.Is(err, identifier.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}

// checkInvariants is what an accepted ID must satisfy.
func checkInvariants(t *testing.T, p identifier.Prefix, id string) {
	t.Helper()
	if !strings.HasPrefix(id, string(p)+"_") {
		t.Fatalf("accepted %q without prefix %q", id, string(p)+"_")
	}
	if len(id) > identifier.MaxLen {
		t.Fatalf("accepted %q of length %d > %d", id, len(id), identifier.MaxLen)
	}
	body := id[len(p)+1:]
	if body == "" {
		t.Fatalf("accepted %q with an empty body", id)
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			t.Fatalf("accepted %q with byte %q in the body", id, c)
		}
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("ses", "ses_dd6e6bd8effeLKJPFpVbLMAbIK")
	f.Add("msg", "msg_")
	f.Add("msg", "msgabc")
	f.Add("prt", "prt_abcé")
	f.Add("", "_")
	f.Fuzz(func(t *testing.T, prefix, id string) {
		p := identifier.Prefix(prefix)
		err := identifier.Check(p, id)
		if err != nil {
			if !errors.Is(err, identifier.ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			return
		}
		checkInvariants(t, p, id)
	})
}

// TestRapidAscendingStrings: IDs minted in sequence, with any clock
// behaviour, are strictly ascending as strings (and descending ones strictly
// descending) as long as the 48-bit field does not wrap during the test.
func TestRapidAscendingStrings(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		// Pick a 48-bit window (2^36 ms each) and a start well inside it.
		window := rapid.Int64Range(0, 40).Draw(rt, "window")
		const span = int64(1) << 36
		steps := rapid.SliceOfN(rapid.Int64Range(-2000, 2000), 1, 300).Draw(rt, "steps")
		burst := rapid.IntRange(1, 5000).Draw(rt, "burst")
		startOff := rapid.Int64Range(2000*300, span-2000*300-int64(len(steps)*burst/4095)-10).Draw(rt, "start")
		c := newClock(window*span + startOff)
		g := identifier.New(c.now)
		var prevA, prevD string
		for i, s := range steps {
			c.step(s)
			n := 1
			if i == 0 {
				n = burst
			}
			for range n {
				a := g.Ascending(identifier.Message)
				d := g.Descending(identifier.Session)
				if prevA != "" && a <= prevA {
					rt.Fatalf("ascending %q not > %q", a, prevA)
				}
				if prevD != "" && d >= prevD {
					rt.Fatalf("descending %q not < %q", d, prevD)
				}
				if err := identifier.Check(identifier.Message, a); err != nil {
					rt.Fatalf("minted %q rejected: %v", a, err)
				}
				if err := identifier.Check(identifier.Session, d); err != nil {
					rt.Fatalf("minted %q rejected: %v", d, err)
				}
				prevA, prevD = a, d
			}
		}
	})
}
