package elector

import "testing"

func TestSlotPriorityDiffersByIdentity(t *testing.T) {
	h := newHarness(t)
	a, b := h.elector("a", "", nil, nil), h.elector("b", "", nil, nil)
	if a.slotPriority() == b.slotPriority() {
		t.Fatal("two identities share a slot priority for the same lock")
	}
	if a.slotPriority() != h.elector("a", "", nil, nil).slotPriority() {
		t.Fatal("the slot priority of one candidate and lock is not stable")
	}
}
