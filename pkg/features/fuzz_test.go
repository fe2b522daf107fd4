package features

import (
	"testing"
	"time"

	"github.com/hashicorp/go-multierror"
)

// FuzzParse feeds arbitrary values to every flag type. Reading a flag must
// never panic, and the value in effect is either the parsed value or the
// default with a problem reported.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"", " ", "true", "FALSE", "1", "maybe", "\x00", "ünï",
		"30s", "-3s", "0", "0s", "1h2m3.5s", "9223372036854775807ns", "9223372036854775808ns",
		"-9223372036854775808", "99999999999999999999", "+0", "1e3", ".5s", "5 s", "abc",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		lookup := func(string) (string, bool) { return raw, true }
		r := newRegistry(lookup)
		b := register(r, "B", true, "")
		s := register(r, "S", "configmap", "", oneOf("configmap", "lease"))
		d := register(r, "D", 30*time.Second, "")
		i := register(r, "I", 7, "")

		if got := d.Get(); got <= 0 {
			t.Fatalf("duration %q gave non-positive %v", raw, got)
		}
		b.Get()
		s.Get()
		i.Get()

		reported := map[string]bool{}
		if err := r.Validate(); err != nil {
			for _, e := range err.(*multierror.Error).Errors {
				reported[e.(*valueError).Name] = true
			}
		}
		// What each flag should hold: the parsed value when it parses and
		// passes validation, otherwise the default with a reported problem.
		want := map[string]string{}
		if v, err := parseBool(raw); err == nil {
			want["B"] = strconvFormatBool(v)
		}
		if raw == "configmap" || raw == "lease" {
			want["S"] = raw
		}
		if v, err := parseDuration(raw); err == nil {
			want["D"] = formatDuration(v)
		}
		if v, err := parseInt(raw); err == nil {
			want["I"] = formatInt(v)
		}
		for _, fi := range r.All() {
			if !fi.IsSet {
				t.Fatalf("%s: IsSet false for a present variable", fi.Name)
			}
			w, valid := want[fi.Name]
			switch {
			case raw == "":
				if fi.Value != fi.Default || reported[fi.Name] {
					t.Fatalf("%s empty: value %q reported=%v", fi.Name, fi.Value, reported[fi.Name])
				}
			case valid:
				if fi.Value != w || reported[fi.Name] {
					t.Fatalf("%s=%q: value %q reported=%v, want %q", fi.Name, raw, fi.Value, reported[fi.Name], w)
				}
			default:
				if fi.Value != fi.Default || !reported[fi.Name] {
					t.Fatalf("%s=%q: value %q reported=%v, want the default reported", fi.Name, raw, fi.Value, reported[fi.Name])
				}
			}
		}
	})
}

// FuzzParseDuration checks the duration parser directly: no panic, and a value
// it accepts is positive and survives a round trip through its formatting.
func FuzzParseDuration(f *testing.F) {
	for _, seed := range []string{"30s", "-3s", "abc", "0", "1m30s", "2562047h47m16.854775807s", "1ns"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		d, err := parseDuration(raw)
		if err != nil {
			return
		}
		if d <= 0 {
			t.Fatalf("%q accepted as %v", raw, d)
		}
		back, err := parseDuration(formatDuration(d))
		if err != nil || back != d {
			t.Fatalf("%q -> %v -> %v, %v", raw, d, back, err)
		}
	})
}

// FuzzParseInt checks the integer parser: no panic and round trip.
func FuzzParseInt(f *testing.F) {
	for _, seed := range []string{"0", "-1", "+5", " 9 ", "0x10", "99999999999999999999", "-9223372036854775808"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := parseInt(raw)
		if err != nil {
			return
		}
		if back, err := parseInt(formatInt(v)); err != nil || back != v {
			t.Fatalf("%q -> %d -> %d, %v", raw, v, back, err)
		}
	})
}

// FuzzParseBool checks the boolean parser: no panic and round trip.
func FuzzParseBool(f *testing.F) {
	for _, seed := range []string{"true", "F", "1", "maybe", "", " TRUE "} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := parseBool(raw)
		if err != nil {
			return
		}
		if back, err := parseBool(strconvFormatBool(v)); err != nil || back != v {
			t.Fatalf("%q -> %v -> %v, %v", raw, v, back, err)
		}
	})
}
