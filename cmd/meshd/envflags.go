package main

import (
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/meshd-io/meshd/internal/errlist"
)

// envBindings let a flag take its value from an environment variable, as
// istiod's settings do: an explicit flag wins, then a non-empty variable,
// then the flag's default. The variable is named in the flag's help.
type envBindings struct {
	bindings []envBinding
	// lookup reads a variable; os.LookupEnv when nil.
	lookup func(string) (string, bool)
}

type envBinding struct {
	flag, env string
}

// stringVarP defines a string flag, with an optional shorthand, bound to
// the variable env.
func (e *envBindings) stringVarP(fs *pflag.FlagSet, p *string, name, shorthand, env, def, usage string) {
	fs.StringVarP(p, name, shorthand, def, fmt.Sprintf("%s (env %s)", usage, env))
	e.bindings = append(e.bindings, envBinding{flag: name, env: env})
}

// boolVar defines a boolean flag bound to the variable env.
func (e *envBindings) boolVar(fs *pflag.FlagSet, p *bool, name, env string, def bool, usage string) {
	fs.BoolVar(p, name, def, fmt.Sprintf("%s (env %s)", usage, env))
	e.bindings = append(e.bindings, envBinding{flag: name, env: env})
}

// apply sets every bound flag not given on the command line from its
// variable, when that is set and not empty. It reports every variable it
// could not apply, joined.
func (e *envBindings) apply(fs *pflag.FlagSet) error {
	var errs []error
	lookup := e.lookup
	if lookup == nil {
		lookup = os.LookupEnv
	}
	for _, b := range e.bindings {
		f := fs.Lookup(b.flag)
		if f == nil || f.Changed {
			continue
		}
		v, ok := lookup(b.env)
		if !ok || v == "" {
			continue
		}
		if err := f.Value.Set(v); err != nil {
			errs = append(errs, fmt.Errorf("$%s=%q (for --%s): %w", b.env, v, b.flag, err))
		}
	}
	return errlist.Join(errs...)
}
