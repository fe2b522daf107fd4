package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/meshd-io/meshd/pkg/features"
)

func newEnvCommand() *cobra.Command {
	var (
		markdown bool
		output   string
	)
	cmd := &cobra.Command{
		Use:   "env",
		Short: "List the environment variables meshd reads",
		Long: `List every environment variable (feature flag) meshd reads, with its type,
default, the value in effect in this environment, and what it does. An
invalid value is listed with its default and reported, and "meshd env"
exits 1: "meshd run" refuses to start with it.

--markdown prints the reference table of docs/env.md instead, which does
not depend on the environment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if markdown {
				_, err := io.WriteString(cmd.OutOrStdout(), envMarkdown())
				return err
			}
			// Problems are reported below, not logged as they are read.
			problems := featureProblems()
			features.Default().SetLogger(zap.NewNop())
			flags := features.Default().All()
			defer features.Default().SetLogger(nil)
			switch output {
			case outputJSON:
				if err := writeFlagsJSON(cmd.OutOrStdout(), flags); err != nil {
					return err
				}
			case outputTable:
				if err := writeFlagsTable(cmd.OutOrStdout(), flags); err != nil {
					return err
				}
			default:
				return fmt.Errorf("invalid -o %q: want %s or %s", output, outputTable, outputJSON)
			}
			// Worded as "meshd run" words them: it refuses to start with any.
			if len(problems) == 0 {
				return nil
			}
			lines := make([]string, len(problems))
			for i, p := range problems {
				lines[i] = "  - " + p.Error()
			}
			return fmt.Errorf("%d invalid environment settings (meshd run refuses to start with them):\n%s",
				len(problems), strings.Join(lines, "\n"))
		},
	}
	cmd.Flags().BoolVar(&markdown, "markdown", false, "print the Markdown reference (docs/env.md)")
	cmd.Flags().StringVarP(&output, "output", "o", outputTable, "output format: table or json")
	return cmd
}

func writeFlagsTable(w io.Writer, flags []features.FlagInfo) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTYPE\tDEFAULT\tVALUE\tDESCRIPTION")
	for _, f := range flags {
		value := f.Value
		if f.IsSet {
			value += " (set)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", f.Name, f.Type, quoteEmpty(f.Default), quoteEmpty(value), f.Description)
	}
	return tw.Flush()
}

// flagJSON is a flag as -o json prints it.
type flagJSON struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Default     string `json:"default"`
	Value       string `json:"value"`
	IsSet       bool   `json:"isSet"`
	Description string `json:"description"`
}

func writeFlagsJSON(w io.Writer, flags []features.FlagInfo) error {
	out := make([]flagJSON, len(flags))
	for i, f := range flags {
		out[i] = flagJSON(f)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(out)
}

func quoteEmpty(s string) string {
	if s == "" {
		return `""`
	}
	return s
}

// envMarkdown is docs/env.md: a title, what meshd does with an invalid
// value (a program embedding the library gets the default and a warning),
// and a table of the registered flags' names, types, defaults and
// descriptions, sorted by name. It shows nothing of the environment.
func envMarkdown() string {
	features.Default().SetLogger(zap.NewNop()) // the values read are not shown
	defer features.Default().SetLogger(nil)
	return flagsMarkdown(features.Default().All())
}

// flagsMarkdown renders the reference of flags in the order given.
func flagsMarkdown(flags []features.FlagInfo) string {
	var b strings.Builder
	b.WriteString("# Environment variables\n\n")
	b.WriteString("Each variable is read once, when first used. A variable that is unset or empty takes its default; ")
	b.WriteString("an invalid value makes `meshd run` refuse to start and `meshd env` exit 1, naming it ")
	b.WriteString("(a program embedding the library gets the default and a warning instead).\n\n")
	b.WriteString("| Name | Type | Default | Description |\n")
	b.WriteString("|------|------|---------|-------------|\n")
	for _, f := range flags {
		fmt.Fprintf(&b, "| `%s` | %s | `%s` | %s |\n", f.Name, f.Type, quoteEmpty(f.Default), markdownCell(f.Description))
	}
	return b.String()
}

// markdownCell keeps a description on one table row: whitespace collapses to
// single spaces, pipes are escaped, and outside `code spans` the characters
// <, > and & are escaped so that text like <namespace> is not taken for HTML.
func markdownCell(s string) string {
	html := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
	s = strings.Join(strings.Fields(s), " ")
	parts := strings.Split(s, "`")
	for i := 0; i < len(parts); i += 2 { // even parts are outside code spans
		parts[i] = html.Replace(parts[i])
	}
	return strings.ReplaceAll(strings.Join(parts, "`"), "|", `\|`)
}
