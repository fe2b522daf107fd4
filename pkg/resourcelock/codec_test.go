package resourcelock

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// fixtureCase describes what decoding one file of testdata/records yields.
type fixtureCase struct {
	file string
	// want is the decoded record; nil means the fixture is corrupt.
	want *Record
	// canonical marks fixtures whose bytes are exactly what EncodeRecord
	// produces for the decoded record (istiod's own encoding).
	canonical bool
}

func fixtureCases(tb testing.TB) []fixtureCase {
	tm := func(s string) metav1.Time { return mustTime(tb, s) }
	acquire, renew := tm("2026-01-02T03:04:05Z"), tm("2026-01-02T03:04:20Z")
	return []fixtureCase{
		{file: "valid.json", canonical: true, want: &Record{
			HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30,
			AcquireTime: acquire, RenewTime: renew, LeaderTransitions: 3,
		}},
		{file: "released.json", canonical: true, want: &Record{
			LeaseDurationSeconds: 1,
			AcquireTime:          tm("2026-01-02T03:05:00Z"), RenewTime: tm("2026-01-02T03:05:00Z"),
			LeaderTransitions: 3,
		}},
		{file: "remote-key.json", canonical: true, want: &Record{
			HolderIdentity: "istiod-remote-7f9c", HolderKey: "^canary", LeaseDurationSeconds: 30,
			AcquireTime: acquire, RenewTime: renew, LeaderTransitions: 1,
		}},
		{file: "no-key.json", want: &Record{
			HolderIdentity: "istiod-legacy", LeaseDurationSeconds: 30,
			AcquireTime: acquire, RenewTime: renew,
		}},
		{file: "default-key.json", canonical: true, want: &Record{
			HolderIdentity: "istiod-b", HolderKey: "default", LeaseDurationSeconds: 30,
			AcquireTime: acquire, RenewTime: renew, LeaderTransitions: 5,
		}},
		{file: "future-times.json", canonical: true, want: &Record{
			HolderIdentity: "istiod-skewed", HolderKey: "canary", LeaseDurationSeconds: 30,
			AcquireTime: tm("2099-12-31T23:59:00Z"), RenewTime: tm("2099-12-31T23:59:30Z"), LeaderTransitions: 2,
		}},
		{file: "unknown-fields.json", want: &Record{
			HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30,
			AcquireTime: acquire, RenewTime: renew, LeaderTransitions: 3,
		}},
		{file: "fractional-seconds.json", want: &Record{
			// Sub-second digits (and offsets) are accepted, as by istiod, and
			// dropped: the wire format has second precision.
			HolderIdentity: "istiod-a", HolderKey: "canary", LeaseDurationSeconds: 30,
			AcquireTime: acquire, RenewTime: renew, LeaderTransitions: 3,
		}},
		{file: "corrupt-not-json.txt"},
		{file: "corrupt-wrong-types.json"},
		{file: "corrupt-truncated.json"},
		{file: "corrupt-bad-time.json"},
		{file: "corrupt-empty.txt"},
		{file: "corrupt-time-out-of-range.json"},
		{file: "negative-duration.json"},
		{file: "negative-transitions.json"},
		{file: "trailing-garbage.json"},
	}
}

// TestFixturesAllCovered keeps the table above in step with the directory:
// every record fixture must say what it decodes to.
func TestFixturesAllCovered(t *testing.T) {
	entries, err := os.ReadDir(recordsDir)
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, c := range fixtureCases(t) {
		known[c.file] = true
	}
	for _, e := range entries {
		name := e.Name()
		switch filepath.Ext(name) {
		case ".md", ".yaml":
			continue
		}
		if !known[name] {
			t.Errorf("fixture %s has no entry in fixtureCases", name)
		}
		delete(known, name)
	}
	for name := range known {
		t.Errorf("fixtureCases names %s, which is not in %s", name, recordsDir)
	}
}

func TestDecodeRecordFixtures(t *testing.T) {
	for _, c := range fixtureCases(t) {
		t.Run(c.file, func(t *testing.T) {
			raw := readFixture(t, c.file)
			got, err := DecodeRecord(raw)
			if c.want == nil {
				if !errors.Is(err, ErrCorruptRecord) {
					t.Fatalf("DecodeRecord = %v, %v; want an error wrapping ErrCorruptRecord", got, err)
				}
				if got != nil {
					t.Errorf("DecodeRecord returned a record %s along with its error", fmtRecord(*got))
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if !sameRecord(*got, *c.want) {
				t.Errorf("DecodeRecord = %s\nwant            %s", fmtRecord(*got), fmtRecord(*c.want))
			}
		})
	}
}

// TestEncodeRecordWireFormat checks wire compatibility with istiod: the
// canonical fixtures, as istiod writes them, re-encode byte for byte (field
// order, RFC 3339 second-precision UTC times, no trailing newline).
func TestEncodeRecordWireFormat(t *testing.T) {
	for _, c := range fixtureCases(t) {
		if !c.canonical {
			continue
		}
		t.Run(c.file, func(t *testing.T) {
			raw := readFixture(t, c.file)
			rec, err := DecodeRecord(raw)
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			if got := EncodeRecord(*rec); !bytes.Equal(got, raw) {
				t.Errorf("EncodeRecord(DecodeRecord(x)) != x\n got: %s\nwant: %s", got, raw)
			}
		})
	}
}

func TestEncodeRecordLiteral(t *testing.T) {
	// The example record of the lock contract, built field by field.
	r := Record{
		HolderIdentity:       "istiod-a",
		HolderKey:            "canary",
		LeaseDurationSeconds: 30,
		AcquireTime:          mustTime(t, "2026-01-02T03:04:05Z"),
		RenewTime:            mustTime(t, "2026-01-02T03:04:20Z"),
		LeaderTransitions:    3,
	}
	const want = `{"holderIdentity":"istiod-a","holderKey":"canary","leaseDurationSeconds":30,"acquireTime":"2026-01-02T03:04:05Z","renewTime":"2026-01-02T03:04:20Z","leaderTransitions":3}`
	if got := string(EncodeRecord(r)); got != want {
		t.Errorf("EncodeRecord =\n%s\nwant\n%s", got, want)
	}

	// Zero times are written as null, as client-go does, and read back as zero.
	empty := EncodeRecord(Record{})
	const wantEmpty = `{"holderIdentity":"","holderKey":"","leaseDurationSeconds":0,"acquireTime":null,"renewTime":null,"leaderTransitions":0}`
	if string(empty) != wantEmpty {
		t.Errorf("EncodeRecord(Record{}) = %s, want %s", empty, wantEmpty)
	}
	back, err := DecodeRecord(empty)
	if err != nil || !sameRecord(*back, Record{}) {
		t.Errorf("DecodeRecord(%s) = %v, %v; want an empty record", empty, back, err)
	}
}

func TestDecodeRecordEdgeCases(t *testing.T) {
	valid := string(readFixture(t, "valid.json"))
	big := `{"holderIdentity":"` + strings.Repeat("a", 1<<20) + `"}`
	atLimit := `{"holderIdentity":"` + strings.Repeat("a", maxRecordBytes-len(`{"holderIdentity":""}`)) + `"}`
	cases := []struct {
		name    string
		raw     string
		corrupt bool
	}{
		{name: "oversized 1 MiB value", raw: big, corrupt: true},
		{name: "one byte over the limit", raw: atLimit + " ", corrupt: true},
		{name: "exactly at the limit", raw: atLimit},
		{name: "surrounding whitespace", raw: " \n" + valid + "\n\t "},
		{name: "two records", raw: valid + valid, corrupt: true},
		{name: "JSON array", raw: "[" + valid + "]", corrupt: true},
		{name: "JSON string", raw: `"istiod-a"`, corrupt: true},
		{name: "empty object", raw: `{}`},
		{name: "fractional duration", raw: `{"leaseDurationSeconds":1.5}`, corrupt: true},
		{name: "duration overflows int", raw: `{"leaseDurationSeconds":99999999999999999999}`, corrupt: true},
		{name: "time not a string", raw: `{"renewTime":1767323045}`, corrupt: true},
		{name: "null times", raw: `{"holderIdentity":"x","acquireTime":null,"renewTime":null}`},
		{name: "only whitespace", raw: " \n", corrupt: true},
		{name: "NUL byte", raw: "\x00", corrupt: true},
		// A JSON null is an empty record to encoding/json, and so to istiod.
		{name: "null", raw: `null`},
		{name: "year 0 in UTC", raw: `{"renewTime":"0000-01-01T00:00:00Z"}`},
		{name: "year 0 with a fraction", raw: `{"renewTime":"0000-01-01T00:00:00.9Z"}`},
		{name: "year 9999 with a fraction", raw: `{"renewTime":"9999-12-31T23:59:59.999999999Z"}`},
		{name: "year -1 in UTC", raw: `{"renewTime":"0000-01-01T00:59:59+01:00"}`, corrupt: true},
		{name: "year 10000 in UTC", raw: `{"acquireTime":"9999-12-31T23:30:00-01:00"}`, corrupt: true},
		{name: "leap second", raw: `{"renewTime":"2016-12-31T23:59:60Z"}`, corrupt: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := DecodeRecord([]byte(c.raw))
			if c.corrupt {
				if !errors.Is(err, ErrCorruptRecord) || got != nil {
					t.Errorf("DecodeRecord = %v, %v; want nil and an error wrapping ErrCorruptRecord", got, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeRecord: %v", err)
			}
			// Whatever is accepted is at second precision and re-encodes
			// to something readable.
			for _, tm := range []metav1.Time{got.AcquireTime, got.RenewTime} {
				if tm.Nanosecond() != 0 {
					t.Errorf("time %s keeps a fraction of a second", tm.UTC().Format(time.RFC3339Nano))
				}
			}
			// (Unless the canonical form outgrows maxRecordBytes, as the
			// at-limit record does: EncodeRecord adds the missing fields.)
			if enc := EncodeRecord(*got); len(enc) <= maxRecordBytes {
				if _, err := DecodeRecord(enc); err != nil {
					t.Errorf("re-decoding %s: %v", abbrev(enc), err)
				}
			}
		})
	}
}

// FuzzDecodeRecord feeds arbitrary annotation values to DecodeRecord. It must
// never panic, must return either a record or an ErrCorruptRecord error, and
// what it accepts must survive EncodeRecord and a second DecodeRecord
// unchanged: a lock never writes a record it could not read back.
func FuzzDecodeRecord(f *testing.F) {
	entries, err := os.ReadDir(recordsDir)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		f.Add(readFixture(f, e.Name()))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		rec, err := DecodeRecord(raw)
		if err != nil {
			if rec != nil {
				t.Fatalf("record %s returned along with error %v", fmtRecord(*rec), err)
			}
			if !errors.Is(err, ErrCorruptRecord) {
				t.Fatalf("error %v does not wrap ErrCorruptRecord", err)
			}
			return
		}
		if rec == nil {
			t.Fatal("nil record without an error")
		}
		enc := EncodeRecord(*rec)
		if len(enc) > maxRecordBytes {
			// The canonical form can be longer than the input (missing
			// fields are added, "<" becomes "\u003c"): a record just under
			// the limit may not fit once re-encoded. Not a property of
			// records of a sane size, which is what this target checks.
			return
		}
		again, err := DecodeRecord(enc)
		if err != nil {
			t.Fatalf("re-decoding %s (from %q): %v", abbrev(enc), abbrev(raw), err)
		}
		if !sameRecord(*rec, *again) {
			t.Fatalf("round trip changed the record\nfirst:  %s\nsecond: %s\nencoded: %s", fmtRecord(*rec), fmtRecord(*again), abbrev(enc))
		}
		if enc2 := EncodeRecord(*again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding is not stable: %s then %s", abbrev(enc), abbrev(enc2))
		}
	})
}

// EncodeRecord writes what json.Marshal writes, byte for byte, whether it
// takes its own path (strings that need no escaping) or encoding/json's:
// the record is the wire format istiod reads.
func TestEncodeRecordIsJSONMarshal(t *testing.T) {
	strs := []string{"", "stable-7d9f-x2", "istiod-canary-1_3f2a", "^remote", "a b", `q"uote`, `back\slash`,
		"<html>&", "tab\there", "é", "\u2028", "\x7f", "\xff"}
	base := time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC)
	times := []time.Time{{}, base, base.Add(123456789 * time.Nanosecond), base.In(time.FixedZone("x", 5*3600+1800)),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), base.Local()}
	ints := []int{0, 1, 15, -3, math.MaxInt32, math.MinInt64}
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(n int) int { return rng.IntN(n) }
	for i := range 5000 {
		r := Record{
			HolderIdentity:       strs[pick(len(strs))],
			HolderKey:            strs[pick(len(strs))],
			LeaseDurationSeconds: ints[pick(len(ints))],
			AcquireTime:          metav1.NewTime(times[pick(len(times))]),
			RenewTime:            metav1.NewTime(times[pick(len(times))]),
			LeaderTransitions:    ints[pick(len(ints))],
		}
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("json.Marshal(%+v): %v", r, err)
		}
		if got := EncodeRecord(r); !bytes.Equal(got, want) {
			t.Fatalf("record %d %+v:\nEncodeRecord %s\njson.Marshal %s", i, r, got, want)
		}
	}
}
