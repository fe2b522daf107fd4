// Package features holds meshd's typed environment flags.
//
// Every flag is registered once, in a Registry: a name, a type (bool,
// string, time.Duration or int), a default and a description. Default is
// the registry that reads the process environment and holds the project's
// flags (flags.go); the flags that only configure elections are read
// through ElectionOptions, the others are exported for the daemon. The set
// of flags is this package's own: programs read, validate and document
// them, and keep settings of their own elsewhere.
//
// Guarantees:
//
//   - A flag is read at most once. The environment is consulted on the first
//     Get (or on the first Validate or All that covers the flag) and the result
//     is cached for the life of the process: changing the environment later has
//     no effect on that flag.
//   - A flag never fails. A value that cannot be parsed, or that its validator
//     rejects, is replaced by the default. The problem is logged once as a zap
//     warning naming the variable, the bad value and the default used (see
//     Registry.SetLogger), and it is kept so that Validate can report every problem of a
//     registry at once. A daemon that prefers to refuse bad settings calls
//     Validate at start-up.
//   - A variable that is set to the empty string counts as not set (its flag
//     holds the default, without a problem), so that templated manifests
//     rendering `value: ""` keep the default. Leading and trailing spaces are
//     ignored for bool, int and duration values; string values are taken as is.
//
// Limits: flags are process-wide settings, not configuration that can be
// reloaded.
package features
