package features

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-multierror"
	"go.uber.org/zap"
)

// Type names reported in FlagInfo.Type.
const (
	typeBool     = "bool"
	typeString   = "string"
	typeDuration = "duration"
	typeInt      = "int"
)

// Registry is a set of typed flags read from one source of variables.
//
// A Registry is safe for concurrent use. Flags may be registered at any time,
// usually from package-level variable initialisers. Registration panics on
// programming errors, so that they show at initialisation, never at run time:
//   - a name that does not look like an environment variable
//     ([A-Za-z_][A-Za-z0-9_]*);
//   - a default that is not a valid value itself (e.g. a non-positive
//     duration) or that a validator rejects;
//   - a name registered again with another type or default.
//
// Registering a name again with the same type and default is allowed and
// returns the existing flag, sharing its value; the first registration's
// description and validators stay in force and the new ones are ignored.
type Registry struct {
	lookup func(string) (string, bool)
	// logger receives the warnings about invalid values; unset means
	// zap.L() at the time of the warning, so zap.ReplaceGlobals is honoured.
	logger atomic.Pointer[zap.Logger]

	mu    sync.Mutex
	flags map[string]entry
}

// newRegistry returns an empty registry reading variables through lookup,
// which has the signature of os.LookupEnv. A nil lookup means os.LookupEnv.
// lookup is called at most once per flag.
func newRegistry(lookup func(string) (string, bool)) *Registry {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	return &Registry{lookup: lookup, flags: map[string]entry{}}
}

var defaultRegistry = newRegistry(os.LookupEnv)

// Default returns the registry that reads the process environment and holds
// the project's flags (see flags.go).
func Default() *Registry { return defaultRegistry }

// SetLogger sets the logger that receives one warning per invalid value. nil
// restores the default, zap.L(). Warnings are emitted when a flag is first
// read, so call SetLogger before reading flags to see them; Validate reports
// the same problems regardless of logging.
func (r *Registry) SetLogger(l *zap.Logger) { r.logger.Store(l) }

func (r *Registry) currentLogger() *zap.Logger {
	if l := r.logger.Load(); l != nil {
		return l
	}
	return zap.L()
}

// FlagInfo describes a flag and its current value, for `meshd env` and its
// reference, docs/env.md.
type FlagInfo struct {
	// Name is the environment variable.
	Name string
	// Type is "bool", "string", "duration" or "int".
	Type string
	// Default is the default value, formatted as it would be written in the
	// environment (durations as time.Duration.String, e.g. "30s").
	Default string
	// Value is the value in effect, formatted like Default. It is the default
	// when the variable is unset, empty or invalid.
	Value string
	// IsSet reports whether the variable is present in the environment, even
	// if empty or invalid.
	IsSet bool
	// Description says what the flag does.
	Description string
}

// valueError describes a variable whose value was rejected. It is what
// Validate collects and what the warning log describes.
type valueError struct {
	// Name is the environment variable.
	Name string
	// Type is the flag type, e.g. "duration".
	Type string
	// Value is the rejected value, verbatim.
	Value string
	// Default is the default used instead, formatted like FlagInfo.Default.
	Default string
	// Err says why the value was rejected.
	Err error
}

// Error names the variable, the value, the type and why the value was
// refused, then the default.
func (e *valueError) Error() string {
	return fmt.Sprintf("$%s=%q: not a valid %s: %v (default %q)", e.Name, e.Value, e.Type, e.Err, e.Default)
}

// Unwrap returns the reason the value was rejected.
func (e *valueError) Unwrap() error { return e.Err }

// flagOption customises a flag at registration.
type flagOption[T any] struct {
	validate func(T) error
}

// withValidator adds a check that a parsed value must pass; a value it rejects
// is treated like one that does not parse (default used, problem reported).
// The default value must pass it, or registration panics.
func withValidator[T any](validate func(T) error) flagOption[T] {
	return flagOption[T]{validate: validate}
}

// oneOf accepts only the given strings (compared exactly).
func oneOf(allowed ...string) flagOption[string] {
	list := append([]string(nil), allowed...)
	return withValidator(func(v string) error {
		for _, a := range list {
			if v == a {
				return nil
			}
		}
		return fmt.Errorf("want one of %s", strings.Join(quoteAll(list), ", "))
	})
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = fmt.Sprintf("%q", v)
	}
	return out
}

// flagValue is the type of a flag's value.
type flagValue interface {
	bool | string | time.Duration | int
}

// Flag is a registered flag holding a value of type T. Obtain one from
// register; the zero Flag is not usable. A Flag is a small handle and may be
// copied; copies share the cached value.
type Flag[T flagValue] struct {
	s *flagState[T]
}

// Get returns the value in effect: the parsed environment value, or the
// default when the variable is unset, empty or invalid. The environment is
// read on the first call only; later calls return the cached value.
func (f Flag[T]) Get() T {
	f.s.resolve()
	return f.s.value
}

// register registers the flag name on r, with its default, a description
// for `meshd env` and docs/env.md, and validators. Values are read by type:
//   - bool: strconv.ParseBool's words (1, t, T, TRUE, true, True, 0, f, F,
//     FALSE, false, False);
//   - string: the value verbatim;
//   - time.Duration: time.ParseDuration's syntax (e.g. "30s", "1m30s"), and
//     it must be positive, as must def;
//   - int: a base-10 integer that fits in an int.
//
// T is inferred from def: write a duration's default as a time.Duration
// (an untyped 30 registers an int flag). See Registry for the rules on
// names, defaults and repeated registration.
func register[T flagValue](r *Registry, name string, def T, description string, opts ...flagOption[T]) Flag[T] {
	typ, parse, format := codecOf[T]()
	return registerFlag(r, name, typ, def, description, parse, format, opts)
}

// codecOf returns the type name, parser and formatter of flags of type T.
func codecOf[T flagValue]() (typ string, parse func(string) (T, error), format func(T) string) {
	var p, f any
	switch any(*new(T)).(type) {
	case bool:
		typ, p, f = typeBool, parseBool, strconvFormatBool
	case string:
		typ, p, f = typeString, parseString, formatString
	case time.Duration:
		typ, p, f = typeDuration, parseDuration, formatDuration
	case int:
		typ, p, f = typeInt, parseInt, formatInt
	}
	return typ, p.(func(string) (T, error)), f.(func(T) string)
}

// registerFlag is the common part of register; the rules it
// enforces are documented on Registry.
func registerFlag[T flagValue](r *Registry, name, typ string, def T, description string,
	parse func(string) (T, error), format func(T) string, opts []flagOption[T],
) Flag[T] {
	if !validName(name) {
		panic(fmt.Sprintf("features: invalid flag name %q", name))
	}
	s := &flagState[T]{
		name:        name,
		typ:         typ,
		description: description,
		def:         def,
		lookup:      r.lookup,
		logger:      r.currentLogger,
		parse:       parse,
		format:      format,
	}
	for _, o := range opts {
		if o.validate != nil {
			s.validators = append(s.validators, o.validate)
		}
	}
	// The default must survive the same checks as an environment value.
	if _, err := parse(format(def)); err != nil {
		panic(fmt.Sprintf("features: default %q of %s is invalid: %v", format(def), name, err))
	}
	if err := s.validate(def); err != nil {
		panic(fmt.Sprintf("features: default %q of %s is invalid: %v", format(def), name, err))
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.flags[name]; ok {
		existing, sameT := old.(*flagState[T])
		if !sameT || existing.typ != typ || existing.def != def {
			oi := old.static()
			panic(fmt.Sprintf("features: %s registered twice with different definitions: %s default %q, then %s default %q",
				name, oi.Type, oi.Default, typ, format(def)))
		}
		return Flag[T]{s: existing}
	}
	r.flags[name] = s
	return Flag[T]{s: s}
}

func validName(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		switch {
		case c == '_', c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z':
		case c >= '0' && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// entry is the type-erased view of a flag used by the registry.
type entry interface {
	// static returns the registration data without reading the environment.
	static() FlagInfo
	// info reads the flag (once) and returns its full description.
	info() FlagInfo
	// problem reads the flag (once) and returns why its value was rejected,
	// or nil.
	problem() error
}

type flagState[T flagValue] struct {
	name        string
	typ         string
	description string
	def         T
	lookup      func(string) (string, bool)
	logger      func() *zap.Logger
	parse       func(string) (T, error)
	format      func(T) string
	validators  []func(T) error

	once  sync.Once
	value T
	isSet bool
	err   *valueError
}

func (s *flagState[T]) validate(v T) error {
	for _, check := range s.validators {
		if err := check(v); err != nil {
			return err
		}
	}
	return nil
}

// resolve reads the variable once and caches the outcome.
func (s *flagState[T]) resolve() {
	s.once.Do(func() {
		s.value = s.def
		raw, ok := s.lookup(s.name)
		s.isSet = ok
		if !ok || raw == "" {
			return
		}
		v, err := s.parse(raw)
		if err == nil {
			err = s.validate(v)
		}
		if err != nil {
			s.err = &valueError{Name: s.name, Type: s.typ, Value: raw, Default: s.format(s.def), Err: err}
			s.logger().Warn("invalid environment variable; using its default",
				zap.String("name", s.name),
				zap.String("value", raw),
				zap.String("default", s.err.Default),
				zap.String("type", s.typ),
				zap.Error(err))
			return
		}
		s.value = v
	})
}

func (s *flagState[T]) static() FlagInfo {
	return FlagInfo{Name: s.name, Type: s.typ, Default: s.format(s.def), Description: s.description}
}

func (s *flagState[T]) info() FlagInfo {
	s.resolve()
	fi := s.static()
	fi.Value = s.format(s.value)
	fi.IsSet = s.isSet
	return fi
}

func (s *flagState[T]) problem() error {
	s.resolve()
	if s.err == nil {
		return nil // avoid a typed nil in the error interface
	}
	return s.err
}

// sorted returns the registered flags ordered by name.
func (r *Registry) sorted() []entry {
	r.mu.Lock()
	names := make([]string, 0, len(r.flags))
	for n := range r.flags {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]entry, len(names))
	for i, n := range names {
		out[i] = r.flags[n]
	}
	r.mu.Unlock()
	return out
}

// Validate reads every registered flag (once, like Get) and returns all
// rejected values at once as a *multierror.Error with one error per
// variable, ordered by variable name, each naming the variable, the value,
// its type, why it was rejected and the default; nil when every value is
// valid. Flags keep working
// with their defaults either way: refusing to start is the caller's choice.
func (r *Registry) Validate() error {
	var result *multierror.Error
	for _, e := range r.sorted() {
		if err := e.problem(); err != nil {
			result = multierror.Append(result, err)
		}
	}
	return result.ErrorOrNil()
}

// All reads every registered flag (once, like Get) and describes them, sorted
// by name.
func (r *Registry) All() []FlagInfo {
	entries := r.sorted()
	out := make([]FlagInfo, len(entries))
	for i, e := range entries {
		out[i] = e.info()
	}
	return out
}
