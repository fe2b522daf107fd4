// Package lockmeta holds the annotations meshd's protocols write on a lock
// object beside the record: the handover between a holder and a candidate,
// the session a holder renews through, the Pod a holder runs in, and the
// holder key of a coordinator's preferred holder. istiod and client-go
// ignore these annotations and keep them when they update the object; each
// value names the holder it was written for, so that a value left behind by
// an earlier writer is recognised and means nothing.
package lockmeta

import (
	"encoding/json"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LeasePreferredHolderKeyAnnotation is the Lease annotation in which a
// coordinator writes the holder key of spec.preferredHolder. It goes
// with spec.preferredHolder and is removed with it.
const LeasePreferredHolderKeyAnnotation = "meshd.io/preferred-holder-key"

// HandoverAnnotationKey is the annotation, beside the record, in which meshd
// instances coordinate a handover. istiod and client-go ignore it and keep it
// when they update the object, so its Holder field tells whether the current
// holder is a meshd instance that honours handover requests: it is one when
// Holder equals the record's holderIdentity.
const HandoverAnnotationKey = "leader.meshd.io/handover"

// Handover is the content of the HandoverAnnotationKey annotation.
type Handover struct {
	// Holder is the meshd instance that wrote the current record and will
	// honour a request to hand the lock over.
	Holder string `json:"holder"`
	// Candidate, when set, asks Holder to stop and hand the lock to it.
	Candidate string `json:"candidate,omitempty"`
	// CandidateKey is the candidate's holder key, which the holder checks
	// before it agrees.
	CandidateKey string `json:"candidateKey,omitempty"`
	// RequestTime is when the candidate asked, by its clock. A holder ignores
	// a request that may be older than its own lease, so that a request left
	// behind by a candidate that is gone is never honoured later: by its own
	// clock when it met the request after a write of its own that did not
	// carry it, by comparing this time with its wall clock otherwise.
	RequestTime *metav1.Time `json:"requestTime,omitempty"`
	// Answer is Holder's answer to the request of Candidate: AnswerAccepted
	// or AnswerRefused; empty while the request is pending. Readers that do
	// not know the field (older meshd) see a pending request.
	Answer string `json:"answer,omitempty"`
	// StopWithinMillis comes with an accepted answer: the holder's work will
	// have stopped, and the record will name Candidate, within this many
	// milliseconds after the answer is observed. A duration rather than a
	// time, so that the candidate measures it on its own clock, as it does
	// leases. It is never longer than the holder's lease.
	StopWithinMillis int64 `json:"stopWithinMillis,omitempty"`
	// AnswerTime is when the holder answered, by its clock, for people
	// reading the object; nobody's timing is computed from it.
	AnswerTime *metav1.Time `json:"answerTime,omitempty"`
	// HonoursFence comes with a request: the candidate, once named, starts
	// its work no earlier than FenceMillis after it sees the record naming
	// it. Older candidates do not write it, and a holder hands them the
	// lock only once its own fence has passed.
	HonoursFence bool `json:"honoursFence,omitempty"`
	// FenceMillis comes with an accepted answer to a request that honours
	// fences, from a holder that took the lock by force and whose work has
	// not started: the work of the holder before it may run for this many
	// milliseconds more, counted from when the answer was written. The
	// holder then names the candidate at once, and the record naming it
	// carries the value on, as do requests and withdrawals other candidates
	// write while it names it (see resourcelock): the candidate's work starts
	// no earlier than this many milliseconds after it sees that record, by
	// its own clock, which is after the fence whatever the clocks say.
	FenceMillis int64 `json:"fenceMillis,omitempty"`
}

// Answers a holder writes into Handover.Answer.
const (
	AnswerAccepted = "accepted"
	AnswerRefused  = "refused"
)

// Requested reports whether h carries a request, answered or not, addressed
// to holder.
func (h Handover) Requested(holder string) bool {
	return h.Candidate != "" && h.Holder == holder
}

// Pending reports whether h carries a request addressed to holder that it
// has not answered yet.
func (h Handover) Pending(holder string) bool {
	return h.Requested(holder) && h.Answer == ""
}

// ReadHandover decodes the annotation of an object; zero when absent or bad.
func ReadHandover(annotations map[string]string) Handover {
	raw, ok := annotations[HandoverAnnotationKey]
	if !ok {
		return Handover{}
	}
	if holder, ok := cutHolderOnly(raw); ok {
		return Handover{Holder: holder}
	}
	var h Handover
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return Handover{}
	}
	return h
}

// WriteHandover sets the annotation; a zero Handover removes it.
func WriteHandover(meta *metav1.ObjectMeta, h Handover) {
	if h == (Handover{}) {
		delete(meta.Annotations, HandoverAnnotationKey)
		return
	}
	var raw string
	if h == (Handover{Holder: h.Holder}) && PlainJSON(h.Holder) {
		raw = holderOnlyPrefix + h.Holder + holderOnlySuffix
	} else {
		b, _ := json.Marshal(h) // strings and a time: cannot fail
		raw = string(b)
	}
	if meta.Annotations == nil {
		meta.Annotations = map[string]string{}
	}
	meta.Annotations[HandoverAnnotationKey] = raw
}

// A holder writes a Handover that names only itself at every renew, and
// every candidate reads it at every new version of the lock object. Its
// JSON, {"holder":"..."}, is written and read here without encoding/json,
// byte for byte as json.Marshal writes it: the reflection of encoding/json
// costs allocations and, more, a deep stack on the election's goroutine,
// which the runtime then keeps at twice the size it needs while waiting
// (see package elector, The stack of a waiting candidate). Anything else
// goes through encoding/json.
const (
	holderOnlyPrefix = `{"holder":"`
	holderOnlySuffix = `"}`
)

// cutHolderOnly returns the holder of an annotation that is exactly
// {"holder":"..."} with a holder that needs no escaping.
func cutHolderOnly(raw string) (string, bool) {
	if len(raw) < len(holderOnlyPrefix)+len(holderOnlySuffix) || !strings.HasPrefix(raw, holderOnlyPrefix) || !strings.HasSuffix(raw, holderOnlySuffix) {
		return "", false
	}
	holder := raw[len(holderOnlyPrefix) : len(raw)-len(holderOnlySuffix)]
	return holder, PlainJSON(holder)
}

// PlainJSON reports whether json.Marshal writes s as it is between quotes:
// printable ASCII without a quote, a backslash or the characters it
// escapes for HTML (<, > and &). Such a string is written into JSON by
// hand, as the record and the commonest handover annotation are.
func PlainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c > 0x7e, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// SessionAnnotationKey is the annotation of a lock object in which a holder
// that renews through a session (one heartbeat Lease per process, see
// package election/session) names that session. Its value is the JSON of a
// SessionMark. Readers that do not know it (istiod, older meshd) ignore it
// and read the record as usual.
const SessionAnnotationKey = "meshd.io/session"

// SessionMark is what a session-aware writer leaves on a lock object next
// to the record.
type SessionMark struct {
	// Holder is the holder identity of the record the mark was written
	// with. A mark whose Holder is not the record's holder was left by an
	// earlier writer (istiod keeps annotations it does not know) and means
	// nothing.
	Holder string `json:"holder"`
	// Session names the session whose heartbeat keeps the holder alive, as
	// "<lease name>/<token>"; empty when the holder renews its record
	// itself, although it understands sessions.
	Session string `json:"session,omitempty"`
	// Process names the session of the process that wrote the record, set
	// only when that process is the holder, whether or not the session
	// keeps the holder alive (Session may be empty). Every start of a
	// process has a new session, so a process that finds a record naming
	// its own identity with another Process knows an earlier process of
	// that identity wrote it, one that may still work.
	Process string `json:"process,omitempty"`
	// Mixed is set by a holder that has seen a holder without sessions in
	// this election (istiod, client-go, older meshd): such a candidate may
	// still be waiting, so every session-aware candidate that reads the
	// mark renews its record itself too.
	Mixed bool `json:"mixed,omitempty"`
}

// ReadSessionMark decodes the mark among annotations; false when there
// is none or it cannot be decoded.
func ReadSessionMark(annotations map[string]string) (SessionMark, bool) {
	raw, ok := annotations[SessionAnnotationKey]
	if !ok {
		return SessionMark{}, false
	}
	m, plain := readPlainMark(raw)
	if !plain {
		m = SessionMark{} // readPlainMark may have read part of it
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			return SessionMark{}, false
		}
	}
	if m.Holder == "" {
		return SessionMark{}, false
	}
	return m, true
}

// readPlainMark decodes a mark written exactly as json.Marshal writes a
// SessionMark whose strings are plain (PlainJSON), without encoding/json:
// a holder that leaves its renewals to its session reads its mark at every
// renew tick, on a goroutine that keeps a small stack (see package elector,
// The stack of a waiting candidate). It returns false for anything else,
// which the caller decodes with encoding/json; what it returns is what
// json.Unmarshal returns for the same text.
func readPlainMark(raw string) (SessionMark, bool) {
	var m SessionMark
	rest, ok := strings.CutPrefix(raw, `{"holder":"`)
	if !ok {
		return m, false
	}
	if m.Holder, rest, ok = strings.Cut(rest, `"`); !ok || !PlainJSON(m.Holder) {
		return m, false
	}
	okSession, okProcess := true, true
	m.Session, rest, okSession = cutPlainField(rest, `,"session":"`)
	m.Process, rest, okProcess = cutPlainField(rest, `,"process":"`)
	if after, mixed := strings.CutPrefix(rest, `,"mixed":true`); mixed {
		m.Mixed, rest = true, after
	}
	return m, okSession && okProcess && rest == "}"
}

// cutPlainField cuts from the start of raw the string field that begins
// with key (`,"name":"`) and returns its value and what follows; raw as it
// is when it does not begin with key. ok is false when the value does not
// end or is not plain.
func cutPlainField(raw, key string) (value, rest string, ok bool) {
	rest, found := strings.CutPrefix(raw, key)
	if !found {
		return "", raw, true
	}
	value, rest, found = strings.Cut(rest, `"`)
	return value, rest, found && PlainJSON(value)
}

// HolderPodAnnotationKey is the annotation of a lock object in which a
// holder that runs in a Pod says which Pod, container and run of that
// container it is (package election/podexit). Its value is the JSON of a
// HolderPod. Readers that do not know it (istiod, client-go, older meshd)
// ignore it; writers that do not know it keep it, which is why the mark
// names the holder it was written for.
const HolderPodAnnotationKey = "leader.meshd.io/holder-pod"

// HolderPod is what a holder running in a Pod publishes next to its
// record, so that followers can watch that Pod for proof that the holder's
// process has exited (docs/handover.md, "Pod-aware failover").
type HolderPod struct {
	// Holder is the holder identity of the record the mark was written
	// with. A mark whose Holder is not the record's holder was left by an
	// earlier writer and means nothing.
	Holder string `json:"holder"`
	// Namespace, Pod and UID name the Pod object the holder runs in; a Pod
	// of the same name with another UID is another Pod.
	Namespace string `json:"namespace"`
	Pod       string `json:"pod"`
	UID       string `json:"uid"`
	// Container is the name of the holder's container in that Pod.
	Container string `json:"container"`
	// RestartCount and StartedAt are the kubelet's restartCount and
	// state.running.startedAt of the container's run the holder's process
	// belongs to, as the holder read them from its own Pod's status after
	// it checked that they describe its own run.
	RestartCount int32       `json:"restartCount"`
	StartedAt    metav1.Time `json:"startedAt"`
	// ProcessStart is a moment at which the holder's process was alive, on
	// its own clock, which is the clock of its node and so of the kubelet
	// that reports its container's end. Microsecond precision.
	ProcessStart metav1.MicroTime `json:"processStart"`
}

// Complete reports whether every field a follower relies on is set.
func (p HolderPod) Complete() bool {
	return p.Holder != "" && p.Namespace != "" && p.Pod != "" && p.UID != "" && p.Container != "" &&
		p.RestartCount >= 0 && !p.StartedAt.IsZero() && !p.ProcessStart.IsZero()
}

// HolderPodSource supplies the mark a holder writes with its record; false
// while it has none to publish (the holder's own Pod status has not yet
// shown its run). It is called on every write and must not block.
type HolderPodSource func() (HolderPod, bool)

// ReadHolderPod decodes the mark among annotations; false when there is
// none, it cannot be decoded or it is incomplete.
func ReadHolderPod(annotations map[string]string) (HolderPod, bool) {
	raw, ok := annotations[HolderPodAnnotationKey]
	if !ok {
		return HolderPod{}, false
	}
	var p HolderPod
	if err := json.Unmarshal([]byte(raw), &p); err != nil || !p.Complete() {
		return HolderPod{}, false
	}
	return p, true
}
