// Package priority is the mesh's priority rule, on its own so that both
// ways of electing a leader use one definition: the steal rule of racing
// elections (LocationPrioritizedComparison) and the ranking of coordinated
// ones (Compare). It knows holder keys and revisions, nothing of locks.
package priority
