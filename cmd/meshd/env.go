package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/hashicorp/go-multierror"
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
invalid value is listed with the default that replaces it, and reported.

--markdown prints the reference table of docs/env.md instead, which does
not depend on the environment.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if markdown {
				_, err := io.WriteString(cmd.OutOrStdout(), features.Markdown())
				return err
			}
			// Problems are printed below, not logged as they are read.
			features.SetLogger(zap.NewNop())
			problems := features.Validate()
			flags := features.All()
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
			var merr *multierror.Error
			if errors.As(problems, &merr) {
				for _, p := range merr.Errors {
					fmt.Fprintln(cmd.ErrOrStderr(), "warning:", p)
				}
			}
			return nil
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
