// Package handover is cooperative preemption (docs/handover.md), a protocol
// the elector core calls through its Handover interface.
//
// A candidate entitled to the lock asks the holder in the handover
// annotation of the lock object; the holder answers: it accepts with the
// time within which its work will have stopped, or it refuses. An accepted
// request ends the holder's term; once its work has stopped the holder
// writes the record naming the candidate. A refusal is an answer: the
// candidate does not take the lock by force, and asks again when it is told
// its comparison may have changed (Triggered) or when its request has grown
// older than a lease. Only a holder that gives no answer within the grace
// period is preempted by force.
//
// Guarantees: a candidate writes at most one request per RetryPeriod; it
// never takes the lock by force from a holder that accepted its request
// and has not yet broken its promise (the promised stop plus a RetryPeriod);
// it defers to another candidate's live request that it does not outrank,
// and to one the holder accepted; a holder answers only fresh requests
// (within a lease of its clock) addressed to it.
//
// What it assumes of the core: every method is called from the election
// loop only, with the clock reading of the decision in progress; the lock's
// annotation (Lock.Handover) is the one of the object version the core last
// read or was delivered; the core writes the record that ends a term (the
// protocol only writes the annotation), keeps the fence, and tells the
// protocol the stop a holder may promise. The core calls it through Role,
// which stands for a candidate without handover too (then nothing is
// asked, pending, promised or waited for), and which takes the core's
// decisions on the annotation and on the record that ends a term
// (Respond, StopWithin, NamedSince, Stands, SuccessorRecord) from what the core
// passes in: its fence, the lease it honours, whether it is in session
// mode; validation asks Problems. The protocol holds no reference to the
// core: only the lock, its settings, a logger and a metrics sink.
package handover
