package features

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestHostileValuesFallBackToDefaults sets every kind of flag to values an
// operator (or a templating mistake) could put into a pod spec. Each one
// is rejected with a valueError naming the variable, the value and the
// default, which is used instead; none panics and none is half-applied. An
// empty value means unset.
func TestHostileValuesFallBackToDefaults(t *testing.T) {
	hostile := map[string][]string{
		"duration": {" ", "30", "30 s", "-5s", "0", "0s", "1e400s", "9999999999999999999h", "30s\x00", "３０s", "NaN", strings.Repeat("9", 5000) + "s"},
		"bool":     {"yes", "on", "tru", "1.0", "true\n\x00", strings.Repeat("t", 5000)},
		"int":      {"0x10", "1e3", "1.5", "99999999999999999999", "-", "٣", " 7 7 "},
		"oneof":    {"Lease", "lease ", "configmaps", "\x00lease"},
		"ttl":      {"999ms", "1ns", "-1s"},
	}
	// The empty value is not a problem: it means unset.
	empty := newRegistry(newEnv("X", "").lookup)
	if f := register(empty, "X", 7*time.Second, "d"); f.Get() != 7*time.Second || empty.Validate() != nil {
		t.Fatalf("empty value: %v, %v", f.Get(), empty.Validate())
	}
	for typ, values := range hostile {
		for _, raw := range values {
			e := newEnv("X", raw)
			r := newRegistry(e.lookup)
			var get func() string
			var def string
			switch typ {
			case "duration":
				f := register(r, "X", 7*time.Second, "d")
				get, def = func() string { return f.Get().String() }, "7s"
			case "ttl":
				f := register(r, "X", 30*time.Second, "d", withValidator(LeaderElectionTTL.s.validate))
				get, def = func() string { return f.Get().String() }, "30s"
			case "bool":
				f := register(r, "X", true, "b")
				get, def = func() string { return strconvFormatBool(f.Get()) }, "true"
			case "int":
				f := register(r, "X", 3, "i")
				get, def = func() string { return formatInt(f.Get()) }, "3"
			case "oneof":
				f := register(r, "X", lockConfigMap, "s", oneOf(lockConfigMap, lockLease))
				get, def = f.Get, lockConfigMap
			}
			if got := get(); got != def {
				t.Errorf("%s X=%.20q: value %q, want the default %q", typ, raw, got, def)
			}
			var ve *valueError
			if err := r.Validate(); !errors.As(err, &ve) || ve.Name != "X" || ve.Value != raw || ve.Default != def {
				t.Errorf("%s X=%.20q: Validate = %v, want a valueError naming X, the value and the default", typ, raw, err)
			}
		}
	}
}
