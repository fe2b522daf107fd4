package lockmeta

import (
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WriteHandover writes what json.Marshal writes, byte for byte, whether it
// takes its own path (a handover that names only a holder that needs no
// escaping) or encoding/json's.
func TestWriteHandoverIsJSONMarshal(t *testing.T) {
	at := metav1.NewTime(time.Date(2026, 11, 28, 13, 0, 0, 0, time.UTC))
	for _, h := range []Handover{
		{Holder: "stable-7d9f-x2"},
		{Holder: "istiod-1_3f2a.example:8080"},
		{Holder: "a b"},
		{Holder: `q"uote`},
		{Holder: `back\slash`},
		{Holder: "<b>&"},
		{Holder: "é"},
		{Holder: "\x7f"},
		{Holder: "\xff"},
		{Holder: "tab\t"},
		{Holder: "stable-1", Candidate: "canary-2", CandidateKey: "canary", RequestTime: &at},
		{Holder: "stable-1", FenceMillis: 1500},
		{Holder: "stable-1", HonoursFence: true},
		{Candidate: "canary-2"},
	} {
		want, err := json.Marshal(h)
		if err != nil {
			t.Fatal(err)
		}
		var meta metav1.ObjectMeta
		WriteHandover(&meta, h)
		if got := meta.Annotations[HandoverAnnotationKey]; got != string(want) {
			t.Errorf("%+v: WriteHandover wrote %s, json.Marshal %s", h, got, want)
		}
	}
}

// ReadHandover reads what json.Unmarshal reads, whether it takes its own
// path ({"holder":"..."} exactly, with a plain holder) or encoding/json's;
// an annotation that does not decode reads as no handover.
func TestReadHandoverIsJSONUnmarshal(t *testing.T) {
	for _, raw := range []string{
		`{"holder":"stable-1"}`,
		`{"holder":""}`,
		`{"holder":"a b"}`,
		`{"holder":"a\"b"}`,
		`{"holder":"a\\b"}`,
		`{"holder":"\u003c"}`,
		`{"holder":"<"}`,
		`{"holder":"é"}`,
		`{"holder": "stable-1"}`,
		`{"Holder":"stable-1"}`,
		`{"holder":"stable-1","candidate":"c"}`,
		`{"holder":"x"}{"holder":"y"}`,
		`{"holder":"x"} `,
		`{"holder":"x","holder":"y"}`,
		`{"holder":"`,
		`{"holder":"x`,
		`{"holder":"}`,
		`{"holder":""}"}`,
		`null`,
		``,
	} {
		var want Handover
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			want = Handover{}
		}
		if got := ReadHandover(map[string]string{HandoverAnnotationKey: raw}); got != want {
			t.Errorf("%s: ReadHandover read %+v, json.Unmarshal %+v", raw, got, want)
		}
	}
}

// ReadSessionMark reads what json.Unmarshal reads, whether it takes its own
// path (a mark as json.Marshal writes one with plain strings) or
// encoding/json's; a mark that does not decode, or names no holder, reads
// as none. Every mark json.Marshal writes with plain strings takes the own
// path.
func TestReadSessionMarkIsJSONUnmarshal(t *testing.T) {
	check := func(raw string) {
		t.Helper()
		var want SessionMark
		wantOK := json.Unmarshal([]byte(raw), &want) == nil && want.Holder != ""
		if !wantOK {
			want = SessionMark{}
		}
		got, ok := ReadSessionMark(map[string]string{SessionAnnotationKey: raw})
		if got != want || ok != wantOK {
			t.Errorf("%s: ReadSessionMark read %+v, %v; json.Unmarshal %+v, %v", raw, got, ok, want, wantOK)
		}
	}
	values := []string{"", "stable-1", "meshd-session-a/4f2c9e1d", "a b", `q"uote`, `back\slash`, "<b>&", "é", "\x7f", "\xff", "tab\t", "}", `","mixed":true}`}
	plain := 0
	for _, holder := range values {
		for _, session := range values {
			for _, process := range values {
				for _, mixed := range []bool{false, true} {
					m := SessionMark{Holder: holder, Session: session, Process: process, Mixed: mixed}
					raw, err := json.Marshal(m)
					if err != nil {
						t.Fatal(err)
					}
					check(string(raw))
					if PlainJSON(holder) && PlainJSON(session) && PlainJSON(process) {
						plain++
						if _, ok := readPlainMark(string(raw)); !ok {
							t.Errorf("%s: a mark with plain strings was left to encoding/json", raw)
						}
					}
				}
			}
		}
	}
	if plain == 0 {
		t.Fatal("no mark with plain strings was generated")
	}
	for _, raw := range []string{
		`{"holder":"a","session":"s","process":"p","mixed":true}`,
		`{"holder":"a","mixed":false}`,
		`{"holder":"a","mixed":true,"session":"s"}`,
		`{"holder":"a","process":"p","session":"s"}`,
		`{"holder":"a","session":"s","session":"t"}`,
		`{"session":"s","holder":"a"}`,
		`{"holder": "a"}`,
		`{"holder":"a"} `,
		`{"holder":"a"}}`,
		`{"holder":"a","session":"s}`,
		`{"holder":"a","session":"s`,
		`{"holder":"a","session":"s\"t"}`,
		`{"holder":"a","session":"\u003c"}`,
		`{"holder":"a","mixed":true`,
		`{"Holder":"a"}`,
		`{"holder":"`,
		`{"holder":""}`,
		`null`,
		``,
	} {
		check(raw)
	}
}
